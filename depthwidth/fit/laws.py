"""Loss laws as data: parameters with bounds and start grids, formula, columns.

Every law is fitted in log space as a log-sum-exp of *terms*::

    log L_hat = log( sum_k exp(u_k) )

where each term ``u_k`` is the log of one additive piece of the law.  Positive
coefficients are optimised through their logarithm (``A = exp(a)``), exactly as
in Hoffmann et al. (2022), Approach 3.  A term knows its log value and its
derivatives (the term kinds below), so the fitting engine (engine.py) gets analytic Jacobians for any
law built from them.  Adding a law is adding one entry to
``_SPECS``.

Symbols: ``params`` is N, ``tokens`` T, ``depth`` D, ``width`` W.

No numpy import cost at module import time beyond numpy itself; no scipy,
pandas or torch here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from depthwidth.core.errors import BadInput, bad, key_values

# -- The pieces laws are built from -----------------------------------------------------------------------
# Fitted parameters with bounds and start grids, and the term kinds (constant, power law, depth
# penalty) that know their log value and its derivatives, so the engine gets analytic Jacobians.


@dataclass(frozen=True)
class Param:
    """One fitted parameter.

    ``lo``/``hi``/``grid`` are in *internal* units: log(value) when ``log``.
    ``exponent`` marks parameters whose interval is checked for containing 0.
    """

    name: str
    lo: float
    hi: float
    grid: tuple[float, ...]
    log: bool = False
    exponent: bool = False
    doc: str = ""

    def to_internal(self, value: float) -> float:
        if self.log:
            if not value > 0:
                raise bad(self.name, value, f"{self.name} > 0 (it is fitted through its logarithm)")
            return math.log(value)
        return float(value)

    def to_natural(self, u):
        return np.exp(u) if self.log else u


def coef(name: str, grid=(0.0, 5.0, 10.0, 20.0), lo=-20.0, hi=100.0, doc="") -> Param:
    return Param(name, lo, hi, tuple(grid), log=True, doc=doc or f"{name} > 0, fitted as log {name}")


def expo(name: str, grid=(0.1, 0.4, 1.0), lo=-1.0, hi=5.0, doc="") -> Param:
    return Param(name, lo, hi, tuple(grid), exponent=True, doc=doc or "exponent")


def irreducible_param(grid=(-1.0, 0.0, 1.0)) -> Param:
    # E in [6e-6, 20] nats; sitting on the lower bound means the data want no E.
    return Param("E", -12.0, 3.0, tuple(grid), log=True, doc="irreducible loss E > 0, fitted as log E")


@dataclass(frozen=True)
class Const:
    """u = log E."""

    coef: str

    def params(self):
        return (self.coef,)

    def columns(self):
        return ()

    def value(self, th, X, smooth):
        return np.repeat(th[self.coef], len(X["_zero"]), axis=1)

    def grads(self, th, X, smooth):
        return {self.coef: None}  # None means "1"


@dataclass(frozen=True)
class Power:
    """u = log A - sum_j e_j log x_j   (A / prod x_j^e_j)."""

    coef: str
    factors: tuple[tuple[str, str], ...]  # (exponent parameter, column)

    def params(self):
        return (self.coef,) + tuple(e for e, _ in self.factors)

    def columns(self):
        return tuple(c for _, c in self.factors)

    def value(self, th, X, smooth):
        u = None
        for e, c in self.factors:
            if u is None:
                u = th[e] * X["neglog_" + c]
            else:
                u += th[e] * X["neglog_" + c]
        if u is None:
            return np.repeat(th[self.coef], len(X["_zero"]), axis=1)
        u += th[self.coef]
        return u

    def grads(self, th, X, smooth):
        g = {self.coef: None}
        for e, c in self.factors:
            g[e] = X["neglog_" + c]
        return g


@dataclass(frozen=True)
class DepthPenalty:
    """Phi = gamma * W^-mu * max(0, (D - D_crit(W)) / D_crit(W)).

    ``form='log'``: D_crit = kappa * ln W; ``form='power'``: D_crit = c * W^p.
    With ``smooth > 0`` the hinge is rounded over |x| < smooth (``_hinge``): wider during the
    multi-start search, so that the D_crit parameters feel a gradient from runs near D_crit, and
    narrow in the estimator (engine.HINGE_SMOOTH); everything reported uses the exact hinge.
    """

    form: str  # log | power

    def params(self):
        return ("gamma", "mu") + (("kappa",) if self.form == "log" else ("c", "p"))

    def columns(self):
        return ("depth", "width")

    def dcrit(self, th, X):
        if self.form == "log":
            return np.exp(th["kappa"]) * X["log_width"]
        return np.exp(th["c"] + th["p"] * X["log_width"])

    def _hinge(self, x, smooth):
        """log h(x) and d log h / dx for the hinge, rounded over |x| < smooth when smooth > 0.

        The rounding is the C¹ quadratic spline h = (x + s)²/(4s) on |x| < s (h = 0 below −s, x
        above s): the objective has no kink where D_crit passes a run's depth, and, unlike a
        softplus, no exponential tail below D_crit that a huge gamma could turn into a penalty
        on every run (a spurious basin of the search)."""
        if smooth > 0:
            s = smooth
            pos = x > -s
            mid = pos & (x < s)
            xs = np.where(pos, np.maximum(x, -s) + s, 1.0)  # x + s where the hinge is not 0
            with np.errstate(divide="ignore", invalid="ignore"):
                logh = np.where(
                    mid, 2.0 * np.log(xs) - np.log(4.0 * s), np.where(pos, np.log(np.maximum(x, 1e-300)), -np.inf)
                )
                dlogh = np.where(mid, 2.0 / xs, np.where(pos, 1.0 / np.maximum(x, 1e-300), 0.0))
            return logh, dlogh
        pos = x > 0
        xs = np.where(pos, np.maximum(x, 1e-300), 1.0)
        logh = np.where(pos, np.log(xs), -np.inf)
        dlogh = np.where(pos, 1.0 / xs, 0.0)
        return logh, dlogh

    def value(self, th, X, smooth):
        ratio = X["depth"] / self.dcrit(th, X)
        logh, _ = self._hinge(ratio - 1.0, smooth)
        return th["gamma"] - th["mu"] * X["log_width"] + logh

    def grads(self, th, X, smooth):
        return self.value_and_grads(th, X, smooth)[1]

    def value_and_grads(self, th, X, smooth):
        """(value, grads) from one evaluation of D_crit and the hinge, for a fit's Jacobian (``Law.evaluate``
        with ``jac``); ``value`` alone builds no gradients."""
        ratio = X["depth"] / self.dcrit(th, X)
        logh, dlogh = self._hinge(ratio - 1.0, smooth)
        u = th["gamma"] - th["mu"] * X["log_width"] + logh
        dx = -dlogh * ratio  # d log h / d log D_crit
        g = {"gamma": None, "mu": X["neglog_width"]}
        if self.form == "log":
            g["kappa"] = dx
        else:
            g["c"] = dx
            g["p"] = dx * X["log_width"]
        return u, g


# -- Laws ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Law:
    name: str
    formula: str
    params: tuple[Param, ...]
    terms: tuple
    options: Mapping[str, object] = field(default_factory=dict)

    # ---- bookkeeping
    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def columns(self) -> tuple[str, ...]:
        cols: list[str] = []
        for t in self.terms:
            for c in t.columns():
                if c not in cols:
                    cols.append(c)
        return tuple(cols)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise bad("parameter", name, f"parameters of {self.name}: {', '.join(self.names)}") from None

    def param(self, name: str) -> Param:
        return self.params[self.index(name)]

    @property
    def lo(self) -> np.ndarray:
        return np.array([p.lo for p in self.params])

    @property
    def hi(self) -> np.ndarray:
        return np.array([p.hi for p in self.params])

    def natural(self, theta) -> dict[str, float]:
        """Internal vector (P,) -> {name: natural value}."""
        return {p.name: float(p.to_natural(theta[i])) for i, p in enumerate(self.params)}

    def natural_batch(self, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Internal (B, P) -> {name: (B,) natural values}."""
        return {p.name: p.to_natural(theta[:, i]) for i, p in enumerate(self.params)}

    # ---- the scale the law is fitted on
    @property
    def objective(self) -> str:
        """``log``: the engine fits log L (every built-in law); ``raw``: L itself (a user law's
        ``objective: raw``, userlaw.py).  ``evaluate`` returns values on this scale."""
        return "log"

    def fitted(self, loss) -> np.ndarray:
        """Losses on the scale the law is fitted on (``objective``): log L, or L itself."""
        loss = np.asarray(loss, dtype=float)
        if self.objective == "raw":
            return loss
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(loss)

    def to_loss(self, pred):
        """Values on the fitted scale (``evaluate``'s) -> losses."""
        return pred if self.objective == "raw" else np.exp(pred)

    def internal(self, values: Mapping[str, float]) -> np.ndarray:
        return np.array([p.to_internal(values[p.name]) for p in self.params], dtype=float)

    def grid(self, max_starts: int | None = None, seed: int = 0) -> np.ndarray:
        """Cartesian product of the parameters' start values (S, P).

        When the product exceeds ``max_starts`` a fixed-seed random subset is
        kept (order preserved), so results are reproducible.  Only the rows kept
        are built: a user law's product can run to millions of rows.
        """
        total = self.grid_size
        if max_starts is None or total <= max_starts:
            return np.array(list(itertools.product(*[p.grid for p in self.params])), dtype=float)
        rng = np.random.default_rng(seed)
        if total < 2**62:
            return self.grid_rows(np.sort(rng.choice(total, max_starts, replace=False)))
        # beyond int64 indices: draw each coordinate (rows may repeat; a product this large is sparse anyway)
        return np.stack([np.asarray(p.grid)[rng.integers(0, len(p.grid), max_starts)] for p in self.params], axis=1)

    @property
    def grid_size(self) -> int:
        return math.prod(len(p.grid) for p in self.params)

    def grid_rows(self, idx) -> np.ndarray:
        """Rows ``idx`` of the start grid, in ``itertools.product`` order (last parameter fastest)."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((len(idx), len(self.params)))
        for j in range(len(self.params) - 1, -1, -1):
            g = np.asarray(self.params[j].grid, dtype=float)
            out[:, j] = g[idx % len(g)]
            idx = idx // len(g)
        return out

    def data(self, table) -> dict[str, np.ndarray]:
        """Column arrays (and their logs) the terms read, from a DataFrame or dict."""
        X: dict[str, np.ndarray] = {}
        for c in self.columns:
            col, eq, value = c.partition("=")
            if (
                eq and c not in table
            ):  # an indicator column (a user law's ``X: shape=x``): 1 where COLUMN equals VALUE, else 0
                v = (np.asarray(table[col]).astype(str) == value).astype(float)
            else:
                v = np.asarray(table[c], dtype=float)
            X[c] = v
            with np.errstate(divide="ignore", invalid="ignore"):  # a user law may read a column <= 0
                X["log_" + c] = np.log(v)
            X["neglog_" + c] = -X["log_" + c]
        n = len(np.asarray(table["loss"]))
        X["_zero"] = np.zeros(n)
        return X

    # ---- evaluation
    def evaluate(
        self,
        theta: np.ndarray,
        X: Mapping[str, np.ndarray],
        jac: bool = False,
        smooth: float = 0.0,
        free: Sequence[int] | None = None,
    ):
        """log L_hat (L_hat itself for ``objective`` raw) for a batch of internal parameter vectors.

        theta: (S, P) internal values.  Returns pred (S, n) and, with ``jac``,
        J (S, len(free), n) = d pred / d theta[free].
        """
        theta = np.atleast_2d(np.asarray(theta, dtype=X["_zero"].dtype))
        th = {p.name: theta[:, i : i + 1] for i, p in enumerate(self.params)}
        both = [t.value_and_grads(th, X, smooth) if jac and hasattr(t, "value_and_grads") else None for t in self.terms]
        us = [t.value(th, X, smooth) if b is None else b[0] for t, b in zip(self.terms, both)]
        m = us[0].copy()
        for u in us[1:]:
            np.maximum(m, u, out=m)
        z = None
        for u in us:  # u <- exp(u - m), in place
            np.subtract(u, m, out=u)
            np.exp(u, out=u)
            if z is None:
                z = u.copy()
            else:
                z += u
        pred = np.log(z)
        pred += m
        if not jac:
            return pred
        free = list(range(len(self.params))) if free is None else list(free)
        col = {self.params[j].name: k for k, j in enumerate(free)}
        S, n = pred.shape
        J = np.empty((S, len(free), n), dtype=pred.dtype)
        written = np.zeros(len(free), dtype=bool)
        np.reciprocal(z, out=z)
        for t, e, b in zip(self.terms, us, both):
            e *= z  # softmax weight of this term
            for name, d in (t.grads(th, X, smooth) if b is None else b[1]).items():
                k = col.get(name)
                if k is None:
                    continue
                if written[k]:
                    J[:, k, :] += e if d is None else e * d
                elif d is None:
                    J[:, k, :] = e
                else:
                    np.multiply(e, d, out=J[:, k, :])
                written[k] = True
        for k in np.flatnonzero(~written):
            J[:, k, :] = 0.0
        return pred, J

    def predict(self, values: Mapping[str, float], table) -> np.ndarray:
        """Loss (nats) predicted for each row of ``table`` at natural parameter values."""
        X = self.data(table)
        return self.to_loss(self.evaluate(self.internal(values)[None, :], X)[0])

    def dcrit(self, values: Mapping[str, object], width) -> np.ndarray | None:
        """D_crit(W) at natural parameter values, or None for laws without one.

        Scalar parameters give shape (len(W),); arrays of shape (B,) give (B, len(W)).
        """
        form = self.options.get("dcrit")
        logw = np.log(np.atleast_1d(np.asarray(width, dtype=float)))
        if form == "log":
            k = np.asarray(values["kappa"], dtype=float)
            return np.multiply.outer(k, logw)
        if form == "power":
            c = np.asarray(values["c"], dtype=float)
            p = np.asarray(values["p"], dtype=float)
            return np.multiply.outer(c, np.ones_like(logw)) * np.exp(np.multiply.outer(p, logw))
        return None

    def describe(self) -> dict:
        return {
            "name": self.name,
            "formula": self.formula,
            "columns": list(self.columns),
            "options": dict(self.options),
            "params": [
                {
                    "name": p.name,
                    "bounds_internal": [p.lo, p.hi],
                    "log": p.log,
                    "exponent": p.exponent,
                    "grid": list(p.grid),
                }
                for p in self.params
            ],
        }


def _chinchilla(**_) -> Law:
    # Hoffmann et al. (2022) Approach 3 grid, exactly: alpha, beta in {0, .5, ..., 2},
    # e in {-1, -.5, ..., 1}, a, b in {0, 5, ..., 25}: 5*5*5*6*6 = 4,500 starts.
    ab = tuple(float(x) for x in range(0, 30, 5))
    return Law(
        "chinchilla",
        "E + A/N^alpha + B/T^beta",
        (
            irreducible_param(grid=(-1.0, -0.5, 0.0, 0.5, 1.0)),
            coef("A", grid=ab),
            coef("B", grid=ab),
            expo("alpha", grid=(0.0, 0.5, 1.0, 1.5, 2.0)),
            expo("beta", grid=(0.0, 0.5, 1.0, 1.5, 2.0)),
        ),
        (Power("A", (("alpha", "params"),)), Power("B", (("beta", "tokens"),)), Const("E")),
    )


def _depth_delusion(dcrit: str = "log", irreducible: bool = False, **_) -> Law:
    if dcrit not in ("log", "power"):
        raise bad("--dcrit", dcrit, "log (D_crit = kappa*ln W) | power (D_crit = c*W^p)")
    ps = [
        coef("A"),
        expo("alpha"),
        coef("B"),
        expo("delta"),
        Param("gamma", -25.0, 25.0, (-5.0, -2.0, 1.0), log=True, doc="penalty scale gamma > 0"),
        Param("mu", -3.0, 5.0, (0.0, 0.5), doc="width damping of the penalty"),
    ]
    if dcrit == "log":
        ps.append(
            Param(
                "kappa",
                math.log(0.05),
                math.log(200.0),
                (0.0, math.log(2.5), math.log(6.0)),
                log=True,
                doc="D_crit = kappa * ln W",
            )
        )
        dc = "kappa*ln W"
    else:
        ps += [
            Param("c", -10.0, 10.0, (math.log(0.5), math.log(2.0)), log=True, doc="D_crit = c * W^p"),
            Param("p", -1.0, 2.0, (0.2, 0.5, 0.8), doc="D_crit = c * W^p"),
        ]
        dc = "c*W^p"
    terms = [Power("A", (("alpha", "params"),)), Power("B", (("delta", "tokens"),)), DepthPenalty(dcrit)]
    formula = f"A/N^alpha + B/T^delta + gamma*W^-mu*max(0, (D - D_crit)/D_crit), D_crit = {dc}"
    if irreducible:
        ps.insert(0, irreducible_param())
        terms.append(Const("E"))
        formula = "E + " + formula
    return Law("depth-delusion", formula, tuple(ps), tuple(terms), {"dcrit": dcrit, "irreducible": bool(irreducible)})


def _width_depth(**_) -> Law:
    # The separable form fitted on the Gemstones suite (McLeish et al. 2025).
    return Law(
        "width-depth",
        "E + A_w/W^a_w + A_d/D^a_d + B/T^beta",
        (
            irreducible_param(),
            coef("A_w", grid=(0.0, 5.0, 10.0)),
            expo("a_w", grid=(0.2, 0.6, 1.2)),
            coef("A_d", grid=(0.0, 5.0, 10.0)),
            expo("a_d", grid=(0.2, 0.6, 1.2)),
            coef("B"),
            expo("beta", grid=(0.2, 0.5, 1.0)),
        ),
        (
            Power("A_w", (("a_w", "width"),)),
            Power("A_d", (("a_d", "depth"),)),
            Power("B", (("beta", "tokens"),)),
            Const("E"),
        ),
    )


_SPECS: dict[str, Callable[..., Law]] = {
    "chinchilla": _chinchilla,
    "depth-delusion": _depth_delusion,
    "width-depth": _width_depth,
}


LAW_NAMES = tuple(_SPECS)


def is_user(law: Law) -> bool:
    """Whether a law is user-defined (fit/userlaw.py: a law file or mapping), not a built-in."""
    return "user" in law.options


def builtin_of_label(lab: str, options: dict | None = None) -> Law:
    """A built-in law from its fit.json label (``depth-delusion[log+E]`` …) and options: the
    built-in half of fit/userlaw.py's ``law_of_label``."""
    if options:
        return get_law(
            lab.split("[", 1)[0], dcrit=options.get("dcrit", "log"), irreducible=bool(options.get("irreducible", False))
        )
    name, _, rest = lab.partition("[")
    form = rest.rstrip("]")
    return get_law(name, dcrit=form.split("+")[0] or "log", irreducible=form.endswith("+E"))


