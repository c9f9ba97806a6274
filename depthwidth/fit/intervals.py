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

``coverage_warnings`` names the measured coverage (``calibration.json``
beside this module, written by ``benchmarks/bench_calibration.py
--write-calibration``) of every reported number whose 95% intervals covered
the planted truth less than 90% or more than 98% of the time there.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

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


CALIBRATION = Path(__file__).with_name("calibration.json")
NOMINAL = 0.95


@functools.lru_cache(maxsize=1)
def _calibration() -> dict:
    try:
        return json.loads(CALIBRATION.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def measured(label: str, resample: str, level: float) -> dict | None:
    """The benchmark's coverage figures for fits of ``label`` with ``resample`` at 95%, or None."""
    m = ((_calibration().get("worlds") or {}).get(label) or {}).get(resample)
    return m if m and math.isclose(level, NOMINAL) else None


def coverage_warnings(label: str, keys, m: dict | None, holdout: bool = False) -> list[str]:
    """Warnings for numbers of a fit of ``label`` whose measured 95% coverage lies outside 90–98%."""
    if not m:
        return []
    out = []
    where = f"{m['sweeps']} planted {m['grid']} sweeps ({label}; benchmarks/bench_calibration.py)"
    groups: dict = {}  # generic key -> the fit's keys (D_crit at every sweep width is one number)
    for k in keys:
        groups.setdefault(_generic(k), []).append(k)
    for g, ks in groups.items():
        c = (m["numbers"].get(g) or {}).get("coverage")
        if c is None or 0.90 <= c <= 0.98:
            continue
        name = ks[0] if len(ks) == 1 else f"D_crit at the sweep's widths ({ks[0]} … {ks[-1]})"
        out.append(
            f"{name}: its 95% interval held the planted value in {100 * c:.0f}% of {where}: "
            + ("wider than it needs to be" if c > 0.98 else "read it as narrower than the truth")
        )
    h = (m.get("holdout") or {}).get("coverage")
    if holdout and h is not None and not 0.90 <= h <= 0.98:
        out.append(f"hold-out: 95% prediction intervals held {100 * h:.0f}% of held-out losses in {where}")
    return out


def _generic(key: str) -> str:
    """``dcrit[W=512]`` -> ``dcrit[W]`` (the widths of a fit are its own; the benchmark keeps the
    lowest coverage over its grid's widths under that key)."""
    return "dcrit[W]" if key.startswith("dcrit[W=") else key
