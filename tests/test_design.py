"""Predictions for planned runs and ``dw suggest`` (fit/predict.py, fit/prior.py, sweep/suggest.py),
checked against planted worlds: the prediction intervals cover held-back runs, the design brackets
D_crit and beats random runs of the same cost, and the written sweep file joins the store."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.predict import design, ensemble_of, parse_target, predict
from depthwidth.simulate.world import Noise, losses, world
from tests.helpers import dw_in_process
from tests.planted import PLANTED, planted_table

DD = get_law("depth-delusion")


def test_prediction_intervals_cover_held_back_runs_where_noise_alone_does_not():
    """5 planted tables (one point per run, noise 0.003): fit all but the 12 largest runs by FLOPs,
    predict those.  The 95% prediction interval (replicates + a new run's noise) holds 57 of 60; an
    interval from the noise alone around the point fit (no parameter uncertainty) holds 52: it would
    fail the 0.9 floor, as does the law's confidence interval (no noise: 52)."""
    inside = noise_only = conf = total = 0
    for seed in range(5):
        df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.003, seed=seed)
        df = df[df.groupby("run").tokens.transform("max") == df.tokens]
        df["flops"] = 6 * df.params * df.tokens
        big = df.groupby("run").flops.max().sort_values().index[-12:]
        train, test = df[~df.run.isin(big)], df[df.run.isin(big)]
        ens = ensemble_of(run_fit(runs=train, law="depth-delusion", bootstrap=200, max_starts=500, write=False))
        p = predict(ens, test)
        L = test.loss.to_numpy()
        inside += int(((L >= p["pi"][0]) & (L <= p["pi"][1])).sum())
        conf += int(((L >= p["ci"][0]) & (L <= p["ci"][1])).sum())
        s = np.sqrt(ens.new_run_var)
        noise_only += int(((L >= p["loss"] * np.exp(-1.96 * s)) & (L <= p["loss"] * np.exp(1.96 * s))).sum())
        total += len(L)
    assert total == 60
    assert inside / total >= 0.9 and noise_only / total < 0.9 and conf / total < 0.9, (inside, noise_only, conf)


def _grid(depths, widths, tokens=2e9):
    df = pd.DataFrame([{"depth": d, "width": w, "tokens": tokens} for d in depths for w in widths])
    df["params"] = 12.0 * df.depth * df.width**2
    return df


def _plant(w, df, seed):
    df = df.copy().reset_index(drop=True)
    cols = {c: df[c].to_numpy() for c in ("depth", "width", "params", "tokens")}
    df["loss"] = losses(w, cols, np.arange(len(df)), seed)
    df["run"] = [f"r{seed}_{i}" for i in range(len(df))]
    return df


def _dcrit_width(df, w=256):
    r = run_fit(runs=df, law="depth-delusion", bootstrap=200, max_starts=500, write=False)
    lo, hi = r["derived"]["dcrit"]["widths"][str(w)]["ci"]
    return hi - lo


def test_the_design_brackets_dcrit_and_beats_random_runs_of_the_same_cost():
    """Planted D_crit(256) = 13.5 (kappa 2.43); the first 9 runs have depths 2, 4, 32: nothing between.
    The design's picks at W = 256 lie on both sides of it, and after them (planted losses, refit) the
    interval of D_crit(256) is narrower than after random runs of the same cost (median of 3 draws)."""
    w = world("depth-delusion", noise=Noise(sigma=0.01))
    init = _plant(w, _grid([2, 4, 32], [128, 256, 512]), 1)
    cand = _grid([2, 4, 6, 8, 12, 16, 20, 24, 32, 48], [128, 256, 512])
    cost = (6 * cand.params * cand.tokens / 1e17).to_numpy()
    budget = 6 * float(np.median(cost))
    ens = ensemble_of(run_fit(runs=init, law="depth-delusion", bootstrap=200, max_starts=500, write=False))
    d = design(ens, parse_target("dcrit@256", ens.law), cand.to_dict("records"), cost, budget=budget)
    assert sum(cost[d.picks]) <= budget and d.width_after == sorted(d.width_after, reverse=True)
    picks = cand.iloc[d.picks]
    at = picks[picks.width == 256].depth
    assert (at < 13.5).any() and (at > 13.5).any(), picks
    designed = _dcrit_width(pd.concat([init, _plant(w, picks, 7)]))
    rng = np.random.default_rng(3)
    random = []
    for _ in range(3):
        sel, spent = [], 0.0
        for j in rng.permutation(len(cand)):
            if spent + cost[j] <= budget:
                sel.append(j)
                spent += cost[j]
        random.append(_dcrit_width(pd.concat([init, _plant(w, cand.iloc[sel], 7)])))
    assert designed < float(np.median(random)), (designed, random)


