"""Plain-language checks on a fit the data may barely constrain.

``quality_warnings`` lists what a reader must know before trusting a fit:
too few points for the free parameters (fewer runs than free parameters:
fit/intervals.py, said before the numbers), parameters sitting on a bound,
starts that did not converge, and for the depth-delusion law the evidence
on its penalty (``penalty_support``: BIC against the same law with the
penalty switched off) with what it says (verdicts.py: ``dcrit_warnings``).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.laws import has_hinge
from depthwidth.fit.solver import FitResult, Problem, batched_lm, best_starts
from depthwidth.fit.verdicts import dcrit_warnings, penalty_supported


def quality_warnings(fr: FitResult, table) -> list[str]:
    """Plain-language warnings about a fit the data barely constrain."""
    law, out = fr.law, []
    k = len(law.params) - len(fr.pins)
    if fr.n < 3 * k:
        out.append(f"only {fr.n} points for {k} free parameters: the fit is barely constrained")
    for name in fr.on_bound:
        p = law.param(name)
        out.append(
            f"{name} sits on a bound of its range ({_fmt(p.to_natural(p.lo))} .. {_fmt(p.to_natural(p.hi))}): the "
            "data do not pin it down"
        )
    if fr.starts["converged"] < 0.5 * fr.starts["total"]:
        out.append(f"only {fr.starts['converged']} of {fr.starts['total']} starts converged")
    if has_hinge(law):
        vals = fr.params
        dc = law.dcrit(vals, np.asarray(table["width"], dtype=float))
        past = int((np.asarray(table["depth"], dtype=float) > dc).sum())
        sup = penalty_support(fr, table)
        if sup is not None:
            fr.checks["penalty_support"] = sup
        out += dcrit_warnings(past, sup)
    if not fr.r2 > 0:
        out.append(f"R² = {fr.r2:.3g}: the law explains less than a constant would")
    return out


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


def _fmt(x: float) -> str:
    return f"{x:.4g}"
