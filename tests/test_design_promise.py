"""Honest promises (#36): the interval ``dw suggest`` says the target will have after its picks is
the one a refit on them reports.  benchmarks/bench_design.py --promise measures the ratio on planted
depth-delusion draws; these are the small planted samples (seconds) with a tolerance the promise had
failed."""

import math

import numpy as np
import pandas as pd

from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.predict import design, ensemble_of, parse_target
from depthwidth.fit.prior import NOISE, prior

LAW = get_law("chinchilla")
CAND = pd.DataFrame([dict(params=n, tokens=t) for n in np.geomspace(2e7, 2e9, 8) for t in np.geomspace(4e8, 4e10, 8)])
COST = (CAND.params * CAND.tokens / 1e18).to_numpy()


def _width(ens, t):
    v = t.values(ens, ens.theta)
    lo, hi = np.percentile(v[np.isfinite(v)], [2.5, 97.5])
    return hi - lo


def test_a_promise_from_the_prior_is_what_the_refit_of_its_picks_reports():
    """From the published prior, 5% of the candidates' cost; each world is a draw of the prior, with a
    new run's noise as the prior states it.  The refits (a bootstrap of the picks alone: they know nothing
    of the prior) reported intervals of alpha 0.90-1.68 wide, a median 10.6 times what the promise had
    said (0.115: the promise conditioned the prior's own ensemble on the picks, so it could only be
    narrower than the prior's 0.159); the promise from what the runs alone determine (0.97) is met
    within a factor of 1.5 (median ratio 1.26 of 8)."""
    ens = prior(LAW)
    t = parse_target("alpha", LAW)
    d = design(ens, t, CAND, COST, budget=0.05 * COST.sum())
    promised = d.width_after[-1]
    assert len(d.picks) > len(LAW.params) and math.isfinite(promised) and promised > d.width_now  # wider
    sigma = math.hypot(NOISE["run"], NOISE["point"])
    ratios = []
    worlds = np.random.default_rng(7).choice(len(ens.theta), 8, replace=False)
    for seed, w in enumerate(worlds):
        rng = np.random.default_rng(seed)
        df = CAND.iloc[d.picks].reset_index(drop=True).assign(loss=1.0)
        df["loss"] = LAW.predict(LAW.natural(ens.theta[w]), df) * np.exp(rng.normal(0, sigma, len(df)))
        df["run"] = [f"r{i}" for i in range(len(df))]
        refit = ensemble_of(run_fit(runs=df, law="chinchilla", bootstrap=50, max_starts=64, seed=seed, write=False))
        ratios.append(_width(refit, t) / promised)
    med = float(np.median(ratios))
    assert 1 / 1.5 <= med <= 1.5, ratios


def test_the_interval_now_is_the_one_the_fit_reports_untrimmed():
    """The design trims the 1st-99th percentile of replicates for its covariance; the interval it starts
    from (and scales every promise by) had been taken from the trimmed replicates: narrower than the
    fit's own interval (1.80 against 1.86 here; 5-25% on bench_design's depth-delusion draws)."""
    truth = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 900.0, "beta": 0.28}
    small = CAND[(CAND.params <= 1.2e8) & (CAND.tokens <= 3e9)].reset_index(drop=True)
    rng = np.random.default_rng(4)
    df = small.assign(loss=LAW.predict(truth, small.assign(loss=1.0)) * np.exp(rng.normal(0, 0.01, len(small))))
    df["run"] = [f"r{i}" for i in range(len(df))]
    ens = ensemble_of(run_fit(runs=df, law="chinchilla", bootstrap=100, max_starts=64, seed=4, write=False))
    t = parse_target("alpha", LAW)
    d = design(ens, t, CAND, COST, k=2)
    assert d.width_now == np.float64(d.width_now) and abs(d.width_now / _width(ens, t) - 1) < 1e-9