SWEEP = {
    "description": "CPU-sized depth x width grid for dw suggest",
    "groups": {"model": "vwt", "data": "synthetic"},
    "fixed": {"model.heads": 2, "model.quantum": 8, "train.seq_len": 32, "train.batch_size": 4, "train.steps": 20},
    "axes": {"model.width": [32, 64], "model.depth": [1, 2, 4, 8, 16]},
}


@pytest.fixture
def sweeps(tmp_path, monkeypatch):
    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    (d / "g.yaml").write_text(yaml.safe_dump(SWEEP))
    return d


def test_dw_suggest_from_the_prior_writes_a_sweep_file_that_joins_the_store(sweeps, capsys):
    code, out, err = dw_in_process(capsys, "suggest", "g", "--prior", "published", "--budget", "1e-9")
    assert code == 2 and err.count("\n") == 1 and "cheapest candidate" in err and "1L×32" in err
    code, out, err = dw_in_process(capsys, "suggest", "g", "--prior", "published", "--budget", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["target"] == "dcrit@64" and doc["runs"] and doc["spent_hours"] <= 1
    assert doc["interval_after"] < doc["interval_now"]
    nxt = yaml.safe_load((sweeps / "g_next.yaml").read_text())
    assert nxt["store"] == "g" and sum(len(b["runs"]) for b in nxt["blocks"]) == len(doc["runs"])
    code, out, err = dw_in_process(capsys, "sweep", "g_next", "--dry-run", "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert {r["run_id"] for r in planned["runs"]} == {r["run_id"] for r in doc["runs"]}  # the same run ids
    for r in planned["runs"]:
        assert f"run.dir={sweeps.parent / 'runs' / 'g' / r['run_id']}" in r["overrides"]  # in g's store
        assert "run.sweep=g" in r["overrides"]
    # no runs and no --prior: a first design from the published prior; --rounds 2 spends half now
    code, out, err = dw_in_process(capsys, "suggest", "g", "--budget", "1e-5", "--rounds", "2", "--json", "--no-write")
    half = json.loads(out)
    assert code == 0 and half["from"] == "prior published" and 0 < half["spent_hours"] <= 0.5e-5
    assert any("no finished runs yet" in n for n in half["notes"]) and any("round 1 of 2" in n for n in half["notes"])
    # the dry run of g itself predicts every run from the prior
    code, out, err = dw_in_process(capsys, "sweep", "g", "--dry-run", "--json", "--prior", "published")
    rows = json.loads(out)["runs"]
    assert code == 0 and all(
        r["prediction"]["pi"][0] < r["prediction"]["loss"] < r["prediction"]["pi"][1] for r in rows
    )


def test_dw_suggest_from_a_fit_leaves_out_runs_in_the_store_and_dry_run_shows_measured(sweeps, capsys):
    from depthwidth.simulate import simulate

    init = {**SWEEP, "axes": {"model.width": [32, 64], "model.depth": [1, 2, 16]}}
    (sweeps / "g_init.yaml").write_text(yaml.safe_dump(init))
    (sweeps / "h.yaml").write_text(yaml.safe_dump({**SWEEP, "store": "g-sim"}))
    simulate("g_init", name="g-sim", law="depth-delusion", seed=0, budgets="0.5,1")
    run_fit("g-sim", law="depth-delusion", bootstrap=100, max_starts=300)
    code, out, err = dw_in_process(capsys, "suggest", "h", "--budget", "1", "--target", "dcrit@64", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["from"] == "fit" and doc["candidates_in_store"] == 6 and doc["candidates"] == 4
    shapes = {(r["depth"], r["width"]) for r in doc["runs"]}
    assert shapes and shapes <= {(4, 32), (4, 64), (8, 32), (8, 64)}  # never a run the store has
    code, out, err = dw_in_process(capsys, "sweep", "h", "--dry-run", "--json")
    assert code == 2 and "dw simulate planted" in err  # a planted store is never submitted into
    code, out, err = dw_in_process(capsys, "status", "h", "--json")  # the store its file names
    assert code == 0 and json.loads(out)["counts"]["done"] == 6


def test_bad_targets_and_candidates_are_one_line_exit_2(sweeps, capsys):
    for args, word in (
        (("--target", "dcrit@abc"), "dcrit@abc"),
        (("--target", "nope"), "nope"),
        (("--candidates", "depth=4"), "depth=4"),
        (("--budget", "-1"), "-1"),
    ):
        argv = ["suggest", "g", "--prior", "published", *(("--budget", "1") if "--budget" not in args else ()), *args]
        code, out, err = dw_in_process(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and word in err, (args, err)


def test_dw_status_sets_the_laws_prediction_beside_a_runs_forecast(tmp_path):
    """fit/run_forecast.law_prediction reads the sweep's fit.json and gives what fit/predict.py gives;
    a forecast far outside it is flagged, one inside is not."""
    from depthwidth.fit.forecast import flag
    from depthwidth.fit.run_forecast import law_prediction

    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=4)
    run_fit(runs=df, law="depth-delusion", bootstrap=100, max_starts=300, out=tmp_path / "fit.json")
    row = {"run_dir": str(tmp_path / "r1"), "depth": 16, "width": 512, "tokens_total": 2e9, "params": 5e7}
    law = law_prediction("s", row)
    ens = ensemble_of(json.loads((tmp_path / "fit.json").read_text()))
    p = predict(ens, [{"depth": 16, "width": 512, "tokens": 2e9, "params": 5e7}])
    assert law["mean"] == pytest.approx(float(p["loss"][0]), rel=1e-12) and law["lo"] < law["mean"] < law["hi"]
    assert law_prediction("s", {**row, "run_dir": str(tmp_path / "elsewhere" / "r1")}) is None  # no fit.json
    inside = {"lo": law["mean"] - 0.01, "hi": law["mean"] + 0.01}
    far = {"lo": law["hi"] + 0.5, "hi": law["hi"] + 1.5}
    assert flag(inside, law["lo"], law["hi"]) is False and flag(far, law["lo"], law["hi"]) is True


def test_cost_power_tempers_the_cost_in_the_ranking_not_in_the_budget(sweeps, capsys):
    """cost_power 0: the first pick is the candidate whose measurement shrinks the target most, whatever
    it costs; 1: per unit cost; the picks always fit the budget.  A power outside [0, 1] is bad input."""
    from depthwidth.fit.laws import get_law as law_of
    from depthwidth.fit.prior import prior

    ens = prior(law_of("depth-delusion"))
    cand = _grid([2, 4, 8, 16, 32, 64], [256, 512, 1024]).to_dict("records")
    cost = np.array([6 * r["params"] * r["tokens"] / 1e17 for r in cand])
    tgt = parse_target("dcrit@512", ens.law)
    free = design(ens, tgt, cand, cost, k=1, cost_power=0.0)
    alone = free.width_alone
    assert free.picks == [int(np.argmin(alone))]  # the largest expected shrink, cost ignored
    per_cost = design(ens, tgt, cand, cost, k=1)
    assert per_cost.picks == [int(np.argmax((free.width_now - alone) / cost))]
    budget = 3 * float(np.median(cost))
    for p in (0.0, 0.3, 1.0):
        d = design(ens, tgt, cand, cost, budget=budget, cost_power=p)
        assert d.picks and cost[d.picks].sum() <= budget * (1 + 1e-9)
    code, out, err = dw_in_process(capsys, "suggest", "g", "--budget", "1", "--cost-power", "1.5")
    assert code == 2 and err.count("\n") == 1 and "--cost-power" in err and "1.5" in err
