"""Uncertainty for a fit: bootstrap refits, vectorised over replicates.

``--resample noise`` (the default) keeps the design — the sweep's runs, as
planned — and draws each run's seed noise afresh: replicate b refits the law
to its fitted curve plus per-run and per-point Gaussian noise at the scales
the fit's residuals show (``noise_scales``), each replicate's scales drawn
from their chi-squared distributions (the scales are estimates too).  This is
the sampling a researcher would see re-running the grid with new seeds, and
on planted depth_delusion grids its 95% intervals cover the truth 94–99% of
the time (docs/guides/fit-analyses.md, "Coverage").

``--resample runs`` resamples whole runs with replacement (every token-budget
point of a drawn run comes with it, never single checkpoints), as Epoch's
refit does.  With a fixed design of a few high-leverage runs it is
conservative: a replicate that misses the deep or the large runs loses what
identifies a parameter (100% coverage of most numbers on the same grids).

Every replicate is refitted from a small start grid: the optimum, the
next-best optima of the full search and a few points of the law's grid; all
replicates x starts run as one batched problem.

Intervals are percentile intervals over the replicates that converged (the
solver's own convergence flag for the replicate's best start).
Which of them a fit may show (withheld, flagged) and what it says before any
number (``vet``, ``underdetermined``): the last section.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.misfit import MIN_SHARE_DF, misfit_share
from depthwidth.fit.engine import FitResult, Problem, batched_lm, best_starts

CONFIG_KEYS = ("params", "depth", "width", "shape")
RESAMPLE = ("noise", "runs")  # --resample: the design fixed and seed noise drawn afresh | whole runs resampled
_BLOCK = 64  # replicates per batched call
# Iterations a replicate may take to converge.  A law with a sloppy direction (Farseer's exponent
# exp(A·N^a + E) with a small a: A and E nearly trade off) sends LM crawling along a valley: on
# ScaleBench's farseer, 40-100 runs, 8-68% of 50 replicates converged within 500 iterations,
# 28-90% within 2000 (56-100% within 8000); a replicate counts only if it converged, and
# a design with too few falls back to the RML ensemble (27 of 59 farseer rounds at 500).  Rows that
# converge leave the batch (fit/engine.py batched_lm), so the extra iterations cost only the slow ones.
REFIT_ITERS = 2000


def run_codes(table) -> tuple[np.ndarray, int]:
    import pandas as pd

    codes, uniq = pd.factorize(pd.Series(np.asarray(table["run"])).astype(str))
    return codes.astype(int), len(uniq)


def run_weights(codes: np.ndarray, n_runs: int, B: int, rng) -> np.ndarray:
    """(B, n) point weights: each replicate draws n_runs runs with replacement."""
    draws = rng.integers(0, n_runs, size=(B, n_runs))
    counts = np.stack([np.bincount(d, minlength=n_runs) for d in draws])
    return counts[:, codes].astype(float)


def seed_groups(table) -> list[np.ndarray] | None:
    """Run codes grouped by configuration (all run-level columns but seed, and the run's token budget);
    None without replicated seeds."""
    import pandas as pd

    if "seed" not in table or table["seed"].isna().all():
        return None
    codes, n_runs = run_codes(table)
    keys = [k for k in CONFIG_KEYS if k in table]
    df = pd.DataFrame({k: table[k] for k in keys})
    df["_code"] = codes
    if "tokens" in table:  # a run's token budget (its last point) is part of its configuration
        df["_tokens"] = pd.Series(np.asarray(table["tokens"], dtype=float)).groupby(codes).transform("max").to_numpy()
        keys.append("_tokens")
    per_run = df.drop_duplicates("_code")
    groups = []
    for _, g in per_run.groupby(keys, dropna=False) if keys else [(None, per_run)]:
        groups.append(g["_code"].to_numpy())
    if not any(len(g) > 1 for g in groups):
        return None
    return groups


def replicates_record(fr, theta: np.ndarray, noise: dict) -> dict:
    """What fit.json keeps of the bootstrap (its ``replicates``: the point, each converged replicate's
    parameters, the noise scales), so that predictions and designs can be made from it later
    (fit/predict.py ``ensemble_of``)."""
    return {
        "names": list(fr.law.names),
        "point": [float(x) for x in fr.theta],
        "theta": [[float(x) for x in row] for row in np.asarray(theta)],
        "noise": {k: float(v) for k, v in noise.items()},
    }


def noise_scales(fr: FitResult, table, split: bool = False) -> dict:
    """Per-run and per-point noise of log loss, estimated from the fit's residuals (and, where
    configurations were run with several seeds, the seed-to-seed part of the per-run noise; else,
    with ``split``, the misfit's share of the per-run noise: ``misfit_share``).

    The fit leaves residuals r = u_run + e_point.  With several points per run, e's scale comes from
    the spread of residuals around their run's mean (n - R degrees of freedom) and u's from the
    spread of run means less e's share; with one point per run the two are not separable and all of
    it is per run.  Both are inflated for the k fitted parameters (R / (R - k)), and residuals beyond
    4 robust standard deviations (1.4826 · MAD) are clipped first, so one outlier run does not set
    the noise of all the others.
    """
    law = fr.law
    y = law.fitted(table["loss"])
    r = y - law.evaluate(fr.theta[None, :], law.data(table))[0]
    codes, R = run_codes(table)
    k = len(law.params) - len(fr.pins)
    # The robust scale leaves out the k smallest residuals: a Huber fit (near L1 at a small delta)
    # passes exactly through as many points as it has free parameters, and those zeros (1e-9, not
    # 0.0) would set the median: with 9 runs and 7 parameters, 5 of 9 were ~0, every residual was
    # clipped to 4e-9 and the replicates, drawn at that noise, pinned D_crit to 1e-5 layers.
    mad = 1.4826 * float(np.median(np.sort(np.abs(r))[min(k, len(r) - 1) :]))
    if mad > 0:
        r = np.clip(r, -4 * mad, 4 * mad)
    n_b = np.bincount(codes, minlength=R).astype(float)
    mean = np.bincount(codes, weights=r, minlength=R) / n_b
    n = len(r)
    point = 0.0
    if n > R:
        point = math.sqrt(float(((r - mean[codes]) ** 2).sum()) / (n - R))
    between = float((mean**2).sum()) / max(R - k, 1)
    run = math.sqrt(max(between - point**2 * float(np.mean(1.0 / n_b)), 0.0))
    out = {"run": run, "point": point, "runs": R, "points": n, "df_run": max(R - k, 1), "df_point": max(n - R, 1)}
    # Seed-to-seed alone, where configurations were run with several seeds: the spread of run means
    # within a configuration (the law's misfit at a configuration is shared by its seeds, so what
    # is left of ``run`` beyond it is the misfit: what a replicate cannot average away).
    groups = seed_groups(table)
    if groups:
        ss = sum(float(((mean[g] - mean[g].mean()) ** 2).sum()) for g in groups if len(g) > 1)
        df = sum(len(g) - 1 for g in groups if len(g) > 1)
        seed = math.sqrt(max(ss / df - point**2 * float(np.mean(1.0 / n_b)), 0.0))
        out.update(seed=seed, df_seed=df)
    elif split and run > 0 and R - k >= MIN_SHARE_DF:
        # No seed replicated: how much of the per-run noise is the law's misfit, from whether the run
        # means move together between neighbouring configurations (fit/misfit.py misfit_share); the
        # design keeps the rest as seed noise (fit/predict.py Ensemble.seed_var).  Only the design
        # reads it (``split``: the fit's replicates record), not the bootstrap's or a hold-out fold's
        # noise draws, which would pay an eigendecomposition of the runs' kernel each time.
        last = np.full(R, -1)
        last[codes] = np.arange(n)  # each run's last point: its configuration
        X = {c: np.asarray(v)[last] for c, v in law.data(table).items()}
        out["misfit_share"] = misfit_share(law, X, mean)
    return out


def draw_noise(sc: dict, codes: np.ndarray, B: int, rng) -> np.ndarray:
    """(B, n) seed noise at the scales ``sc`` (noise_scales), each replicate's scales drawn from their
    chi-squared distributions: the scales are estimates, and the replicates carry that uncertainty."""
    R = int(codes.max()) + 1
    s_run = sc["run"] * np.sqrt(sc["df_run"] / rng.chisquare(sc["df_run"], B))
    s_pt = sc["point"] * np.sqrt(sc["df_point"] / rng.chisquare(sc["df_point"], B))
    u = rng.normal(0.0, 1.0, (B, R)) * s_run[:, None]
    e = rng.normal(0.0, 1.0, (B, len(codes))) * s_pt[:, None]
    return u[:, codes] + e


def noise_targets(fr: FitResult, table, B: int, rng) -> np.ndarray:
    """(B, n) log losses: the fitted curve plus fresh noise at the estimated scales (noise_scales):
    the design as it is, the runs' seeds drawn again."""
    law = fr.law
    yhat = law.evaluate(fr.theta[None, :], law.data(table))[0]
    codes, _ = run_codes(table)
    return yhat[None, :] + draw_noise(noise_scales(fr, table), codes, B, rng)


def refit_many(
    fr: FitResult,
    table,
    weights: np.ndarray | None = None,
    starts: np.ndarray | None = None,
    max_iter: int = REFIT_ITERS,
    ys: np.ndarray | None = None,
    keep_unconverged: bool = False,
) -> dict:
    """Refit ``fr.law`` under each row of ``weights`` (R, n), or to each row of targets ``ys``
    (R, n log losses); returns theta (R, P), F, ok.  ``keep_unconverged``: theta also where the
    solver stopped unconverged (a finite objective): a prediction needs the refit, not a
    converged one (held-out errors, fit/holdout.py); ``ok`` still says which converged."""
    law = fr.law
    y = law.fitted(table["loss"])
    pb = Problem(law, law.data(table), y, fr.delta, fr.pins)
    st = pb.reduce(best_starts(fr, law) if starts is None else starts)
    S0, R = len(st), len(weights if ys is None else ys)
    theta = np.full((R, len(law.params)), np.nan)
    F = np.full(R, np.inf)
    ok = np.zeros(R, dtype=bool)
    for a in range(0, R, _BLOCK):
        r = min(_BLOCK, R - a)
        w = None if weights is None else np.repeat(weights[a : a + r], S0, axis=0)
        yb = None if ys is None else np.repeat(ys[a : a + r], S0, axis=0)
        res = batched_lm(pb, np.tile(st, (r, 1)), weights=w, ys=yb, max_iter=max_iter, xtol=1e-7, ftol=1e-10)
        Fr = res["F"].reshape(r, S0)
        best = np.argmin(Fr, axis=1)
        tb = res["theta"].reshape(r, S0, -1)[np.arange(r), best]
        theta[a : a + r] = pb.full(tb)
        F[a : a + r] = Fr[np.arange(r), best]
        ok[a : a + r] = res["converged"].reshape(r, S0)[np.arange(r), best]
    # A replicate counts only if the solver says its best start converged: a finite
    # objective after max_iter iterations is just where the solver stopped.
    ok &= np.isfinite(F)
    theta[~(np.isfinite(F) if keep_unconverged else ok)] = np.nan
    return {"theta": theta, "F": F, "ok": ok}


def bootstrap(fr: FitResult, table, B: int, seed: int = 0, kind: str = "runs") -> dict | None:
    """``kind='noise'`` keeps the design and draws each run's seed noise afresh (noise_targets);
    ``'runs'`` resamples whole runs."""
    rng = np.random.default_rng(seed)
    codes, n_runs = run_codes(table)
    if kind == "noise":
        out = refit_many(fr, table, ys=noise_targets(fr, table, B, rng))
    else:
        out = refit_many(fr, table, run_weights(codes, n_runs, B, rng))
    out["kind"] = kind
    out["B"] = B
    out["n_runs"] = n_runs
    return out


def percentile_ci(samples: np.ndarray, level: float) -> list[float] | None:
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if len(s) < 2:
        return None
    lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
    return [float(lo), float(hi)]


def param_samples(fr: FitResult, boot: dict) -> dict[str, np.ndarray]:
    ok = boot["ok"]
    nat = fr.law.natural_batch(boot["theta"][ok]) if ok.any() else {p.name: np.array([]) for p in fr.law.params}
    return {k: np.asarray(v, dtype=float) for k, v in nat.items()}


def bound_hits(fr: FitResult, boot: dict) -> dict[str, float]:
    """Fraction of converged replicates with each free parameter on a bound."""
    law, ok = fr.law, boot["ok"]
    if not ok.any():
        return {}
    th = boot["theta"][ok]
    span = law.hi - law.lo
    out = {}
    for i, p in enumerate(law.params):
        if p.name in fr.pins:
            continue
        hit = (th[:, i] - p.lo <= 1e-6 * span[i]) | (p.hi - th[:, i] <= 1e-6 * span[i])
        if hit.mean() > 0:
            out[p.name] = float(hit.mean())
    return out


# -- Which intervals a fit may show ------------------------------------------------------------------
# Which intervals a fit may show: the one place that withholds or flags them.
#
# An interval from bootstrap refits is **withheld** (``null`` in fit.json, its
# reason — with the interval itself — in ``ci_withheld``) when it does not
# contain its own point estimate: the refits settled somewhere else than the fit
# (another basin, a bound), so the interval describes those refits rather than
# the estimate (seen on a 6-run sweep: alpha 0.7035 [0.709, 5]).
#
# It is **flagged** (``ci_flagged``) when fewer than ``FLAG_CONVERGED`` of the
# replicates converged: it then rests on the refits that were easy.  Measured
# on hard planted designs (6-run subsets of the demo grid, 180 sweeps a
# resampling; ``benchmarks/bench_calibration.py --failure-study``), such
# intervals still held the truth (95.3% with ``--resample runs``, 98.9% with
# ``noise``, against 95.9% and 96.7% for sweeps above the threshold): wide, not
# wrong, so they are shown with the flag rather than withheld.  The intervals
# that excluded their estimate held it too (all 47 of them) — they ran to a
# bound — which is why the reason keeps the interval.
#
# ``underdetermined`` says, before any number is shown, when the data cannot pin
# the law's free parameters: fewer runs (or points) than free parameters, or a
# Jacobian at the fit whose numerical rank is below the number of free
# parameters (some combination of parameters moves no prediction).
#
# Coverage measured on planted worlds (benchmarks/bench_calibration.py;
# docs/guides/fit-analyses.md, "Coverage") is a property of the method on those worlds, not of a given fit:
# ``dw fit`` does not quote it as a warning about the data at hand.

FLAG_CONVERGED = 0.8  # intervals resting on fewer converged bootstrap refits than this share are flagged
RANK_TOL = 1e-7  # singular values below this share of the largest (columns scaled to unit norm) are zero


def vet(point: dict, ci: dict, converged: int | None, replicates: int) -> tuple[dict, dict, dict]:
    """(intervals kept, {key: why withheld}, {key: why flagged})."""
    kept, withheld, flagged = dict(ci), {}, {}
    share = (converged / replicates) if replicates and converged is not None else 1.0
    for k, c in ci.items():
        if not c:
            continue
        v = point.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v) and not _inside(v, c):
            withheld[k] = (
                f"the bootstrap interval [{c[0]:.4g}, {c[1]:.4g}] does not contain the estimate {v:.4g}: "
                "the refits settled elsewhere (another optimum or a bound)"
            )
            kept[k] = None
        elif share < FLAG_CONVERGED:
            flagged[k] = (
                f"rests on the {converged} of {replicates} bootstrap refits that converged "
                f"({100 * share:.0f}% < {100 * FLAG_CONVERGED:.0f}%): expect it wide"
            )
    return kept, withheld, flagged


