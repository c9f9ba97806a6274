"""``run_table_from_wandb`` against a W&B API response stored in tests/data.

Only the W&B server is faked (there is none here): ``ReplayApi.runs`` answers
the Runs query from ``tests/data/wandb_api_runs.json`` (the GraphQL response
shape of wandb 0.31's ``Runs`` query with the full ``RunFragment``), applying
the group filter the way the server does.  Every run object is wandb's own
``wandb.apis.public.Run`` built from that response, so config and summary are
decoded by W&B's real code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from depthwidth.core.errors import BadInput
from depthwidth.track.run_source import TABLE_COLUMNS, run_table, run_table_from_wandb

DATA = Path(__file__).parent / "data" / "wandb_api_runs.json"


class ReplayApi:
    def __init__(self, path: Path = DATA):
        self.response = json.loads(path.read_text())
        self.calls: list[dict] = []

    def runs(self, path, filters=None, order="+created_at", per_page=50, include_sweeps=False, lazy=True):
        from wandb.apis.public import Run

        self.calls.append({"path": path, "filters": filters, "lazy": lazy})
        entity, project = path.split("/")
        out = []
        for edge in self.response["data"]["project"]["runs"]["edges"]:
            node = dict(edge["node"])
            if filters and "group" in filters and node["group"] != filters["group"]:
                continue
            out.append(Run(None, entity, project, node["name"], attrs=node, lazy=lazy))
        return out


def test_table_from_recorded_response():
    api = ReplayApi()
    df = run_table_from_wandb("dw-lab/depthwidth", group="demo", api=api)
    assert api.calls == [{"path": "dw-lab/depthwidth", "filters": {"group": "demo"}, "lazy": False}]
    assert list(df.columns) == list(TABLE_COLUMNS)
    assert sorted(set(df["run"])) == ["0f0e0d0c0b0a", "123456abcdef", "a1b2c3d4e5f6"]
    done = df[df["run"] == "a1b2c3d4e5f6"].reset_index(drop=True)
    assert list(done["tokens"]) == [20480, 40960] and list(done["loss"]) == [4.01, 3.7339]
    assert list(done["step"]) == [20, 40]
    assert (done["flops"] == 5529600.0 * done["tokens"]).all()
    r = done.iloc[0]
    assert (r["params"], r["depth"], r["width"], r["seed"], r["shape"], r["status"]) == (
        858880,
        4,
        128,
        42,
        "uniform",
        "done",
    )
    div = df[df["run"] == "0f0e0d0c0b0a"].iloc[0]  # no budgets, no final loss
    assert div["status"] == "diverged" and div["tokens"] == 6144 and math.isnan(div["loss"]) and div["shape"] == "x"
    crashed = df[df["run"] == "123456abcdef"].iloc[0]  # killed: no dw summary, config fills in
    assert crashed["status"] == "failed" and crashed["shape"] == "diamond" and crashed["params"] == 979000
    assert crashed["depth"] == 6 and crashed["width"] == 96 and crashed["seed"] == 42
    assert math.isnan(crashed["loss"])
    # without a group every run of the project
    assert len(run_table_from_wandb("dw-lab/depthwidth", api=ReplayApi())["run"].unique()) == 4


def test_same_table_as_the_run_directories(tmp_path):
    """A run's summary.json read locally and the same summary served by W&B give one table."""
    summary = json.loads(DATA.read_text())["data"]["project"]["runs"]["edges"][0]["node"]["summaryMetrics"]
    d = tmp_path / "demo" / "a1b2c3d4e5f6"
    d.mkdir(parents=True)
    local = {k: v for k, v in json.loads(summary).items() if not k.startswith("_") and "/" not in k}
    (d / "summary.json").write_text(json.dumps(local))
    a = run_table(tmp_path / "demo")
    b = run_table_from_wandb("dw-lab/depthwidth", group="demo", api=ReplayApi())
    b = b[b["run"] == "a1b2c3d4e5f6"].reset_index(drop=True)
    import pandas as pd

    pd.testing.assert_frame_equal(a, b, check_dtype=False)


@pytest.mark.parametrize("project", ["depthwidth", "a/b/c", "", "a b/c"])
def test_bad_project_is_bad_input(project):
    with pytest.raises(BadInput, match="ENTITY/PROJECT"):
        run_table_from_wandb(project, api=ReplayApi())
