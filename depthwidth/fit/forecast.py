"""Forecast a run's final loss from the part of its loss curve logged so far (docs/forecast.md).

The curve is fitted in the learning-rate area of Tissue et al. 2024 ("Scaling law with
learning rate annealing", arXiv 2408.11029), their annealing term taken without its lag:

    L(t) = E + B·(a(t) + a0)^(−β) − C·d(t)          E, B, C ≥ 0,  0.05 ≤ β ≤ 1

    a(t)  tokens seen, each weighted by its step's lr / peak lr (the area under the
          schedule: progress slows where the lr is low, in warm-up and in a decay)
    d(t)  1 − lr(t) / peak lr: how far the schedule has annealed at t

Two forms of it are fitted: the plain power law (a0 = 0) and the shifted one (a0 up to
twice the window's area), which bends to the plateau a small model shows before its
power-law phase.  The curve so far rarely tells them apart, and where it does not they
part on the run's end (on a curve still leaving its plateau the plain law forecasts
high, the shifted one low), so the forecast is their mean and its interval pools both.

The decay gain C is fitted only where the window has seen the lr anneal (``DECAY_SEEN``:
cosine past its first quarter, a WSD run inside its decay).  A window that has not (WSD's
stable phase) says nothing about it, and a stated rule stands in: the decay gains
between nothing (the area form alone: a decay only slows progress) and twice the
progress it forgoes, uniformly — its middle is the constant-lr extrapolation.

The interval is a residual bootstrap per form: refits to the fitted curve plus its
residuals drawn again (scaled up for the parameters fitted), each replicate with its own
(β, a0) and, under the rule, its own share of the decay gain; a percentile interval over
both forms' replicates.  It is an interval for the expected loss at the end (the curve),
not for one noisy measurement of it.

For fixed (β, a0) the form is linear in (E, B, C), so each form is fitted by a grid over
(β, a0) and non-negative least squares: no starts, no divergence, all replicates at once.
numpy only; nothing here reads files.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np

MIN_POINTS = 8  # points past warm-up: a 4-parameter curve needs some to spare
MIN_FRACTION = 0.2  # of the run's tokens: from less, the end is more than 5x the window away
DECAY_SEEN = 0.25  # the window's d(t) must span this much of the peak lr for C to be fitted
MAX_POINTS = 64  # longer curves are averaged into this many bins (noise down, time bounded)
REPLICATES = 200  # per form
BETAS = np.geomspace(0.05, 1.0, 20)  # LM loss curves fall slower than 1/t
FORMS = {  # a0, in units of the window's last area
    "power": np.array([0.0]),
    "shifted": np.concatenate([[0.0], np.geomspace(0.01, 2.0, 11)]),
}
FORM = "mean of E + B·a^-β and E + B·(a+a0)^-β, minus C·d (a: lr-weighted tokens, d: 1 − lr/peak)"


@dataclass(frozen=True)
class Forecast:
    """The forecast loss at ``total_tokens`` with its ``level`` interval [lo, hi]."""

    mean: float
    lo: float
    hi: float
    level: float
    form: str
    decay: str  # "none" (no annealing ahead) | "fitted" (C from the curve) | "rule" (the stated band)
    n_points: int  # points fitted (past warm-up; a long curve binned)
    tokens_used: float  # the last token count fitted
    total_tokens: float
    params: dict  # per form: E, B, beta, a0 (tokens), C (None under the rule), end (its forecast)

    def to_dict(self) -> dict:
        return asdict(self)


def forecast(
    tokens,
    loss,
    total_tokens: float,
    schedule: dict | None = None,
    level: float = 0.95,
    *,
    replicates: int = REPLICATES,
    seed: int = 0,
    min_points: int = MIN_POINTS,
    min_fraction: float = MIN_FRACTION,
) -> Forecast | None:
    """The loss at ``total_tokens`` forecast from the curve (``tokens``, ``loss``) logged so far.

    ``schedule``: ``{"tokens": [...], "lr": [...]}``, the lr of every step of the run (each
    step's token count at its end, ascending, up to ``total_tokens``); None: a constant lr.
    None when there is too little curve (``enough``, counting points past warm-up)."""
    sched = Schedule(schedule, total_tokens)
    t, y = _clean(tokens, loss)
    keep = t >= sched.fit_from
    t, y = t[keep], y[keep]
    if not enough(t, total_tokens, min_points, min_fraction):
        return None
    t, y = _bins(t, y, MAX_POINTS)
    a, d = sched.area(t), sched.annealed(t)
    scale = a[-1]  # areas in units of the window's last: the grid of a0 is scale-free
    u = a / scale
    d_end = float(sched.annealed(total_tokens))
    fit_c = float(d.max() - d.min()) >= DECAY_SEEN
    end = _End(
        u=sched.area(total_tokens) / scale,
        # the lr of the window's end kept to the run's end: the extrapolation the rule is built on
        u_flat=u[-1] + (total_tokens - t[-1]) * (1 - d[-1]) / scale,
        d=d_end,
        fit_c=fit_c,
        rule=not fit_c and d_end - d[-1] > 0.05,  # annealing ahead that the window has not seen
    )
    rng = np.random.default_rng(seed)
    points, ends, params = [], [], {}
    for name, offsets in FORMS.items():
        grid = _Grid(u, d if end.fit_c else None, offsets)
        best = grid.fit(y[:, None])
        fitted = best.curve(grid)[:, 0]
        n_par = 3 + (len(offsets) > 1) + end.fit_c  # E, B, β (+ a0) (+ C)
        resid = y - fitted
        resid = (resid - resid.mean()) * math.sqrt(len(y) / max(1, len(y) - n_par))
        boot = grid.fit(fitted[:, None] + rng.choice(resid, size=(len(y), replicates)))
        point = float(end.loss(best, 1.0)[0])  # under the rule: the middle of its band
        points.append(point)
        ends.append(end.loss(boot, rng.uniform(0.0, 2.0, replicates)))
        params[name] = best.params(scale, end.fit_c) | {"end": point}
    mean = float(np.mean(points))
    q = (1 - level) / 2
    lo, hi = np.quantile(np.concatenate(ends), [q, 1 - q])
    return Forecast(
        mean=mean,
        lo=float(min(lo, mean)),
        hi=float(max(hi, mean)),
        level=level,
        form=FORM,
        decay="fitted" if end.fit_c else "rule" if end.rule else "none",
        n_points=len(y),
        tokens_used=float(t[-1]),
        total_tokens=float(total_tokens),
        params=params,
    )


def enough(tokens, total_tokens: float, min_points: int = MIN_POINTS, min_fraction: float = MIN_FRACTION) -> bool:
    """Whether a curve (its points past warm-up) is long enough to forecast from:
    ``min_points`` points, reaching ``min_fraction`` of the run's tokens."""
    t = np.asarray(tokens, dtype=float)
    return len(t) >= min_points and total_tokens > 0 and float(t.max()) >= min_fraction * total_tokens


def flag(forecast, law_lo: float | None, law_hi: float | None) -> bool | None:
    """True when the forecast's interval and the law's interval [law_lo, law_hi] for the same
    run do not overlap (a likely bug, bad lr or bad node); None when either is missing.
    ``forecast``: a ``Forecast``, its dict, or None."""
    if forecast is None or law_lo is None or law_hi is None:
        return None
    lo, hi = (forecast["lo"], forecast["hi"]) if isinstance(forecast, dict) else (forecast.lo, forecast.hi)
    return bool(hi < law_lo or lo > law_hi)


class Schedule:
    """A run's lr schedule as the forecast needs it: lr-weighted tokens a(t), the annealed
    fraction d(t), and where warm-up's transient is over."""

    def __init__(self, schedule: dict | None, total_tokens: float):
        if schedule is None:  # a constant lr from the first token
            t, rel = np.array([float(total_tokens)]), np.array([1.0])
        else:
            t = np.asarray(schedule["tokens"], dtype=float)
            lr = np.asarray(schedule["lr"], dtype=float)
            if t.shape != lr.shape or len(t) == 0 or not np.all(np.diff(t) > 0) or not lr.max() > 0:
                raise ValueError("schedule: 'tokens' (ascending) and 'lr' (peak > 0) of equal length")
            rel = lr / lr.max()
        # step i covers the tokens (t[i-1], t[i]] at rel[i]
        self.t = np.concatenate([[0.0], t])
        self.rel = np.concatenate([rel[:1], rel])
        self.cum = np.concatenate([[0.0], np.cumsum(np.diff(self.t) * rel)])
        # warm-up ends where the lr first reaches its peak; the fit starts at twice that, once
        # Adam's moments and the loss have caught up with the lr (which a(t) alone does not model)
        self.fit_from = 2.0 * self.t[int(np.argmax(self.rel >= 1.0 - 1e-9))]

    def area(self, t):
        return np.interp(t, self.t, self.cum)

    def annealed(self, t):
        """1 − lr/peak of the step ending at (or first after) token t."""
        i = np.clip(np.searchsorted(self.t, t, side="left"), 0, len(self.t) - 1)
        return 1.0 - self.rel[i]


@dataclass
class _Best:
    """Per column of a fit (the curve, or each replicate): the best grid point's parameters."""

    E: np.ndarray
    B: np.ndarray
    C: np.ndarray
    beta: np.ndarray
    u0: np.ndarray

    def value(self, u: float) -> np.ndarray:
        """E + B·(u+u0)^−β at the area u (the annealing term aside)."""
        return self.E + self.B * (u + self.u0) ** -self.beta

    def curve(self, grid: _Grid) -> np.ndarray:
        """The fitted curve at the grid's points, (n, columns)."""
        out = self.E + self.B * (grid.u[:, None] + self.u0) ** -self.beta
        return out if grid.d is None else out - self.C * grid.d[:, None]

    def params(self, scale: float, fit_c: bool) -> dict:
        """The first column's parameters, a0 in tokens of lr-weighted area."""
        return {
            "E": float(self.E[0]),
            "B": float(self.B[0] * scale ** self.beta[0]),  # for a in tokens, not in window units
            "beta": float(self.beta[0]),
            "a0": float(self.u0[0] * scale),
            "C": float(self.C[0]) if fit_c else None,
        }


@dataclass
class _End:
    """The run's end as the forecast sees it: its area ``u`` and annealed fraction ``d``, the
    area ``u_flat`` had the lr stayed at the window's last, and how the decay gain is had."""

    u: float
    u_flat: float
    d: float
    fit_c: bool
    rule: bool

    def loss(self, b: _Best, share) -> np.ndarray:
        """The forecast at the end per column of ``b``; ``share`` (0..2): of the progress the
        decay forgoes, how much its gain is taken to be (the rule only)."""
        area = b.value(self.u)
        if self.fit_c:
            return area - b.C * self.d
        if self.rule:
            return area - share * np.maximum(0.0, area - b.value(self.u_flat))
        return area


class _Grid:
    """Every (β, a0) of a form's grid, and the least-squares fit of (E, B, C ≥ 0) at each."""

    def __init__(self, u: np.ndarray, d: np.ndarray | None, offsets: np.ndarray):
        self.u, self.d = u, d
        beta, u0 = np.meshgrid(BETAS, offsets, indexing="ij")
        self.beta, self.u0 = beta.ravel(), u0.ravel()
        x = (u[None, :] + self.u0[:, None]) ** -self.beta[:, None]  # (G, n)
        cols = [np.ones_like(x), x] + ([np.broadcast_to(-d, x.shape)] if d is not None else [])
        self.X = np.stack(cols, axis=2)  # (G, n, k): the columns of E, B, C

    def fit(self, Y: np.ndarray) -> _Best:
        """Non-negative least squares at every grid point for every column of ``Y`` (n, R), and
        the best grid point per column.  The non-negative optimum is the best of the
        unconstrained fits on those subsets of the columns whose coefficients come out
        non-negative, so the subsets are enumerated (k ≤ 3: at most 7), each solved by QR."""
        G, n, k = self.X.shape
        R = Y.shape[1]
        yy = np.einsum("nr,nr->r", Y, Y)
        best_sse = np.full(R, np.inf)
        best_coef = np.zeros((k, R))
        best_g = np.zeros(R, dtype=int)
        cols_r = np.arange(R)
        for size in range(1, k + 1):
            for cols in combinations(range(k), size):
                Q, Rm = np.linalg.qr(self.X[:, :, cols])
                # a column (nearly) dependent on the others: that grid point cannot use this subset
                ok = np.all(np.abs(np.diagonal(Rm, axis1=1, axis2=2)) > 1e-9 * math.sqrt(n), axis=1)
                Rm = np.where(ok[:, None, None], Rm, np.eye(size))
                QtY = np.einsum("gns,nr->gsr", Q, Y)
                coef = np.linalg.solve(Rm, QtY)  # (G, s, R)
                sse = yy - np.einsum("gsr,gsr->gr", QtY, QtY)
                sse = np.where(ok[:, None] & np.all(coef >= -1e-12, axis=1), sse, np.inf)
                g = np.argmin(sse, axis=0)
                better = sse[g, cols_r] < best_sse
                if not np.any(better):
                    continue
                best_sse = np.where(better, sse[g, cols_r], best_sse)
                best_g = np.where(better, g, best_g)
                full = np.zeros((k, R))
                full[list(cols)] = np.maximum(coef[g, :, cols_r].T, 0.0)
                best_coef = np.where(better, full, best_coef)
        C = best_coef[2] if k == 3 else np.zeros(R)
        return _Best(best_coef[0], best_coef[1], C, self.beta[best_g], self.u0[best_g])


def _clean(tokens, loss) -> tuple[np.ndarray, np.ndarray]:
    """Finite points with tokens > 0, sorted by tokens."""
    t = np.asarray(tokens, dtype=float)
    y = np.asarray(loss, dtype=float)
    ok = np.isfinite(t) & np.isfinite(y) & (t > 0)
    order = np.argsort(t[ok], kind="stable")
    return t[ok][order], y[ok][order]


def _bins(t: np.ndarray, y: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``most`` points: means over bins of equal token width (the late points, which
    the extrapolation leans on, keep their share)."""
    if len(t) <= most:
        return t, y
    edges = np.linspace(t[0], t[-1], most + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, most - 1)
    n = np.bincount(idx, minlength=most)
    keep = n > 0
    return (
        np.bincount(idx, weights=t, minlength=most)[keep] / n[keep],
        np.bincount(idx, weights=y, minlength=most)[keep] / n[keep],
    )
