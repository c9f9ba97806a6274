"""``dw fit --source wandb``: the run table comes from the W&B API.

Only the W&B server is faked (none is reachable here): the Runs query is
answered by ``ReplayApi`` (tests/test_wandb_source.py) from a response built
on the recorded one, with one W&B run per planted Chinchilla point; wandb's
own ``Run`` class decodes it and ``run_table_from_wandb`` does the rest.
"""

from __future__ import annotations

import copy
import json

import pytest

from depthwidth.core.errors import BadInput
from tests.helpers import assert_bad_input, dw
from tests.test_wandb_source import DATA, ReplayApi

E, A, B, ALPHA, BETA = 1.8, 400.0, 1500.0, 0.34, 0.29


def _response(tmp_path):
    doc = json.loads(DATA.read_text())
    template = doc["data"]["project"]["runs"]["edges"][0]["node"]
    edges = []
    for i, (depth, width) in enumerate([(d, w) for d in (2, 4, 8) for w in (64, 128, 256, 512)]):
        n = copy.deepcopy(template)
        params = 12 * depth * width * width + 2 * 256 * width
        budgets = []
        for tokens in (2e8, 8e8, 3.2e9):
            loss = E + A / params**ALPHA + B / tokens**BETA
            budgets.append({"tokens": int(tokens), "step": int(tokens // 512), "val_loss": loss})
        cfg = json.loads(n["config"])
        cfg["model"]["value"].update(depth=depth, width=width)
        cfg["accounting"]["value"].update(params=params)
        summ = json.loads(n["summaryMetrics"])
        summ.update(
            run_id=f"run{i:02d}",
            params=params,
            depth=depth,
            width=width,
            budgets=budgets,
            final_val_loss=budgets[-1]["val_loss"],
            tokens=budgets[-1]["tokens"],
            status="done",
        )
        n.update(name=f"run{i:02d}", config=json.dumps(cfg), summaryMetrics=json.dumps(summ))
        edges.append({"node": n, "cursor": str(i)})
    doc["data"]["project"]["runs"]["edges"] = edges
    path = tmp_path / "response.json"
    path.write_text(json.dumps(doc))
    return path


def test_fit_pulls_the_table_from_wandb(tmp_path, monkeypatch):
    import wandb

    from depthwidth.fit.pipeline import run_fit

    replay = ReplayApi(_response(tmp_path))
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: replay)
    res = run_fit(
        source="wandb",
        project="dw-lab/depthwidth",
        group="demo",
        law="chinchilla",
        bootstrap=0,
        max_starts=300,
        write=False,
    )
    assert replay.calls and replay.calls[0]["filters"] == {"group": "demo"}
    assert res["n"] == 36
    p = res["params"]
    assert abs(p["alpha"] - ALPHA) < 0.02 and abs(p["beta"] - BETA) < 0.02 and abs(p["E"] - E) < 0.05
    assert res["r2"] > 0.999


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--source", "wandb"], "--project"),
        (["demo", "--source", "wandb", "--project", "a/b"], "exactly one of"),
        (["--source", "mlflow", "--project", "a/b"], "--source"),
        (["--source", "wandb", "--project", "not-a-project"], "ENTITY/PROJECT"),
    ],
)
def test_bad_wandb_source_input(args, needle):
    assert needle in assert_bad_input(dw("fit", *args))


def test_unknown_source_is_rejected_in_process():
    from depthwidth.track.run_source import RunSource

    with pytest.raises(BadInput):
        RunSource(None, None, kind="store")


def test_report_pulls_the_table_from_wandb(tmp_path, monkeypatch):
    import wandb

    import depthwidth.report as rp

    replay = ReplayApi(_response(tmp_path))
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: replay)
    data = rp.load(source="wandb", project="dw-lab/depthwidth", group="demo")
    rep = rp.build(data)
    md = rp.render_markdown(rep)
    assert len(data.points) == 36 and "W=512" in md
    # the loss grid holds the planted final losses
    final = E + A / (12 * 8 * 512 * 512 + 2 * 256 * 512) ** ALPHA + B / 3.2e9**BETA
    assert f"{final:.4f}" in md


def test_report_bad_wandb_source_input():
    assert "--project" in assert_bad_input(dw("report", "--source", "wandb"))
