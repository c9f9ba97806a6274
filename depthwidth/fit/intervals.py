"""Which intervals a fit may show: the one place that withholds or flags them.

An interval from bootstrap refits is **withheld** (``null`` in fit.json, its
reason — with the interval itself — in ``ci_withheld``) when it does not
contain its own point estimate: the refits settled somewhere else than the fit
(another basin, a bound), so the interval describes those refits rather than
the estimate (seen on a 6-run sweep: alpha 0.7035 [0.709, 5]).

It is **flagged** (``ci_flagged``) when fewer than ``FLAG_CONVERGED`` of the
replicates converged: it then rests on the refits that were easy.  Measured
on hard planted designs (6-run subsets of the demo grid, 180 sweeps a
resampling; ``benchmarks/bench_calibration.py --failure-study``), such
intervals still held the truth (95.3% with ``--resample runs``, 98.9% with
``noise``, against 95.9% and 96.7% for sweeps above the threshold): wide, not
wrong, so they are shown with the flag rather than withheld.  The intervals
that excluded their estimate held it too (all 47 of them) — they ran to a
bound — which is why the reason keeps the interval.

``underdetermined`` says, before any number is shown, when the data cannot pin
the law's free parameters: fewer runs (or points) than free parameters, or a
Jacobian at the fit whose numerical rank is below the number of free
parameters (some combination of parameters moves no prediction).

Coverage measured on planted worlds (benchmarks/bench_calibration.py;
docs/guides/fit-analyses.md, "Coverage") is a property of the method on those worlds, not of a given fit:
``dw fit`` does not quote it as a warning about the data at hand.
"""

from __future__ import annotations

import math

import numpy as np

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
