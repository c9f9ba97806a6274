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
