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
of ±5) is searched in float64 instead (``search_dtype``).  The hinge max(0, .)
of the depth-delusion penalty is rounded (a C¹
quadratic spline over |D/D_crit − 1| < s, laws.py) with s = SEARCH_SMOOTH
during the search and s = HINGE_SMOOTH in the refinement, the polish and every
bootstrap refit (``Problem``): with the exact hinge the near-L1 objective
has a kink wherever D_crit(W) meets a run's depth, and its minima sat there
(29 and 36 of 60 planted fits).  Everything reported uses the exact hinge.

The numerics under ``fit_law`` (the first section): the Huber objective, the batched
Levenberg-Marquardt search over many starts, the float64 polish, and the
``FitResult`` every fit returns (the procedure: above).  The multi-start fit that drives them
(the second section) checks its result with fit/verdicts.py's ``quality_warnings``, after
``penalty_support``'s refit without the depth penalty (the third).

Public: ``fit_law``, ``fitted_target``, ``penalty_support``; ``Problem``, ``batched_lm``, ``polish``,
``huber``, ``FitResult``, ``best_starts``, ``search_dtype``.
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math
import os
import time
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.fit.laws import Law, has_hinge, is_user
from depthwidth.fit.verdicts import penalty_supported, quality_warnings

# -- The numerics: the Huber objective, the batched LM search, the polish, FitResult ----------------

DEFAULT_DELTA = default("delta")  # fit/defaults.py


SEARCH_SMOOTH = 0.05  # hinge softening during the multi-start search
# The estimator's hinge: every fit of a law with the depth-delusion hinge minimises the Huber objective
# of the hinge rounded to HINGE_SMOOTH·softplus(x/HINGE_SMOOTH), x = D/D_crit − 1 (a kink-free objective,
# so D_crit is not drawn onto the depth of a run: with the exact hinge under the near-L1 Huber loss the
# objective has a kink wherever D_crit(W) equals a run's depth, and its minima sit on them).  What is
# reported — predictions, R², derived numbers — is the law itself, with the exact hinge.
HINGE_SMOOTH = 0.05
COARSE_POINTS, COARSE_ITERS = 60, 20  # first steps of the search on a subsample
SEARCH_XTOL, SEARCH_FTOL = 1e-4, 1e-5  # a start has converged (float32 search; optima are refined after)


