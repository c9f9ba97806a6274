"""A fit made for a target: the law fitted with its runs weighted towards the configurations it must
predict, where the runs show a misfit that makes distance matter and are plentiful enough to spare.

Why.  A law that is wrong the same way at neighbouring configurations (the misfit the design's
kernel models, ``predict.misfit_kernel``: a Kennedy-O'Hagan discrepancy) is fitted by least squares
to the average of that misfit over wherever the runs are.  When most runs lie far from the target
(cheap small runs, and a target beyond the largest), the prediction there carries the far runs'
misfit as a bias: on ScaleBench's farseer task dw's fit of all 404 runs scores R² +0.92 on the target
region, fitted on the runs near the target +0.96 to +0.97 (docs/design.md).  Weighing runs by
nearness, rather than dropping the far ones, keeps their information on the parameters the near
runs do not pin.

The rule (one for every law and task; measured, not tuned per task: docs/design.md):

1. **Distance**: each run's Euclidean distance to the nearest target row in the law's run columns
   (each on a log scale where every run, target row and candidate is > 0), in standard deviations
   of the candidates' (``candidates``, default the runs): the coordinates of the design's misfit
   kernel.
2. **Plentiful runs only**: the fit stays plain with fewer than ``PLAIN_PER_PARAM`` = 10 units a free
   parameter (the classic events-per-variable floor of a regression, Peduzzi et al. 1996): below it
   the variance a local fit adds outweighs the bias it removes.  A unit (``units``) is a run: its
   token budgets share one seed's noise, so they are one observation of a misfit, not several
   (tested as separate points, an exact law went local in 22-37% of 40 tables of 60 runs x 4
   budgets with 0.5-2% noise a run); each output of a run of a law of several outputs is its own, as
   dw fit counts them; a table without ``run`` is a row a unit.
3. **A misfit shown by the runs**: the plain fit's residuals (on the scale it is fitted on: log
   loss, or the loss itself for ``objective: raw``), averaged over each unit's rows, r, are tested
   for a misfit shared by neighbours, r ~ N(0, v((1 - l)I + lK)) with K the misfit kernel's
   correlation among the units (at their rows' mean coordinates), against l = 0, by likelihood ratio
   at 5% (critical value 2.71: l tested on its boundary).  An exact law leaves uncorrelated residuals
   and a plain fit.
4. **Weights**: w_i = exp(-d_i^2 / 2h^2) a row, with h the narrowest width keeping ``LOCAL_PER_PARAM``
   = 5 effective units (sum w)^2 / sum w^2 a free parameter (a unit's w the mean of its rows'; the
   relaxed floor of Vittinghoff and McCulloch 2007), fitted by ``engine.fit_law(weights=)``.

Public: ``fit_for_target`` (-> ``TargetFit``).  Used by ``benchmarks/bench_scalebench.py`` for every
method's checkpoint fits (dw's design and random picks alike).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.laws import Law
from depthwidth.fit.misfit import MISFIT_LENGTH, MISFIT_LR_CRITICAL, law_coords, misfit_test, run_columns
from depthwidth.fit.engine import FitResult

PLAIN_PER_PARAM = 10.0  # points (runs × outputs) a free parameter below which the fit stays plain
LOCAL_PER_PARAM = 5.0  # effective runs a free parameter the local fit keeps


@dataclass
class TargetFit:
    """The fit a target's prediction uses, and why it is plain or local."""

    fit: FitResult  # the fit to predict with (weighted where ``local``)
    plain: FitResult  # the unweighted fit (the same object where not ``local``)
    local: bool
    why: str  # one line: why plain, or the local fit's width and effective runs
    misfit_lr: float | None = None  # likelihood ratio of a shared misfit (None: not tested)
    misfit_share: float | None = None  # its estimated share of the residuals' variance
    width: float | None = None  # h, in candidates' standard deviations
    n_effective: float | None = None


def local_weights(d: np.ndarray, need: float, unit: np.ndarray | None = None) -> tuple[np.ndarray, float, float] | None:
    """(weights exp(-d^2 / 2h^2), h, effective runs) for the narrowest h keeping ``need`` effective
    runs; None where even equal weights keep fewer.  ``unit``: each row's run (codes 0..U-1; default
    each row its own): the effective runs count runs, a run's weight the mean of its rows'."""
    unit = np.arange(len(d)) if unit is None else np.asarray(unit)
    size = np.bincount(unit)

    def n_eff(h: float) -> float:
        w = np.bincount(unit, weights=np.exp(-0.5 * (d / h) ** 2)) / size
        s2 = float((w**2).sum())
        return float(w.sum() ** 2 / s2) if s2 > 0 else 0.0

    lo, hi = 1e-3, 1e3
    if len(size) < need or n_eff(hi) < need:
        return None
    for _ in range(60):  # bisection on a log scale: the effective count grows with h
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if n_eff(mid) >= need else (mid, hi)
    return np.exp(-0.5 * (d / hi) ** 2), hi, n_eff(hi)