def has_hinge(law: Law) -> bool:
    """Whether the law has the depth-delusion hinge max(0, D - D_crit)."""
    return "dcrit" in law.options


def get_law(name: str, dcrit: str = "log", irreducible: bool = False) -> Law:
    """The law called ``name`` (``--dcrit``/``--irreducible`` apply to depth-delusion)."""
    try:
        make = _SPECS[name]
    except KeyError:
        raise bad("--law", name, " | ".join(LAW_NAMES)) from None
    return make(dcrit=dcrit, irreducible=irreducible)


def label(law: Law) -> str:
    """A law as fit.json, comparisons and the report name it: depth-delusion carries its D_crit form."""
    if law.name != "depth-delusion":
        return law.name
    return f"depth-delusion[{law.options['dcrit']}{'+E' if law.options['irreducible'] else ''}]"


def parse_values(spec: str | Sequence[str] | None, law: Law, option: str = "--pin") -> dict[str, float]:
    """``"alpha=0.076,E=1.7"`` (or a list of such) -> {name: natural value}, each inside its bounds."""
    if not spec:
        return {}
    out: dict[str, float] = {}
    for k, v in key_values(spec, option, "NAME=VALUE, e.g. alpha=0.076"):
        p = law.param(k)
        try:
            x = float(v)
        except ValueError:
            raise bad(f"{option} {k}", v, "a number") from None
        if not math.isfinite(x):
            raise bad(f"{option} {k}", v, "a finite number")
        if p.log and not x > 0:
            raise bad(f"{option} {k}", v, f"{k} > 0 (it is fitted through its logarithm)")
        u = p.to_internal(x)
        if not p.lo <= u <= p.hi:
            lo, hi = p.to_natural(p.lo), p.to_natural(p.hi)
            raise bad(f"{option} {k}", v, f"{lo:.4g} <= {k} <= {hi:.4g}")
        out[k] = x
    return out


def parse_pins(spec: str | Sequence[str] | None, law: Law) -> dict[str, float]:
    """``--pin alpha=0.076,E=1.7``: values to hold fixed, leaving at least one parameter free."""
    out = parse_values(spec, law, "--pin")
    if out and len(out) >= len(law.params):
        raise BadInput(f"bad value for --pin: {spec!r} (allowed: at least one free parameter of {law.name})")
    return out