_ELEMS_PER_CHUNK = 48_000  # starts x points per batched chunk (cache friendly)


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber loss: r²/2 for |r| <= delta, delta·(|r| - delta/2) beyond."""
    a = np.abs(r)
    m = np.minimum(a, delta)
    a -= 0.5 * m
    a *= m
    return a


@dataclass
class Problem:
    """A law, its data in log space, the Huber delta and the pinned parameters."""

    law: Law
    X: dict
    y: np.ndarray  # log loss, (n,)
    delta: float = DEFAULT_DELTA
    pins: Mapping[str, float] = field(default_factory=dict)  # natural values
    smooth: float | None = None  # the estimator's hinge rounding (None: HINGE_SMOOTH for a hinge law, else 0)

    def __post_init__(self):
        if self.smooth is None:
            self.smooth = HINGE_SMOOTH if "dcrit" in self.law.options else 0.0
        P = len(self.law.params)
        self.fixed = np.zeros(P)
        pinned = []
        for k, v in self.pins.items():
            i = self.law.index(k)
            self.fixed[i] = self.law.params[i].to_internal(v)
            pinned.append(i)
        self.free = np.array([i for i in range(P) if i not in pinned], dtype=int)
        self.lo = self.law.lo[self.free]
        self.hi = self.law.hi[self.free]
        self.n = len(self.y)

    def full(self, tf: np.ndarray) -> np.ndarray:
        tf = np.atleast_2d(tf)
        out = np.repeat(self.fixed[None, :], len(tf), axis=0)
        out[:, self.free] = tf
        return out

    def reduce(self, theta: np.ndarray) -> np.ndarray:
        return np.atleast_2d(theta)[:, self.free]

    def eval(self, tf: np.ndarray, jac: bool, smooth: float = 0.0, X=None):
        X = self.X if X is None else X
        return self.law.evaluate(self.full(tf), X, jac=jac, smooth=max(smooth, self.smooth), free=self.free)

    def objective(self, tf: np.ndarray, w=None, smooth: float = 0.0) -> np.ndarray:
        """Sum of (weighted) Huber losses, one value per row of ``tf``."""
        r = self.eval(tf, jac=False, smooth=smooth) - self.y
        h = huber(r, self.delta)
        if w is not None:
            h = h * w
        with np.errstate(invalid="ignore"):
            F = h.sum(axis=1)
        return np.where(np.isfinite(F), F, np.inf)

    def astype(self, dtype) -> "Problem":
        X = {k: v.astype(dtype) for k, v in self.X.items()}
        return Problem(self.law, X, self.y.astype(dtype), self.delta, dict(self.pins), self.smooth)

    def subset(self, idx: np.ndarray) -> "Problem":
        X = {k: v[idx] for k, v in self.X.items()}
        return Problem(self.law, X, self.y[idx], self.delta, dict(self.pins), self.smooth)


def _threads() -> int:
    try:
        return max(1, min(4, len(os.sched_getaffinity(0))))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, min(4, os.cpu_count() or 1))


def batched_lm(
    pb: Problem,
    starts: np.ndarray,
    weights=None,
    max_iter: int = 200,
    smooth: float = 0.0,
    xtol: float = 1e-8,
    ftol: float = 1e-13,
    dtype=np.float64,
    threads: int | None = None,
    ys=None,
) -> dict:
    """Optimise every row of ``starts`` (S, P_free) at once.

    ``weights``: None, (n,) or (S, n) per-point weights (bootstrap
    multiplicities, 0 for held-out points).  ``ys``: None, or (S, n) log
    losses, one target per row (a residual bootstrap's replicates) instead of ``pb.y``.  ``dtype=np.float32`` halves the
    cost of a search whose optima are refined in float64 afterwards.  Chunks
    of starts run on ``threads`` threads (numpy releases the GIL in its loops).
    Returns theta (S, P_free), F (S,), converged (S,) and the iterations used.
    """
    starts = np.clip(np.atleast_2d(np.asarray(starts, dtype=float)), pb.lo, pb.hi)
    S = len(starts)
    W = None if weights is None else np.asarray(weights, dtype=dtype)
    per_start = W is not None and W.ndim == 2
    Y = None if ys is None else np.asarray(ys, dtype=dtype)
    work = pb if dtype == np.float64 else pb.astype(dtype)
    per_elem = 8 if dtype == np.float64 else 4
    chunk = max(8, (_ELEMS_PER_CHUNK * 8 // per_elem) // max(pb.n, 1))
    theta = starts.copy()
    F = np.full(S, np.inf)
    conv = np.zeros(S, dtype=bool)
    slices = [slice(a, min(S, a + chunk)) for a in range(0, S, chunk)]
    threads = _threads() if threads is None else threads

    def run(sl):
        w = W[sl] if per_start else W
        return _lm_chunk(work, theta[sl], w, max_iter, smooth, xtol, ftol, None if Y is None else Y[sl])

    if threads > 1 and len(slices) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as ex:
            results = list(ex.map(run, slices))
    else:
        results = [run(sl) for sl in slices]
    iters = 0
    for sl, (t, f, c, it) in zip(slices, results):
        theta[sl], F[sl], conv[sl] = t, f, c
        iters = max(iters, it)
    return {"theta": theta, "F": F, "converged": conv, "iterations": iters}


def _lm_chunk(pb: Problem, th, w, max_iter, smooth, xtol, ftol, ys=None):
    d = pb.delta
    y = pb.y if ys is None else ys  # (n,) shared, or (S, n) one target per row
    S, Pf = th.shape
    lo, hi = pb.lo, pb.hi
    eye = np.eye(Pf)
    tiny = float(np.finfo(y.dtype).tiny)

    def evaluate(t, wt, y):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pred, J = pb.eval(t, jac=True, smooth=smooth)
            pred -= y
            h = huber(pred, d)
            if wt is not None:
                h *= wt
            F = h.sum(axis=1, dtype=np.float64)
        bad_ = ~np.isfinite(F)
        if bad_.any():
            F[bad_] = np.inf
        return pred, J, F

    out_t, out_F = th.copy(), np.full(S, np.inf)
    out_c = np.zeros(S, dtype=bool)
    idx = np.arange(S)  # working set -> original rows
    wt = None if w is None else w
    t = th.copy()
    r, J, F = evaluate(t, wt, y)
    lam = np.full(S, 1e-3)
    frozen = np.zeros(S, dtype=bool)  # finished rows not yet compacted away
    it = 0
    for it in range(1, max_iter + 1):
        if len(idx) == 0 or frozen.all():
            break
        # Huber IRLS: psi = clip(r), majoriser weights omega = min(1, delta/|r|).
        ar = np.abs(r)
        m = np.minimum(ar, d)
        psi = np.copysign(m, r)
        np.maximum(ar, tiny, out=ar)
        omega = np.divide(m, ar, out=m)
        if wt is not None:
            psi *= wt
            omega *= wt
        g = np.matmul(J, psi[:, :, None])[:, :, 0].astype(np.float64, copy=False)
        H = np.matmul(J * omega[:, None, :], np.swapaxes(J, 1, 2)).astype(np.float64, copy=False)
        dg = np.diagonal(H, axis1=1, axis2=2)
        damp = dg + 1e-6 * dg.max(axis=1, keepdims=True) + 1e-12
        A = H + (lam[:, None] * damp)[:, :, None] * eye
        ok = np.isfinite(A).all(axis=(1, 2)) & np.isfinite(g).all(axis=1)
        if not ok.all():
            A[~ok] = eye
            g[~ok] = 0.0
        try:
            step = np.linalg.solve(A, -g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = -g / damp
        if frozen.any():
            step[frozen] = 0.0
        tt = np.clip(t + step, lo, hi)
        rt, Jt, Ft = evaluate(tt, wt, y)
        acc = Ft < F
        moved = np.abs(tt - t).max(axis=1)
        with np.errstate(invalid="ignore"):  # inf - inf where a start began outside the law's domain
            gain = np.where(acc, F - Ft, 0.0)
        F_prev = F
        if not acc.all():  # keep the old point where the trial was rejected
            rej = ~acc
            tt[rej], rt[rej], Jt[rej] = t[rej], r[rej], J[rej]
            Ft = np.where(acc, Ft, F)
        t, r, J, F = tt, rt, Jt, Ft
        lam = np.where(acc, np.maximum(lam / 3.0, 1e-7), lam * 4.0)
        done = ((acc & ((moved < xtol) | (gain <= ftol * np.abs(F_prev)))) | (lam > 1e8) | ~np.isfinite(F)) & ~frozen
        if done.any():
            out_t[idx[done]], out_F[idx[done]] = t[done], F[done]
            out_c[idx[done]] = np.isfinite(F[done])
            frozen |= done
            nf = int(frozen.sum())
            if nf == len(idx) or nf >= max(8, len(idx) // 5):  # compact now and then, not every iteration
                keep = ~frozen
                idx, t, r, J, F, lam, frozen = idx[keep], t[keep], r[keep], J[keep], F[keep], lam[keep], frozen[keep]
                if wt is not None and wt.ndim == 2:
                    wt = wt[keep]
                if y.ndim == 2:
                    y = y[keep]
        if frozen.any():
            lam[frozen] = 1.0  # frozen rows take no step (below) and stay where they were recorded
    live = ~frozen
    if live.any():
        out_t[idx[live]], out_F[idx[live]] = t[live], F[live]  # ran out of iterations: not converged
    return out_t, out_F, out_c, it


def polish(pb: Problem, t0: np.ndarray, w=None, maxiter: int = 5000) -> tuple[np.ndarray, float, bool]:
    """scipy L-BFGS-B on the exact objective, scaled by 1/delta, analytic gradient."""
    from scipy.optimize import minimize

    scale = 1.0 / pb.delta
    d = pb.delta

    def fg(t):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pred, J = pb.eval(t[None, :], jac=True, smooth=0.0)
            r = pred[0] - pb.y
            h = huber(r, d)
            psi = np.clip(r, -d, d)
            if w is not None:
                h, psi = h * w, psi * w
            F = h.sum()
            g = J[0] @ psi
        if not np.isfinite(F) or not np.isfinite(g).all():
            return 1e300, np.zeros_like(t)
        return F * scale, g * scale

    res = minimize(
        fg,
        np.clip(t0, pb.lo, pb.hi),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(pb.lo, pb.hi)),
        options={"maxiter": maxiter, "maxfun": 4 * maxiter, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30},
    )
    x = np.clip(res.x, pb.lo, pb.hi)
    F = float(pb.objective(x[None, :], w)[0])
    return x, F, bool(res.success)


@dataclass
class FitResult:
    law: Law
    theta: np.ndarray  # internal, all parameters
    objective: float
    n: int
    n_runs: int | None
    r2: float
    rmse: float
    rmse_log: float
    pins: dict
    on_bound: list
    starts: dict
    basins: np.ndarray  # internal (K, P): distinct good optima, best first
    delta: float
    warnings: list = field(default_factory=list)
    seconds: float = 0.0
    checks: dict = field(default_factory=dict)

    @property
    def params(self) -> dict[str, float]:
        return self.law.natural(self.theta)

    def to_dict(self) -> dict:
        return {
            "law": self.law.name,
            "formula": self.law.formula,
            "options": dict(self.law.options),
            "n": self.n,
            "n_runs": self.n_runs,
            "params": self.params,
            "r2": self.r2,
            "rmse": self.rmse,
            "rmse_log": self.rmse_log,
            "objective": self.objective,
            "huber_delta": self.delta,
            "pinned": dict(self.pins),
            "on_bound": list(self.on_bound),
            "starts": dict(self.starts),
            "checks": dict(self.checks),
            "seconds": round(self.seconds, 3),
        }


PRECISION_PROBES = 256  # start rows, plus as many points drawn in the bounds' box, on which float32 is checked
PRECISION_RTOL = 1e-3  # a float32 value this far from float64's (relative, + absolute 1e-3) is not faithful


def search_dtype(pb: Problem, starts: np.ndarray, seed: int = 0):
    """The precision the multi-start search can run in: float32 (half the cost) where it evaluates
    the law as float64 does, float64 where it does not.

    A user law's formula is evaluated as written (fit/userlaw.py), so an input near 2e11 raised to
    a power of ±5 overflows (or underflows) float32 (max 3.4e38, smallest 1.4e-45) where float64 is
    finite: every start there was dead in a float32 search (an infinite objective, no step), and
    which basins survived depended on how many starts were drawn.  The check evaluates the law
    and its Jacobian at up to ``PRECISION_PROBES`` of the starts and as many points drawn
    uniformly in the bounds (where the search may go) in both precisions: float64 when a value or
    a partial is finite in float64 and not in float32, or a value differs by more than
    ``PRECISION_RTOL``.  (The built-in laws are computed in log space and never need it.)
    """
    rng = np.random.default_rng(seed + 17)
    st = np.atleast_2d(starts)
    if len(st) > PRECISION_PROBES:
        st = st[np.sort(rng.choice(len(st), PRECISION_PROBES, replace=False))]
    box = pb.lo + rng.random((PRECISION_PROBES, len(pb.free))) * (pb.hi - pb.lo)
    pts = np.clip(np.vstack([st, box]), pb.lo, pb.hi)
    pb32 = pb.astype(np.float32)
    for a in range(0, len(pts), 32):
        t = pts[a : a + 32]
        with np.errstate(all="ignore"):
            p64, J64 = pb.eval(t, jac=True)
            p32, J32 = pb32.eval(t.astype(np.float32), jac=True)
            ok64 = np.isfinite(p64) & np.isfinite(J64).all(axis=1)
            ok32 = np.isfinite(p32) & np.isfinite(J32).all(axis=1)
            drift = np.abs(p32.astype(np.float64) - p64) > PRECISION_RTOL * (1.0 + np.abs(p64))
        if (ok64 & ~ok32).any() or (ok64 & ok32 & drift).any():
            return np.float64
    return np.float32


def best_starts(fr: FitResult, law: Law, extra: int = 4, seed: int = 1) -> np.ndarray:
    """A small start grid for refits: the optimum, other good optima, a few grid points."""
    rows = [fr.theta.copy()] + [b.copy() for b in fr.basins[1:4]]
    size = law.grid_size  # the rows picked are built, not the whole product (a user law's can be huge)
    if extra and size:
        pick = np.random.default_rng(seed).choice(size, min(extra, size), replace=False)
        rows += list(law.grid_rows(pick))
    return np.array(rows, dtype=float)


# -- The multi-start fit (fit_law) ------------------------------------------------------------------


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
    support = penalty_support(fr, table)  # the law without its depth penalty (None: no penalty to test)
    if support is not None:
        fr.checks["penalty_support"] = support
    fr.warnings.extend(quality_warnings(fr, table, support))
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


# -- The depth penalty's BIC support: the law refitted without it -----------------------------------


def penalty_support(fr: FitResult, table) -> dict | None:
    """BIC of the depth-delusion law against the same law with the penalty switched off.

    Gaussian likelihood of the log-loss residuals, with the runs as the sample size; without the
    penalty, gamma, mu and the D_crit parameters are not counted.  ``supported`` (verdicts.py) when the
    penalty lowers BIC by more than 2.
    """
    law = fr.law
    if not has_hinge(law) or "gamma" in fr.pins:
        return None
    y = np.log(np.asarray(table["loss"], dtype=float))
    X = law.data(table)
    g = law.param("gamma")
    pb0 = Problem(law, X, y, fr.delta, {**fr.pins, "gamma": float(g.to_natural(g.lo))})
    res = batched_lm(pb0, pb0.reduce(best_starts(fr, law)), max_iter=300, threads=1)
    t0 = pb0.full(res["theta"][int(np.argmin(res["F"]))])[0]
    n = len(y)
    rss1 = float(((law.evaluate(fr.theta[None, :], X)[0] - y) ** 2).sum())
    rss0 = float(((law.evaluate(t0[None, :], X)[0] - y) ** 2).sum())
    k1 = len(law.params) - len(fr.pins)
    k0 = k1 - len([p for p in ("gamma", "mu", "kappa", "c", "p") if p in law.names and p not in fr.pins])
    # The sample size is the number of runs: a run's token budgets share its seed's noise, so they are
    # not independent evidence (counted as points, three budgets a run tripled every gain in fit and
    # let a penalty through one noisy run pass the test).
    m = len(set(np.asarray(table["run"]).astype(str))) if "run" in table else n
    bic1 = m * math.log(max(rss1, 1e-300) / n) + k1 * math.log(m)
    bic0 = m * math.log(max(rss0, 1e-300) / n) + k0 * math.log(m)
    return {
        "delta_bic": bic1 - bic0,
        "supported": penalty_supported(bic1 - bic0),
        "rmse_log_without": math.sqrt(rss0 / n),
        "params_without": law.natural(t0),  # the law with the penalty off: what a figure draws when it is not supported
    }