def units(table) -> np.ndarray:
    """Each row's unit of the misfit test and the counts (codes 0..U-1): a run's rows of one output
    (its token budgets: one seed's noise, shared) are one unit, each output of a run its own, as a
    law of several outputs counts them; a table without ``run`` is a row a unit."""
    import pandas as pd

    if "run" not in table:
        return np.arange(len(table))
    key = table["run"].astype(str)
    if "output" in table:
        key = key + "\x00" + table["output"].astype(str)
    return pd.factorize(key)[0]


@dataclass
class Locality:
    """The module's rule applied to runs and a fit of them: whether a fit for the target is local, and
    with what weights (for the runs, and for any further rows: a design's candidates)."""

    local: bool
    why: str  # one line: why plain, or the width and effective runs
    misfit_lr: float | None = None
    misfit_share: float | None = None
    width: float | None = None  # h, in candidates' standard deviations
    n_effective: float | None = None
    weights: np.ndarray | None = None  # one a run (a point of the long form); None where plain
    extra_weights: np.ndarray | None = None  # one a row of ``extra``; None where plain


def _long(table, law):
    import pandas as pd

    from depthwidth.fit.userlaw import long_table, outputs

    table = pd.DataFrame(table).reset_index(drop=True)
    return long_table(table, law).reset_index(drop=True) if outputs(law) else table


def locality(table, law: Law, theta, target, *, candidates=None, extra=None, free: int | None = None) -> Locality:
    """The rule (module doc) for ``table`` (runs, as ``fit_for_target`` takes them) fitted at ``theta``
    (the plain fit's internal parameters), ``target`` rows and ``candidates`` (the distances' scale;
    default the runs).  ``extra``: further rows (a design's candidates) weighted by the same kernel.
    ``free``: the free parameters (default all of the law's)."""
    import pandas as pd

    from depthwidth.fit.engine import fitted_target
    from depthwidth.fit.userlaw import OUTPUT, outputs

    outs = outputs(law)
    table = _long(table, law)
    k = len(law.params) if free is None else free
    n = len(table)
    unit = units(table)
    n_u = int(unit.max()) + 1 if n else 0
    what = "points" if n_u == n else "runs"  # a run's token budgets are one unit: its seed noise is shared
    if n_u < PLAIN_PER_PARAM * k:
        return Locality(False, f"plain: {n_u} {what}, fewer than {PLAIN_PER_PARAM:g} a free parameter ({k})")

    # one table of runs, target rows, candidates and extra rows: each column on one scale (log where all are > 0)
    cols = run_columns(law)
    names = ("runs", "target", "candidates", "extra")
    given = (table, target, table if candidates is None else candidates, () if extra is None else extra)
    parts = [pd.DataFrame(x).reset_index(drop=True) for x in given]
    for name, part in zip(names, parts):
        missing = [c for c in cols if c not in part]
        if missing and (name != "extra" or len(part)):
            raise bad(
                "target" if name == "target" else name,
                f"no column {missing[0]}",
                "rows with every run column of the law",
            )
    both = pd.concat([part[cols] for part in parts if len(part) or part.columns.size], ignore_index=True)
    both["loss"] = 1.0  # law.data sizes its arrays by it
    if outs:
        both[OUTPUT] = outs[0]  # the run columns alone are read: any output will do
    x = law_coords(law, law.data(both))
    n_t, n_c = len(parts[1]), len(parts[2])
    x_runs, x_target, x_scale, x_extra = x[:n], x[n : n + n_t], x[n + n_t : n + n_t + n_c], x[n + n_t + n_c :]
    if not np.isfinite(x_target).all():
        raise bad("target", "a row with a value that is not finite", "finite values of the law's run columns")
    sd = x_scale.std(axis=0)
    use = np.isfinite(sd) & (sd > 0) & np.isfinite(x_runs).all(axis=0)
    if not use.any() or not n_t:
        return Locality(False, "plain: no run column varies, or no target row")
    z_runs, z_target = x_runs[:, use] / sd[use], x_target[:, use] / sd[use]  # in candidates' sd

    resid = fitted_target(table, law) - law.evaluate(np.asarray(theta, dtype=float)[None, :], law.data(table))[0]
    size = np.bincount(unit)
    z_unit = np.stack([np.bincount(unit, weights=z_runs[:, j]) / size for j in range(z_runs.shape[1])], axis=1)
    r_unit = np.bincount(unit, weights=np.where(np.isfinite(resid), resid, np.nan)) / size  # a unit's mean residual
    d2 = ((z_unit[:, None, :] - z_unit[None, :, :]) ** 2).sum(axis=2)
    corr = np.exp(-0.5 * d2 / MISFIT_LENGTH**2)  # the misfit kernel's correlation (predict.misfit_kernel)
    lr, share = misfit_test(r_unit, corr) if np.isfinite(r_unit).all() else (0.0, 0.0)
    if not lr > MISFIT_LR_CRITICAL:
        return Locality(False, f"plain: no misfit shared by neighbouring runs (LR {lr:.2f} <= 2.71)", lr, share)

    def nearest(z):
        return np.sqrt(((z[:, None, :] - z_target[None, :, :]) ** 2).sum(axis=2)).min(axis=1)

    got = local_weights(nearest(z_runs), LOCAL_PER_PARAM * k, unit)
    if got is None:
        return Locality(False, "plain: the runs keep too few effective runs to weigh", lr, share)
    w, h, n_eff = got
    extra_w = None
    if len(x_extra):
        z_extra = np.where(np.isfinite(x_extra[:, use]), x_extra[:, use], np.inf) / sd[use]
        extra_w = np.exp(-0.5 * (nearest(z_extra) / h) ** 2)
    why = (
        f"local: a misfit shared by neighbouring runs (share {share:.2f}, LR {lr:.1f}); runs weighted by "
        f"nearness to the target, width {h:.2f} sd, {n_eff:.0f} effective runs of {n_u}"
    )
    return Locality(True, why, lr, share, h, n_eff, w, extra_w)


