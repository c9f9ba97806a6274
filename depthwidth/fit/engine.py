"""Robust multi-start fitting of a law (``laws.py``) to a run table.

Objective (Hoffmann et al. 2022, Approach 3, as replicated by Besiroglu et al.
2024): the *sum* over points of Huber_delta(log L_hat - log L), delta = 1e-3,
with L_hat a log-sum-exp of the law's terms.  The sum (not the mean) and, for
scipy, a further 1/delta scale keep the optimiser from stopping early on a
tiny objective, the trap behind Hoffmann's published estimates.

Search: every start of the law's grid (4,500 for ``chinchilla``) is optimised
at once by a batched Levenberg-Marquardt / IRLS iteration in numpy (analytic
Jacobian, Huber majoriser weights min(1, delta/|r|), per-start damping,
projection onto the bounds), in float32, on two threads, its first 20 steps
on a 60-point subsample (coarse to fine).  A start "converged" when a step
moves it less than 1e-4 or gains less than 1e-5 of the objective.  Tables
with more than ``grid_points`` rows are searched on a fixed subsample.  The
best few distinct optima are then refined in float64 on all points (batched
LM) and polished with scipy's L-BFGS-B on the exact objective; the best is
kept.  A user law whose values float32 cannot hold (an input near 2e11 to a power
of ±5) is searched in float64 instead (solver.search_dtype).  The hinge max(0, .)
of the depth-delusion penalty is rounded (a C¹
quadratic spline over |D/D_crit − 1| < s, terms.py) with s = SEARCH_SMOOTH
during the search and s = HINGE_SMOOTH in the refinement, the polish and every
bootstrap refit (solver.Problem): with the exact hinge the near-L1 objective
has a kink wherever D_crit(W) meets a run's depth, and its minima sat there
(29 and 36 of 60 planted fits).  Everything reported uses the exact hinge.

Public: ``fit_law`` (numerics: solver.py; quality checks: verdicts.py).
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math
import time
from typing import Mapping

import numpy as np

from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.fit.verdicts import quality_warnings
from depthwidth.fit.laws import Law, has_hinge, is_user
from depthwidth.fit.solver import (
    COARSE_ITERS,
    COARSE_POINTS,
    DEFAULT_DELTA,
    SEARCH_FTOL,
    SEARCH_SMOOTH,
    SEARCH_XTOL,
    FitResult,
    Problem,
    batched_lm,
    polish,
    search_dtype,
)


def _distinct(theta: np.ndarray, F: np.ndarray, k: int, tol: float = 1e-3) -> np.ndarray:
    """Indices of the ``k`` best rows whose parameters differ by more than ``tol``."""
    order = np.argsort(F)
    chosen: list[int] = []
    for i in order:
        if not np.isfinite(F[i]):
            break
        if all(np.abs(theta[i] - theta[j]).max() > tol for j in chosen):
            chosen.append(int(i))
        if len(chosen) >= k:
            break
    return np.array(chosen, dtype=int)


def fit_law(
    table,
    law: Law,
    *,
    pins: Mapping[str, float] | None = None,
    delta: float = DEFAULT_DELTA,
    starts: np.ndarray | None = None,
    max_starts: int = default("max_starts"),
    grid_points: int = 600,
    polish_top: int = 4,
    seed: int = 0,
    max_iter: int = 200,
    weights=None,
) -> FitResult:
    """Fit ``law`` to ``table`` (columns: loss + the law's columns; optional ``run``).

    ``starts``: internal start vectors (S, P) instead of the law's grid.
    ``weights``: None, or one non-negative weight per row multiplying its Huber loss in the
    objective (a fit weighted towards a target: fit/target_fit.py); the quality numbers (R², RMSE)
    stay unweighted.
    With more than ``grid_points`` points the grid search runs on a fixed-seed
    subsample and its best optima are refined on all points.
    """
    t0 = time.perf_counter()
    pins = dict(pins or {})
    n = len(table["loss"])
    k_free = len(law.params) - len(pins)
    if n < k_free:
        raise BadInput(
            f"bad value for points: {n} (allowed: at least as many points as free parameters of {law.name}: {k_free})"
        )
    y = fitted_target(table, law)
    pb = Problem(law, law.data(table), y, delta, pins)
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
            raise BadInput(
                f"bad value for weights: shape {w.shape} (allowed: {n} finite, non-negative weights, one a row, "
                "not all zero)"
            )
    grid = law.grid(max_starts=max_starts, seed=seed) if starts is None else np.atleast_2d(starts)
    g0 = pb.reduce(grid)
    smooth = SEARCH_SMOOTH if has_hinge(law) else 0.0

    search_pb, search_w = pb, w
    if n > grid_points:
        rng = np.random.default_rng(seed)
        if w is None:
            sub = np.sort(rng.choice(n, grid_points, replace=False))
        else:  # a weighted fit searches on rows drawn by weight: a uniform draw could hold none that count
            sub = np.sort(rng.choice(n, min(grid_points, int((w > 0).sum())), replace=False, p=w / w.sum()))
        search_pb = pb.subset(sub)
        search_w = None if w is None else w[sub]
    # float32 halves the search's cost; a user law that overflows it is searched in float64
    dtype = search_dtype(search_pb, g0, seed) if is_user(law) else np.float32
    lm = dict(smooth=smooth, xtol=SEARCH_XTOL, ftol=SEARCH_FTOL, dtype=dtype)
    g1 = g0
    if search_pb.n >= 3 * COARSE_POINTS:
        # Coarse-to-fine: the first steps away from each start only need the
        # rough shape of the objective, so they use a fixed subsample of points.
        # Every start then converges on the search points themselves.
        few = np.sort(np.random.default_rng(seed + 1).choice(search_pb.n, COARSE_POINTS, replace=False))
        few_w = None if search_w is None else search_w[few]
        g1 = batched_lm(search_pb.subset(few), g0, weights=few_w, max_iter=COARSE_ITERS, **lm)["theta"]
    res = batched_lm(search_pb, g1, weights=search_w, max_iter=max_iter, **lm)
    F1 = res["F"]
    finite = np.isfinite(F1)
    if not finite.any():
        raise WorkFailed(f"{law.name}: no start reached a finite objective")
    best1 = F1[finite].min()
    in_best = int((F1 <= best1 + 1e-4 * abs(best1) + 1e-12).sum())
    cand = _distinct(res["theta"], F1, max(polish_top, 4))
    cands = res["theta"][cand]
    # Refine candidates on the full, exact problem in float64.
    ref = batched_lm(pb, cands, weights=w, max_iter=max_iter * 2, smooth=0.0, threads=1)
    cands, Fc = ref["theta"], ref["F"]
    order = np.argsort(Fc)
    best_t, best_F = None, np.inf
    polished: list[tuple[np.ndarray, float]] = []
    for i in order[:polish_top]:
        x, Fx, _ = polish(pb, cands[i], w)
        if Fc[i] < Fx:
            x, Fx = cands[i], float(Fc[i])
        polished.append((x, Fx))
        if Fx < best_F:
            best_t, best_F = x, Fx
    basins = np.array([pb.full(x)[0] for x, _ in sorted(polished, key=lambda p: p[1])])
    theta = pb.full(best_t)[0]

    # Quality in natural units.
    L = law.to_loss(y)
    pred = law.to_loss(law.evaluate(theta[None, :], pb.X)[0])
    ss_res = float(((L - pred) ** 2).sum())
    ss_tot = float(((L - L.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    rmse = math.sqrt(ss_res / n)
    rmse_log = float(np.sqrt(np.mean((np.log(pred) - y) ** 2))) if law.objective == "log" else math.nan

    span = law.hi - law.lo
    on_bound = [
        p.name
        for i, p in enumerate(law.params)
        if p.name not in pins and (theta[i] - p.lo <= 1e-6 * span[i] or p.hi - theta[i] <= 1e-6 * span[i])
    ]
    runs = table["run"] if _has(table, "run") else None
    n_runs = int(len(set(np.asarray(runs)))) if runs is not None else None
    fr = FitResult(
        law=law,
        theta=theta,
        objective=float(best_F),
        n=n,
        n_runs=n_runs,
        r2=r2,
        rmse=rmse,
        rmse_log=rmse_log,
        pins=pins,
        on_bound=on_bound,
        starts={
            "total": int(len(g0)),
            "converged": int(res["converged"].sum()),
            "in_best_basin": in_best,
            "distinct_optima": int(len(cand)),
            "search_points": int(search_pb.n),
            "iterations": int(res["iterations"]),
            **({"precision": "float64"} if dtype == np.float64 else {}),  # float32 would overflow (search_dtype)
        },
        basins=basins,
        delta=delta,
        seconds=time.perf_counter() - t0,
    )
    fr.warnings.extend(quality_warnings(fr, table))
    return fr


def fitted_target(table, law: Law) -> np.ndarray:
    """The table's losses on the scale ``law`` is fitted on (log L, or L for ``objective: raw``);
    a loss the log cannot take is bad input naming it."""
    loss = np.asarray(table["loss"], dtype=float)
    if law.objective == "log" and (loss <= 0).any():
        i = int(np.flatnonzero(loss <= 0)[0])
        raise BadInput(
            f"bad value for loss: {float(loss[i])!r} in row {i} (allowed: > 0 for {law.name}, fitted on log L; "
            "a user law with objective: raw fits the loss itself, of any sign)"
        )
    return law.fitted(loss)


def _has(table, col: str) -> bool:
    try:
        return col in table
    except TypeError:
        return False
