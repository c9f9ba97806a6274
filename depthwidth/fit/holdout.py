"""Does the small sweep predict the big model?  ``dw fit --holdout largest[:K]``.

The K runs with the most training compute (FLOPs; per run, its largest
token budget) are held out; the law is fitted on the others with the full
multi-start search, and every held-out point is predicted with

* a confidence interval (``ci``): percentiles of the prediction over a
  run-level bootstrap of the *training* runs: the fit's uncertainty alone;
* a prediction interval (``pi``): the same replicates, each plus a residual
  drawn from the training fit's log-loss residuals, so the interval is for a
  *measured* loss, which also carries run-to-run noise.  A held-out loss is
  "inside" when it falls in the prediction interval.

A confidence interval used as a prediction interval undercovers badly once
the noise is comparable to the fit's uncertainty; the tests check both.
Without K, ``largest`` holds out the top 20% of runs (at least one), the split
``--compare``'s extrapolation column uses too.

Every held-out fit lives here: ``heldout`` gives each law of ``--compare``
its two held-out errors in nats, leave-one-run-out (LORO: each run's points
predicted by the law refitted without that run; 10 folds of runs when there
are more than 50 runs) and the extrapolation to that same split; and, per run,
the mean squared LORO error of its points (``loro_runs``), on which two laws'
errors are compared run by run (fit/verdicts.py ``loro_better``).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.fit.boot import bootstrap, draw_noise, noise_scales, refit_many, run_codes
from depthwidth.fit.engine import FitResult, fit_law
from depthwidth.model.accounting import n_12dw2

DEFAULT_FRACTION = 0.2
MAX_LORO_FOLDS = 50


def parse_holdout(spec: str | None) -> int | None:
    """``largest`` -> 0 (the default K: 20% of runs), ``largest:K`` -> K; None stays None."""
    if spec is None:
        return None
    s = str(spec).strip()
    allowed = "largest or largest:K (K >= 1 runs, the largest by FLOPs)"
    if s == "largest":
        return 0
    head, _, k = s.partition(":")
    if head != "largest" or not k.isdigit() or int(k) < 1:
        raise bad("--holdout", s, allowed)
    return int(k)


def run_compute(table) -> tuple[np.ndarray | None, str]:
    """Per-point training compute and its name: ``flops``, else 6·N·T, else the model size."""
    cols = set(map(str, getattr(table, "columns", table)))
    if "flops" in cols:
        f = np.asarray(table["flops"], dtype=float)
        if np.isfinite(f).all() and (f > 0).all():
            return f, "FLOPs"
    size = None
    if "params" in cols:
        size = np.asarray(table["params"], dtype=float)
    elif {"depth", "width"} <= cols:  # N ≈ 12·D·W² (docs/science.md §1)
        size = n_12dw2(np.asarray(table["depth"], dtype=float), np.asarray(table["width"], dtype=float))
    if size is not None and "tokens" in cols:
        return 6.0 * size * np.asarray(table["tokens"], dtype=float), "FLOPs (6·N·T)"
    return size, "parameters"


def k_of(n_runs: int, k: int | None) -> int:
    """K for ``largest[:K]``: 0/None means the default fraction of the runs."""
    return max(1, int(round(DEFAULT_FRACTION * n_runs))) if not k else int(k)


def split_largest(table, k: int | None = None) -> dict | None:
    """Mask of the points of the K largest runs by compute, with a description; None if it cannot split."""
    compute, by = run_compute(table)
    codes, n_runs = run_codes(table)
    if compute is None:
        return None
    k = k_of(n_runs, k)
    if k >= n_runs:
        raise bad("--holdout", f"largest:{k}", f"K < the number of runs ({n_runs}), so some runs remain to fit")
    per_run = np.array([compute[codes == r].max() for r in range(n_runs)])
    big = np.argsort(per_run, kind="stable")[-k:]
    mask = np.isin(codes, big)
    rest = per_run[np.setdiff1d(np.arange(n_runs), big)]
    return {
        "mask": mask,
        "runs": int(k),
        "points": int(mask.sum()),
        "by": by,
        "name": f"largest {k} of {n_runs} runs by {by}",
        "min_held_out": float(per_run[big].min()),
        "max_fitted": float(rest.max()),
    }


def holdout(
    table,
    law,
    *,
    k: int | None = None,
    bootstrap_n: int = 200,
    level: float = 0.95,
    pins=None,
    delta: float = 1e-3,
    seed: int = 0,
    max_starts: int = 4500,
    resample: str = "noise",
) -> dict:
    """Fit on all but the K largest runs; predict theirs with intervals; error and coverage."""
    sp = split_largest(table, k)
    if sp is None:
        raise bad("--holdout", "largest", "a table with flops, or params and tokens, or depth and width columns")
    m = sp.pop("mask")
    train = table[~m].reset_index(drop=True)
    test = table[m].reset_index(drop=True)
    fr = fit_law(train, law, pins=pins, delta=delta, seed=seed, max_starts=max_starts)
    Xt = law.data(test)
    L = np.asarray(test["loss"], dtype=float)
    point = law.evaluate(fr.theta[None, :], Xt)[0]  # log loss (the loss itself for objective: raw)
    y_tr = law.fitted(train["loss"])
    resid = y_tr - law.evaluate(fr.theta[None, :], law.data(train))[0]
    samples = point[None, :]
    replicates = 0
    if bootstrap_n > 0:
        b = bootstrap(fr, train, bootstrap_n, seed=seed, kind=resample)
        ok = b["ok"]
        replicates = int(ok.sum())
        if ok.any():
            samples = law.evaluate(b["theta"][ok], Xt)
    rng = np.random.default_rng(seed + 7)
    # One noise draw per replicate and point; with no replicates, the noise alone
    # (many draws around the point prediction) still gives the noise part.
    reps = samples if len(samples) > 1 else np.repeat(samples, 1000, axis=0)
    if resample == "noise":  # fresh seed noise at the scales the training residuals show (fit/boot.py)
        codes = run_codes(test)[0]
        noisy = reps + draw_noise(noise_scales(fr, train), codes, len(reps), rng)
    else:
        noisy = reps + rng.choice(resid, size=reps.shape, replace=True)
    q = [50 * (1 - level), 50 * (1 + level)]
    ci = law.to_loss(np.percentile(samples, q, axis=0)) if len(samples) > 1 else None
    pi = law.to_loss(np.percentile(noisy, q, axis=0))
    pred = law.to_loss(point)
    err = pred - L
    inside = (L >= pi[0]) & (L <= pi[1])
    runs = np.asarray(test["run"]).astype(str)
    points = []
    for i in range(len(L)):
        row = {
            "run": runs[i],
            "loss": float(L[i]),
            "predicted": float(pred[i]),
            "error": float(err[i]),
            "pi": [float(pi[0, i]), float(pi[1, i])],
            "inside": bool(inside[i]),
        }
        if ci is not None:
            row["ci"] = [float(ci[0, i]), float(ci[1, i])]
        for c in ("params", "tokens", "depth", "width"):
            if c in test:
                row[c] = float(test[c].iloc[i])
        points.append(row)
    return {
        "split": sp,
        "level": level,
        "law": law.name,
        "for_target": _for_target(train, test, law, fr, pins=pins, delta=delta, seed=seed, max_starts=max_starts),
        "fitted_runs": fr.n_runs,
        "fitted_points": fr.n,
        "params": fr.params,
        "on_bound": fr.on_bound,
        "replicates": replicates,
        "rmse": float(math.sqrt(np.mean(err**2))),
        "bias": float(np.mean(err)),
        "max_abs_error": float(np.abs(err).max()),
        "inside": int(inside.sum()),
        "coverage": float(inside.mean()),
        "ci_coverage": float(((L >= ci[0]) & (L <= ci[1])).mean()) if ci is not None else None,
        "points": points,
        # for a downstream metric's two-step prediction (fit/analyses/downstream.py), as losses whatever the
        # law's objective (log or raw); not written to fit.json
        "_samples": law.to_loss(noisy),
        "_runs": [str(r) for r in runs],
    }


FAILED = "plain: the fit for the held-out runs failed"  # its why, where the weighted fit raised


def _for_target(train, test, law, fr: FitResult, **fit_kw) -> dict:
    """The fit made for the held-out runs (fit/target_fit.py: weighted towards them where the fitted
    runs show a misfit shared by neighbours): whether it is local, why, and its errors on them (the
    same as the plain fit's where it is plain, or where the weighted fit fails: said in ``why``)."""
    from depthwidth.core.errors import BadInput, WorkFailed
    from depthwidth.fit.target_fit import fit_for_target

    try:
        tf = fit_for_target(train, law, test, plain=fr, **fit_kw)
        theta, local, why = tf.fit.theta, tf.local, tf.why
    except (BadInput, WorkFailed, np.linalg.LinAlgError, MemoryError) as e:  # the hold-out's own result stands
        said = (str(e).splitlines() or [type(e).__name__])[0]
        theta, local, why = fr.theta, False, f"{FAILED} ({said})"
    L = np.asarray(test["loss"], dtype=float)
    err = law.to_loss(law.evaluate(theta[None, :], law.data(test))[0]) - L
    return {
        "local": bool(local),
        "why": why,
        "rmse": float(math.sqrt(np.mean(err**2))),
        "bias": float(np.mean(err)),
        "max_abs_error": float(np.abs(err).max()),
        "predicted": [float(x) for x in err + L],
    }


def summary_lines(h: dict) -> list[str]:
    """One line for a terminal or a report; a second where the fit made for the held-out runs is local."""
    lines = [
        f"hold-out ({h['split']['name']}): RMSE {h['rmse']:.3g} nats, bias {h['bias']:+.3g}, "
        f"{h['inside']}/{len(h['points'])} held-out losses inside their {100 * h['level']:.0f}% prediction intervals"
    ]
    t = h.get("for_target")
    if t and t["local"]:  # fit.json before 2026-12-05 has none
        lines.append(
            f"the fit made for the held-out runs ({t['why']}): RMSE {t['rmse']:.3g} nats, bias {t['bias']:+.3g}"
        )
    elif t and str(t.get("why", "")).startswith(FAILED):  # said, not only kept in fit.json
        lines.append(
            f"the fit made for the held-out runs failed {t['why'][len(FAILED) :].strip()}: the plain fit's errors stand"
        )
    return lines


def _folds(n_runs: int, seed: int) -> list[np.ndarray]:
    if n_runs <= MAX_LORO_FOLDS:
        return [np.array([r]) for r in range(n_runs)]
    perm = np.random.default_rng(seed).permutation(n_runs)
    return [perm[i::10] for i in range(10)]


def heldout(fr: FitResult, table, seed: int = 0, holdout_k: int | None = None) -> dict:
    """LORO and extrapolation errors (nats) of the fit ``fr``: refits from its best starts without the
    held-out runs (``refit_many``), not the full multi-start search ``holdout`` runs."""
    law = fr.law
    codes, n_runs = run_codes(table)
    L = np.asarray(table["loss"], dtype=float)
    X = law.data(table)
    out: dict = {}
    if n_runs >= 3:
        folds = _folds(n_runs, seed)
        W = np.ones((len(folds), len(L)))
        for f, runs in enumerate(folds):
            W[f, np.isin(codes, runs)] = 0.0
        # every fold's refit predicts its runs, converged or where the solver stopped: leaving out the
        # unconverged folds scored a law on the runs it found easy (16 of 18 folds of a depth-delusion
        # fit with kappa on its bound); ``loro_failed_folds`` counts them
        res = refit_many(fr, table, W, keep_unconverged=True)
        err = np.full(len(L), np.nan)
        for f, runs in enumerate(folds):
            m = np.isin(codes, runs)
            if np.isfinite(res["theta"][f]).all():
                err[m] = law.to_loss(law.evaluate(res["theta"][f][None, :], X)[0][m]) - L[m]
        ok = np.isfinite(err)
        out["loro_rmse"] = float(np.sqrt(np.mean(err[ok] ** 2))) if ok.any() else None
        # per run, the mean squared error of its points: the unit two laws are compared on (fit/verdicts.py)
        names = np.asarray(table["run"]).astype(str)
        out["loro_runs"] = {
            str(r): float(np.mean(err[names == r] ** 2)) for r in np.unique(names) if np.isfinite(err[names == r]).all()
        }
        out["loro_mae"] = float(np.mean(np.abs(err[ok]))) if ok.any() else None
        out["loro_folds"] = len(folds)
        out["loro_failed_folds"] = int((~res["ok"]).sum())
    sp = split_largest(table, holdout_k) if n_runs >= 4 else None
    if sp is not None:
        m = sp.pop("mask")
        res = refit_many(fr, table, (~m).astype(float)[None, :], keep_unconverged=True)
        if np.isfinite(res["theta"][0]).all():
            e = law.to_loss(law.evaluate(res["theta"][0][None, :], X)[0][m]) - L[m]
            out["extrapolation_rmse"] = float(np.sqrt(np.mean(e**2)))
            out["extrapolation_bias"] = float(np.mean(e))
        out["extrapolation_held_out"] = sp
    return out
