"""Designing with a multi-output law (#36): one run of one cost reveals every output of the law, so
``dw suggest`` values a candidate by what all its outputs teach together, charges it once, and the
refit rounds use every output (fit/predict.design, fit/design_rounds.py, sweep/suggest.py).

The world is planted from the law with known parameters on the CPU-sized grid of tests/test_design.py;
before this, ``dw suggest`` on such a fit ended in a traceback (KeyError: 'output': the candidates,
one row per run, name no output)."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from depthwidth.fit.design_rounds import checkpoint_design, rml_ensemble, round_ensemble
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.predict import Ensemble, design, ensemble_of, parse_target
from depthwidth.fit.userlaw import load_law
from tests.helpers import dw
from tests.test_design import SWEEP, sweeps  # noqa: F401 (sweeps: the fixture, DW_SWEEPS and DW_RUNS in tmp_path)

PARAMS = {
    "E1": {"bounds": [0.1, 5], "start": [1, 2.5]},
    "E2": {"bounds": [0.1, 5], "start": [1, 2.5]},
    "A": {"bounds": [0.01, 100], "start": [0.3, 3], "log": True},
    "B": {"bounds": [0.01, 100], "start": [0.3, 3], "log": True},
    "alpha": {"bounds": [0, 2], "start": [0.2, 0.6]},
    "beta": {"bounds": [0, 2], "start": [0.2, 0.6]},
}
# beta is revealed by the second output alone: a design that read only the first would learn nothing of it
LAW = {
    "name": "two-tasks",
    "outputs": {"code": "E1 + A*(N/1e5)**(-alpha)", "math": "E2 + B*(N/1e5)**(-beta)"},
    "columns": {"N": "params"},
    "params": PARAMS,
}
# both outputs reveal alpha; CODE is the same law without its second output
SHARED = {
    "name": "two-tasks-shared",
    "outputs": {"code": "E1 + A*(N/1e5)**(-alpha)", "math": "E2 + B*(N/1e5)**(-alpha)"},
    "columns": {"N": "params"},
    "params": {k: v for k, v in PARAMS.items() if k != "beta"},
}
CODE = {
    "name": "code-only",
    "formula": "E1 + A*(N/1e5)**(-alpha)",
    "columns": {"N": "params"},
    "params": {k: PARAMS[k] for k in ("E1", "A", "alpha")},
}
TRUTH = {"E1": 2.0, "A": 1.0, "alpha": 0.3, "E2": 1.5, "B": 0.8, "beta": 0.5}


def _plant(rows: pd.DataFrame, seed: int, beta: str = "beta") -> pd.DataFrame:
    """Each run's two losses from the law at TRUTH: a run effect both share (0.3%) and each its own (0.4%)."""
    rng = np.random.default_rng(seed)
    t, n = TRUTH, rows["params"].to_numpy() / 1e5
    run = rng.normal(0, 0.003, len(n))
    out = rows.copy().reset_index(drop=True)
    out["code"] = (t["E1"] + t["A"] * n ** -t["alpha"]) * np.exp(run + rng.normal(0, 0.004, len(n)))
    out["math"] = (t["E2"] + t["B"] * n ** -t[beta]) * np.exp(run + rng.normal(0, 0.004, len(n)))
    out["run"] = [f"p{seed}_{i}" for i in range(len(n))]
    return out


@pytest.fixture
def world(sweeps):  # noqa: F811
    """The sweep m (tests/test_design.py's CPU-sized grid), its candidates (one row per run: no output
    column) and the configurations of a first set of runs."""
    from depthwidth.sweep.suggest import candidates, rows_of

    (sweeps / "m.yaml").write_text(yaml.safe_dump(SWEEP))
    runs, _ = candidates("m")
    rows = pd.DataFrame(rows_of(runs))
    cost = np.array([r.figures["device_hours"] for r in runs])
    first = rows[rows.depth.isin([1, 2, 4, 16])].drop_duplicates(["depth", "width"])
    return {"tmp": sweeps.parent, "rows": rows, "cost": cost, "ids": [r.run_id for r in runs], "first": first}


