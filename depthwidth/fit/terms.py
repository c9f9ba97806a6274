"""The pieces laws are built from (laws.py): fitted parameters with bounds and
start grids, and the term kinds (constant, power law, depth penalty) that know
their log value and its derivatives, so the engine gets analytic Jacobians."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from depthwidth.core.errors import bad


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
        ratio = X["depth"] / self.dcrit(th, X)
        _, dlogh = self._hinge(ratio - 1.0, smooth)
        dx = -dlogh * ratio  # d log h / d log D_crit
        g = {"gamma": None, "mu": X["neglog_width"]}
        if self.form == "log":
            g["kappa"] = dx
        else:
            g["c"] = dx
            g["p"] = dx * X["log_width"]
        return g