def test_a_promise_from_a_fit_among_the_default_candidates_is_what_the_refit_reports(monkeypatch, tmp_path):
    """The default candidates take widths (and depths) between the grid's: on depth_delusion 608
    candidates (323 without the widths), more to select among on the ensemble's noisy covariances.
    bench_design.py --promise's draws at noise 0.01, seed 0 (2 forms × 3 shifts): round 1's promise,
    from the fit of round 0's runs, against the refit's interval after its picks.  Measured over 96
    draws (2026-12-05) the median realized / promised is 1.07 with widths between, 1.05 without (seed
    noise 0.005 and 0.01; 1.08 and 1.07 at 0.01 and 0.0365); here the six draws' median (1.02) is met
    within a factor of 1.25, and each draw within 2."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_design.py"
    spec = importlib.util.spec_from_file_location("bench_design", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("DW_RUNS", str(tmp_path))  # an empty store
    sp = bench.space()
    assert len(sp["cand"]) == 608 and {r["width"] for r in sp["cand"]} > {sp["cand"][i]["width"] for i in sp["grid"]}
    job = dict(space=sp, noise=0.01, seed=0, target="dcrit@512", B=100, first=0.01, step=0.02)
    rows = [bench.promise_draw({**job, "form": f, "shift": s}) for f in ("log", "power") for s in (0.7, 1.0, 1.4)]
    ratios = [r["realized"] / r["promised"] for draw in rows for r in draw if r["from"] == "fit"]
    assert len(ratios) == 6 and all(0.5 < q < 2 for q in ratios), ratios
    assert 1 / 1.25 <= float(np.median(ratios)) <= 1.25, ratios


def test_a_candidates_promise_alone_is_the_promise_of_picking_it_first():
    """#36: ``width_alone`` (the dry run's "CI after") had been the ensemble's Kalman update even where
    the promise is what the runs alone determine (a prior, an RML ensemble): the dry run promised
    intervals dw suggest does not.  Now each candidate's is the one-pick promise, same machinery."""
    from depthwidth.fit.design_rounds import rml_ensemble

    truth = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 900.0, "beta": 0.28}
    few = CAND.iloc[[0, 7, 56, 63]].reset_index(drop=True)  # 4 corners, fewer runs than the law's 5 parameters
    few = few.assign(loss=LAW.predict(truth, few.assign(loss=1.0)), run=[f"r{i}" for i in range(4)])
    t = parse_target("alpha", LAW)
    for ens in (rml_ensemble(LAW, few), prior(LAW)):
        d = design(ens, t, CAND, COST, k=0)
        for j in (5, 8, 23, 40):  # 8, 23 and 40 determine alpha with the 4 runs, 5 does not
            one = design(ens, t, CAND.iloc[[j]], COST[[j]], k=1).width_after[0]
            assert d.width_alone[j] == one or abs(d.width_alone[j] / one - 1) < 1e-9, (ens.source, j)
    assert np.isfinite(design(rml_ensemble(LAW, few), t, CAND, COST, k=0).width_alone[[8, 23, 40]]).all()
    assert not np.isfinite(d.width_alone).any()  # the prior: one run alone never determines alpha


def _one_pick(name: str, depth: int, width: int, prior_name):
    """dw suggest's promise for the run ``depth``×``width`` (seed 42) picked alone."""
    from depthwidth.sweep.suggest import suggest

    spec = f"model.depth={depth};model.width={width};run.seed=42"
    s = suggest(name, 1e9, "dcrit@64", candidates_spec=spec, prior=prior_name, write=False).to_dict()
    assert len(s["runs"]) == 1 and (s["runs"][0]["depth"], s["runs"][0]["width"]) == (depth, width)
    return s["runs"][0]["interval_after"]


def test_the_dry_runs_ci_after_is_dw_suggests_promise_from_a_fit_and_from_the_prior(tmp_path, monkeypatch):
    """#36: ``dw sweep depth_delusion --dry-run --prior published`` showed "CI after" 27.2-28.0 per run
    (the prior's Kalman update) where dw suggest promised "—" for the same runs (a fit of one run
    cannot locate D_crit).  Both now say what dw fit will report; from a fit, as before, the same numbers."""
    import yaml

    from depthwidth.simulate import simulate
    from depthwidth.sweep.dry_run import dry_run_predictions
    from depthwidth.sweep.expand import expand

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    base = {
        "description": "CPU-sized depth x width grid",
        "groups": {"model": "vwt", "data": "synthetic"},
        "fixed": {"model.heads": 2, "model.quantum": 8, "train.seq_len": 32, "train.batch_size": 4, "train.steps": 20},
    }
    (d / "g_init.yaml").write_text(
        yaml.safe_dump({**base, "axes": {"model.width": [32, 64], "model.depth": [1, 2, 16]}})
    )
    (d / "h.yaml").write_text(
        yaml.safe_dump({**base, "store": "g-sim", "axes": {"model.width": [64], "model.depth": [3, 6]}})
    )
    simulate("g_init", name="g-sim", law="depth-delusion", seed=0, budgets="0.5,1")
    run_fit("g-sim", law="depth-delusion", bootstrap=100, max_starts=300)
    cols = ("depth", "width", "params", "params_non_embedding", "tokens", "device_hours")
    for prior_name in (None, "published"):
        rows = [{"run_id": r.run_id, "group": r.group, **{k: r.figures[k] for k in cols}} for r in expand("h").runs]
        pred = dry_run_predictions("h", rows, prior_name, "dcrit@64")
        assert pred["from"] == ("fit" if prior_name is None else "prior published")
        for r in rows:
            after, promised = r["prediction"]["interval_after"], _one_pick("h", r["depth"], r["width"], prior_name)
            assert r["prediction"]["value_per_hour"] is not None
            if prior_name is None:
                assert after is not None and abs(after / promised - 1) < 1e-9, (after, promised)
            else:  # one run alone does not determine D_crit: not determined, in both
                assert after is None and promised is None, (after, promised)
        said = any(n.startswith("CI after is the interval dw fit will report") for n in pred["notes"])
        assert said == (prior_name is not None)
