"""Law comparison on held-out runs: ``dw fit --compare chinchilla,depth-delusion,width-depth``.

For every law: the full fit, AIC and BIC (Gaussian likelihood of the log-loss
residuals of the robust fit: n·ln(RSS/n) + 2k, resp. + k·ln n), and two
held-out errors in nats:

* leave-one-run-out (LORO): each run's points are predicted by the law refitted
  without that run (10 folds of runs when there are more than 50 runs);
* extrapolation: the K largest runs by training FLOPs (``--holdout
  largest[:K]``; by default the top 20%, at least one; holdout.py) are
  predicted by the law fitted on the others.

Laws are ranked by both held-out errors (``rank``).

When ``depth-delusion`` is compared, both D_crit forms are fitted and the
preferred form is the one with the lower LORO error (AIC/BIC reported too).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.boot import refit_many, run_codes
from depthwidth.fit.engine import fit_law
from depthwidth.fit.holdout import split_largest
from depthwidth.fit.laws import Law, get_law
from depthwidth.fit.solver import FitResult

MAX_LORO_FOLDS = 50


def label(law: Law) -> str:
    if law.name != "depth-delusion":
        return law.name
    return f"depth-delusion[{law.options['dcrit']}{'+E' if law.options['irreducible'] else ''}]"


def expand(names: list[str], irreducible: bool) -> list[Law]:
    laws: list[Law] = []
    for n in names:
        if n == "depth-delusion":
            laws += [get_law(n, dcrit="log", irreducible=irreducible), get_law(n, dcrit="power", irreducible=irreducible)]
        else:
            laws.append(get_law(n))
    return laws


def information(fr: FitResult, table) -> dict:
    y = np.log(np.asarray(table["loss"], dtype=float))
    pred = fr.law.evaluate(fr.theta[None, :], fr.law.data(table))[0]
    rss = float(((pred - y) ** 2).sum())
    n, k = fr.n, len(fr.law.params) - len(fr.pins)
    ll = n * math.log(max(rss, 1e-300) / n)
    return {"k": k, "rss_log": rss, "aic": ll + 2 * k, "bic": ll + k * math.log(n)}


def _folds(codes: np.ndarray, n_runs: int, seed: int) -> list[np.ndarray]:
    if n_runs <= MAX_LORO_FOLDS:
        return [np.array([r]) for r in range(n_runs)]
    perm = np.random.default_rng(seed).permutation(n_runs)
    return [perm[i::10] for i in range(10)]


def heldout(fr: FitResult, table, seed: int = 0, holdout_k: int | None = None) -> dict:
    law = fr.law
    codes, n_runs = run_codes(table)
    L = np.asarray(table["loss"], dtype=float)
    X = law.data(table)
    out: dict = {}
    if n_runs >= 3:
        folds = _folds(codes, n_runs, seed)
        W = np.ones((len(folds), len(L)))
        for f, runs in enumerate(folds):
            W[f, np.isin(codes, runs)] = 0.0
        res = refit_many(fr, table, W)
        err = np.full(len(L), np.nan)
        for f, runs in enumerate(folds):
            m = np.isin(codes, runs)
            if res["ok"][f]:
                err[m] = np.exp(law.evaluate(res["theta"][f][None, :], X)[0][m]) - L[m]
        ok = np.isfinite(err)
        out["loro_rmse"] = float(np.sqrt(np.mean(err[ok] ** 2))) if ok.any() else None
        out["loro_mae"] = float(np.mean(np.abs(err[ok]))) if ok.any() else None
        out["loro_folds"] = len(folds)
        out["loro_failed_folds"] = int((~res["ok"]).sum())
    sp = split_largest(table, holdout_k) if n_runs >= 4 else None
    if sp is not None:
        m = sp.pop("mask")
        res = refit_many(fr, table, (~m).astype(float)[None, :])
        if res["ok"][0]:
            e = np.exp(law.evaluate(res["theta"][0][None, :], X)[0][m]) - L[m]
            out["extrapolation_rmse"] = float(np.sqrt(np.mean(e ** 2)))
            out["extrapolation_bias"] = float(np.mean(e))
        out["extrapolation_held_out"] = sp
    return out


def compare_laws(table, names: list[str], *, irreducible: bool = False, pins: dict | None = None,
                 delta: float = 1e-3, seed: int = 0, fits: dict | None = None, max_starts: int = 4500,
                 holdout_k: int | None = None) -> dict:
    """Fit and score each law; ``fits`` may hold already-computed FitResults by label.

    ``holdout_k``: K of the extrapolation split (None: the top 20% of runs).
    """
    rows, fits = [], dict(fits or {})
    for law in expand(names, irreducible):
        lab = label(law)
        fr = fits.get(lab)
        if fr is None:
            p = {k: v for k, v in (pins or {}).items() if k in law.names}
            fr = fit_law(table, law, pins=p, delta=delta, seed=seed, max_starts=max_starts)
            fits[lab] = fr
        row = {"law": lab, "options": dict(law.options), "n": fr.n, "params": fr.params, "r2": fr.r2, "rmse": fr.rmse,
               "objective": fr.objective, "on_bound": fr.on_bound, **information(fr, table)}
        row.update(heldout(fr, table, seed=seed, holdout_k=holdout_k))
        rows.append(row)
    out: dict = {"laws": rows}

    def best(key):
        c = [r for r in rows if r.get(key) is not None]
        return min(c, key=lambda r: r[key])["law"] if c else None

    out["best"] = {"loro": best("loro_rmse"), "extrapolation": best("extrapolation_rmse"),
                   "aic": best("aic"), "bic": best("bic")}
    out["rank"] = {key: [r["law"] for r in sorted((r for r in rows if r.get(col) is not None), key=lambda r: r[col])]
                   for key, col in (("loro", "loro_rmse"), ("extrapolation", "extrapolation_rmse"))}
    split = next((r["extrapolation_held_out"]["name"] for r in rows if r.get("extrapolation_held_out")), None)
    out["extrapolation_split"] = split
    dd = [r for r in rows if r["law"].startswith("depth-delusion[")]
    if len(dd) == 2:
        key = "loro_rmse" if all(r.get("loro_rmse") is not None for r in dd) else "aic"
        win = min(dd, key=lambda r: r[key])
        form = "log" if win["law"].startswith("depth-delusion[log") else "power"
        out["dcrit_preference"] = {
            "prefers": form, "by": key,
            **{r["law"]: {k: r.get(k) for k in ("loro_rmse", "extrapolation_rmse", "aic", "bic")} for r in dd},
        }
    out["_fits"] = fits
    return out
