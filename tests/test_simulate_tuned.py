"""``dw simulate`` of a tuned sweep (#36): the store records the tuning groups a real submission of the
file would (sweep/submission.py: each submit event's ``group`` and ``tuned``), and the planted loss
depends on the learning rate (simulate/world.py ``LrWorld``: the law's loss times
exp(c·(log10(lr/lr*))²), lr* = lr_mid·(N/N_mid)^(−e)), so ``dw fit --tuned`` fits each group's best
and that best is the rate nearest the planted lr*.  Before, the manifest had no groups and a group's
runs had one loss whatever their rate."""

import json
import math

import numpy as np
import pytest

from depthwidth.core.errors import BadInput
from depthwidth.fit.pipeline import run_fit
from depthwidth.simulate import Noise, simulate
from tests.helpers import dw_in_process

SWEEP = "depth_delusion_tuned"  # 30 configurations x 5 learning rates, 1e-4 .. 1e-3


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("simtuned")


def _events(d):
    return [json.loads(line) for line in (d / "manifest").read_text().splitlines()]


def test_the_store_records_the_tuning_groups_a_real_sweep_of_the_file_would(root, capsys, monkeypatch):
    from depthwidth.track.run_source import run_table

    monkeypatch.setenv("DW_RUNS", str(root))
    code, out, err = dw_in_process(capsys, "sweep", "demo_tuned", "--dry-run", "--no-data-check", "--json")
    assert code == 0, err
    planned = {r["run_id"]: r for r in json.loads(out)["runs"]}
    code, out, err = dw_in_process(capsys, "simulate", "demo_tuned", "--law", "chinchilla", "--name", "dt")
    assert code == 0, err
    assert "tuned: 4 tuning groups over optim.lr" in out
    d = root / "dt"
    ev = {e["run_id"]: e for e in _events(d) if e["event"] == "submit"}
    assert set(ev) == set(planned) and len(ev) == 12  # the same run ids
    for rid, e in ev.items():  # the same group records, as sweep/submission.py writes them
        assert e["group"] == planned[rid]["group"] and e["tuned"] == planned[rid]["tuned"]
        assert e["tuned"]["optim.lr"] == pytest.approx(planned[rid]["tuned"]["optim.lr"], rel=0)
    assert len({e["group"] for e in ev.values()}) == 4
    df = run_table(d)  # what dw fit reads: a group column and an optim.lr column
    assert dict(zip(df["run"], df["group"])) == {k: v["group"] for k, v in planned.items()}
    assert dict(zip(df["run"], df["optim.lr"])) == {k: v["tuned"]["optim.lr"] for k, v in planned.items()}
    code, out, err = dw_in_process(capsys, "status", "dt", "--json")
    assert (
        code == 0
        and {r["run_id"]: r["group"] for r in json.loads(out)["runs"]} == df.set_index("run")["group"].to_dict()
    )
    world = json.loads((d / "world.json").read_text())
    assert set(world["tuning"]["optima"]) == {e["group"] for e in ev.values()}
    # an untuned sweep's store has no groups and no planted lr*
    s = simulate("demo", name="plain", root=root, law="chinchilla")
    assert "tuning" not in s and not any("group" in e for e in _events(root / "plain"))


def test_each_groups_best_rate_is_the_one_nearest_its_planted_optimum(root):
    """No noise: the loss factor is the stated one, the best is the grid value nearest lr* in log,
    the parabola through three rates finds lr* itself, and dw fit --law lr reads back e = 0.25."""
    from depthwidth.fit.tuning import picks
    from depthwidth.track.run_source import run_table

    s = simulate(SWEEP, name="exact", root=root, law="chinchilla", noise=Noise(sigma=0.0, point=0.0))
    t = s["tuning"]
    assert (t["c"], t["e"]) == (0.04, 0.25) and t["lr_mid"] == pytest.approx(math.sqrt(1e-4 * 1e-3))
    df = run_table(root / "exact")
    n = df.groupby("group")["params"].first()
    assert t["N_mid"] == pytest.approx(math.sqrt(n.min() * n.max()))
    for g, opt in t["optima"].items():
        assert opt == pytest.approx(t["lr_mid"] * (n[g] / t["N_mid"]) ** -0.25, rel=1e-12)
    # within a group the final losses are the best one's times exp(c·(log10(lr/lr*))²)
    last = df.sort_values("tokens").groupby("run").last()
    for g, rows in last.groupby("group"):
        opt = t["optima"][g]
        base = rows["loss"] / np.exp(0.04 * np.log10(rows["optim.lr"] / opt) ** 2)
        assert np.allclose(base, base.iloc[0], rtol=1e-12, atol=0)
    found = picks(df)
    assert len(found) == 30
    lrs = sorted(df["optim.lr"].unique())
    for p in found:
        opt = t["optima"][p.group]
        nearest = min(lrs, key=lambda v: abs(math.log(v / opt)))
        assert p.best == nearest, (p.group, p.best, opt)
        assert p.edge is None and p.optimum == pytest.approx(opt, rel=1e-3)  # a parabola in loss, not log loss
    lr = run_fit("exact", root=root, law="lr", write=False)
    assert lr["used"] == 30 and lr["N"]["coef"]["e_N"] == pytest.approx(-0.25, abs=1e-3)
    for kw, flag in (({"lr_curvature": -1.0}, "--lr-curvature"), ({"lr_exponent": math.nan}, "--lr-exponent")):
        with pytest.raises(BadInput, match=flag):
            simulate(SWEEP, name="bad", root=root, **kw)
    assert not (root / "bad").exists()


def test_dw_fit_tuned_on_a_simulated_tuned_sweep_recovers_the_planted_law(root):
    """Default noise: dw fit fits each of the 30 groups' best run and every planted number lies
    inside its interval, with --tuned best and --tuned interpolated."""
    s = simulate(SWEEP, name="noisy", root=root, law="chinchilla", seed=1)
    assert s["runs"] == 150 and len(s["tuning"]["optima"]) == 30
    for mode in ("best", "interpolated"):
        res = run_fit("noisy", root=root, law="chinchilla", tuned=mode, bootstrap=100, max_starts=300, write=False)
        t = res["tuning"]
        assert t["mode"] == mode and t["groups"] == 30 and t["key"] == "optim.lr" and t["points_in_table"] == 300
        assert res["n"] == 60 and res["warnings"][0].startswith("tuned sweep: the law is fitted on each of 30 groups'")
        p = res["planted"]
        assert p["total"] == len(p["numbers"]) >= 7
        for k, v in p["numbers"].items():
            assert v["covered"], (mode, k, v)