def test_dw_suggest_with_a_multi_output_law_values_every_output_and_charges_each_run_once(world):
    tmp = world["tmp"]
    _plant(world["first"], 0)[["run", "params", "depth", "width", "tokens", "code", "math"]].to_csv(
        tmp / "table.csv", index=False
    )
    (tmp / "law.yaml").write_text(yaml.safe_dump(LAW, sort_keys=False))
    fit_json = tmp / "runs" / "m" / "fit.json"
    fit_json.parent.mkdir(parents=True)
    p = dw(
        "fit", "--runs", str(tmp / "table.csv"), "--law", str(tmp / "law.yaml"), "--bootstrap", "100",
        "--out", str(fit_json),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    fit = json.loads(fit_json.read_text())
    assert fit["n_runs"] == 8 and fit["n"] == 16  # 8 runs, two outputs each
    cost = world["cost"]
    budget = float(np.sort(cost)[:6].sum())  # room for about six runs, three if each were charged per output
    p = dw("suggest", "m", "--budget", repr(budget), "--target", "beta", "--json", "--out", str(tmp / "next.yaml"))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    picked = [r["run_id"] for r in doc["runs"]]
    assert len(picked) == len(set(picked)) >= 4
    # one run, one cost: the spent budget is the picks' own hours, and no candidate left out was affordable
    hours = sum(r["hours"] for r in doc["runs"])
    assert doc["spent_hours"] == pytest.approx(hours) and hours <= budget * (1 + 1e-9)
    left = [c for i, c in zip(world["ids"], cost) if i not in picked]
    assert budget - hours < min(left)
    # beta is in the second output only: the design learns it from the outputs a run reveals together
    assert doc["interval_after"] < 0.8 * doc["interval_now"], doc
    for r in doc["runs"]:  # each pick's every output predicted; no single predicted loss stands for them
        assert r["predicted_loss"] is None and set(r["outputs"]) == {"code", "math"}
        assert all(o["pi"][0] < o["loss"] < o["pi"][1] for o in r["outputs"].values())
    nxt = yaml.safe_load((tmp / "next.yaml").read_text())
    refs = [e["ref"] for b in nxt["blocks"] for e in b["runs"]]
    assert len(refs) == len(picked) and all(set(r["predicted"]) == {"code", "math"} for r in refs)
    p = dw("suggest", "m", "--budget", repr(budget), "--target", "beta", "--no-write")  # the table says each output
    assert p.returncode == 0 and "code " in p.stdout and "; math " in p.stdout, p.stdout + p.stderr
    # the dry run's predictions: every output of each planned run, its value counting them all
    p = dw("sweep", "m", "--dry-run", "--json", "--target", "beta")
    assert p.returncode == 0, p.stderr
    planned = [r["prediction"] for r in json.loads(p.stdout)["runs"]]
    assert planned and all(set(r["outputs"]) == {"code", "math"} and r["value_per_hour"] > 0 for r in planned)


def test_a_second_output_that_reveals_the_target_raises_each_runs_value(world):
    """The same fit's replicates read as the two-output law and as its first output alone: every
    candidate run is worth more, and leaves the target's interval narrower, when it reveals both."""
    fit = run_fit(runs=_plant(world["first"], 1, beta="alpha"), law=SHARED, bootstrap=100, write=False)
    full = ensemble_of(fit)
    names = list(full.law.names)
    code = load_law(CODE)
    sub = [names.index(n) for n in code.names]
    alone = Ensemble(code, full.point[sub], full.theta[:, sub], dict(full.noise), source="fit")
    rows, cost = world["rows"], world["cost"]
    both = design(full, parse_target("alpha", full.law), rows, cost, k=0)
    one = design(alone, parse_target("alpha", code), rows, cost, k=0)
    assert both.width_now == one.width_now and both.outputs == ("code", "math") and one.outputs == ()
    assert (both.width_alone <= one.width_alone * (1 + 1e-9)).all()
    assert (both.value >= one.value * (1 - 1e-9)).all()
    assert (both.value > 1.2 * one.value).any(), both.value / one.value  # the outputs share a run's noise: not 2x
    # a greedy batch charged once per run: the same budget buys as many runs as the one-output law's
    budget = float(np.sort(cost)[:5].sum())
    b2 = design(full, parse_target("alpha", full.law), rows, cost, budget=budget)
    assert b2.spent <= budget and b2.spent == pytest.approx(cost[b2.picks].sum()) and len(b2.picks) >= 4
    assert b2.width_after[-1] <= design(alone, parse_target("alpha", code), rows, cost, budget=budget).width_after[-1]


def test_the_rounds_refit_every_output_and_spend_each_run_once(world):
    rows = world["rows"].drop_duplicates(["depth", "width"]).reset_index(drop=True)
    pool = _plant(rows, 2)
    cost = pool["params"].to_numpy() / 1e5  # a run costs as its size
    law = load_law(LAW)
    # fewer runs than parameters: the RML ensemble, fitted to both outputs of every run
    few = rml_ensemble(law, pool.iloc[:2])
    assert len(few.runs) == 4 and {r["output"] for r in few.runs} == {"code", "math"}
    assert few.noise["run"] > 0 and few.noise["point"] > 0  # a run's outputs share part of its noise
    d = design(few, parse_target("beta", law), pool.iloc[2:], cost[2:], budget=cost[2:].sum() / 3)
    assert d.picks and d.outputs == ("code", "math") and d.spent <= cost[2:].sum() / 3  # promised from the runs
    assert len(d.width_after) == len(d.picks) and few.source == "rml (2 runs)"
    # four runs, eight points for six parameters: dw fit's bootstrap (it counts points, as dw fit does)
    ens, why = round_ensemble(law, pool.iloc[:4], law_spec=LAW, bootstrap=30, max_starts=16)
    assert why is None and ens.from_fit
    stats: dict = {}
    limits = [0.3 * cost.sum(), 0.6 * cost.sum()]

    def ensemble(order):
        e, _ = round_ensemble(law, pool.iloc[order], law_spec=LAW, bootstrap=30, max_starts=16)
        return e

    target = parse_target("beta", law)
    out = checkpoint_design(pool, cost, limits, target, len(law.params), ensemble, outputs=2, stats=stats)
    assert stats["fallbacks"] == 0, stats["fallback_reasons"]
    for picks, limit in zip(out, limits):
        assert len(set(picks)) == len(picks) and cost[picks].sum() <= limit * (1 + 1e-12)
    assert len(out[-1]) > len(out[0])


def test_dw_suggest_says_where_the_fit_it_starts_from_does_not_identify_its_target(tmp_path, monkeypatch, capsys):
    """A world with D_crit below one layer (kappa 0.05): the fit stores D_crit(W=64) as not identified,
    and dw suggest's promise says it narrows that interval rather than promising to identify it."""
    from depthwidth.simulate import simulate
    from tests.helpers import REPO, dw_in_process

    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    (tmp_path / "sw").mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(tmp_path / "sw"))
    doc = yaml.safe_load((REPO / "sweeps" / "demo.yaml").read_text())
    (tmp_path / "sw" / "kd.yaml").write_text(yaml.safe_dump({**doc, "store": "kk"}))
    (tmp_path / "sw" / "demo.yaml").write_text(yaml.safe_dump(doc))
    simulate("demo", name="kk", root=tmp_path / "runs", set_values="kappa=0.05", seed=0)
    res = run_fit("kk", root=tmp_path / "runs", law="depth-delusion", bootstrap=50, max_starts=300)
    assert res["identification"]["dcrit_range"]["dcrit[W=64]"]["identified"] is False
    code, out, err = dw_in_process(capsys, "suggest", "kd", "--budget", "0.5", "--no-write", "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(n.startswith("the fit does not identify D_crit(W=64) (the law's D_crit(W=64) = ") for n in notes), notes