def fit_for_target(table, law: Law, target, *, candidates=None, plain: FitResult | None = None, **fit_kw) -> TargetFit:
    """The fit of ``law`` to ``table`` (a run table: loss and the law's columns; a law of several outputs:
    a run's outputs side by side or in the long form, fitted as dw fit fits them) made for predicting
    the rows ``target`` (a table of the law's run columns), by the module's rule (``locality``).
    ``candidates``: the rows whose spread sets the distance's scale (a design's pool; default
    ``table``'s runs).  ``plain``: the plain fit where the caller has it (``fit_law`` of ``table`` with
    ``fit_kw``).  ``fit_kw`` go to ``engine.fit_law`` (both fits)."""
    from depthwidth.fit.engine import fit_law

    table = _long(table, law)
    plain = fit_law(table, law, **fit_kw) if plain is None else plain
    free = len(law.params) - len(fit_kw.get("pins") or {})
    loc = locality(table, law, plain.theta, target, candidates=candidates, free=free)
    if not loc.local:
        return TargetFit(plain, plain, False, loc.why, loc.misfit_lr, loc.misfit_share)
    fr = fit_law(table, law, weights=loc.weights, **fit_kw)
    return TargetFit(fr, plain, True, loc.why, loc.misfit_lr, loc.misfit_share, loc.width, loc.n_effective)


def design_weights(weights, n: int) -> np.ndarray:
    """``design``'s ``weights`` as an array (None: every candidate 1); BadInput otherwise, in one line
    naming the argument (a library argument: no flag), the first bad value and what is allowed."""
    if weights is None:
        return np.ones(n)
    said = None
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        flat = list(np.ravel(np.asarray(weights, dtype=object)))
        i = next(i for i, x in enumerate(flat) if float_or_none(x) is None)
        said, w = f"weights[{i}] = {flat[i]!r} (not a number)", np.ones(n)
    if said is None and w.ndim != 1:
        said = f"an array of shape {w.shape} for {n} candidates"
    elif said is None and len(w) != n:
        said = f"{len(w)} weights for {n} candidates"
    elif said is None and not (np.isfinite(w) & (w >= 0) & (w <= 1)).all():
        i = int(np.flatnonzero(~(np.isfinite(w) & (w >= 0) & (w <= 1)))[0])
        said = f"weights[{i}] = {w[i]:g}"
    if said is not None:
        raise BadInput(
            f"bad value for design(weights=): {said} (allowed: one number in [0, 1] per candidate, {n} of them: "
            "the weight the fit gives its loss)"
        )
    return w


def float_or_none(x) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None