def _inside(v: float, c) -> bool:
    tol = 1e-9 * max(abs(v), abs(c[0]), abs(c[1]), 1e-300)
    return c[0] - tol <= v <= c[1] + tol


def jacobian_rank(fr, table) -> tuple[int, int]:
    """(numerical rank, free parameters) of d log L_hat / d theta_free at the fit."""
    law = fr.law
    free = [i for i, p in enumerate(law.params) if p.name not in fr.pins]
    _, J = law.evaluate(fr.theta[None, :], law.data(table), jac=True, free=free)
    J = J[0].T  # (n, k)
    norms = np.linalg.norm(J, axis=0)
    live = norms > 0
    if not live.any():
        return 0, len(free)
    s = np.linalg.svd(J[:, live] / norms[live], compute_uv=False)
    return int((s > RANK_TOL * s[0]).sum()), len(free)


def underdetermined(fr, table) -> list[str]:
    """Lines to show before the numbers when the data cannot pin the free parameters."""
    k = len(fr.law.params) - len(fr.pins)
    out = []
    if fr.n_runs is not None and fr.n_runs < k:
        out.append(
            f"{fr.n_runs} runs for {k} free parameters of {fr.law.name}: the data cannot pin them all; "
            "read every number below as a description of these runs, not as an estimate"
        )
    elif fr.n < k:
        out.append(f"{fr.n} points for {k} free parameters: the data cannot pin them all")
    r, kf = jacobian_rank(fr, table)
    if r < kf:
        out.append(
            f"the data pin at most {r} of the {kf} free parameters (the fit's Jacobian has rank {r}): "
            "some combination of them changes no prediction"
        )
    return out
