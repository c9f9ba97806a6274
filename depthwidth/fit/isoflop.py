"""Approach 2, isoFLOP profiles: ``dw fit NAME --approach isoflop``.

At each compute budget C the runs trade model size against tokens (axis
``params``) or, at fixed parameters and tokens, depth against width (axis
``depth``).  Per budget, ln loss is fitted as a parabola in u = ln x (Hoffmann
et al. 2022, approach 2) plus a cubic "skew" term when the budget has >=
``SKEW_MIN`` distinct x; x* is the curve's local minimum.  Profiles are not
parabolas in ln x: a parabola's vertex is off by 6% in D* on the width-depth
law at ±1.2 in ln D, more than its interval is wide, and on a fixed depth grid
the offset changes with the budget, so it does not cancel in the exponents.

Intervals: a parametric bootstrap on noise pooled over the budgets: s² of ln
loss from every budget with more runs than coefficients (ν dof in all); each
replicate draws σ* = s·sqrt(ν/χ²_ν) (t-like) and new ln losses at every
budget's curve, and refits.  A budget with no more runs than coefficients (3)
gets no interval.  A warning says when the budgets' scatter differs more than
pooled noise allows.  A replicate minimum beyond the sampled range, or a curve
without one (lowest at an edge), counts as ±∞ on that side: the interval opens
(``x_opt_ci: [lo, null]``, ``x_opt_ci_open: "above"``).

Power laws ln x* = k + a·ln C (N*; or D* and W*, ln W interpolated in ln D
along the runs): replicate r of every budget gives one slope; the interval
rests on the replicates with every optimum inside its range (a warning when
that leaves out over (1 - level)/2 of them; unbounded below ``MIN_SHARE``).
Measured: ±∞ slopes open most of them (98-99.5% on hard designs); these hold
92-97% (``benchmarks/calibration_isoflop.py``, also ``resample="runs"``, runs
resampled within budgets, and ``skew=False``; docs/guides/fit-analyses.md, "IsoFLOP profiles").

Beside them, the approach-3 law's optima along each budget's own curve (its
runs' other columns interpolated in ln x, ``GRID`` points; a minimum on the
edge counts as beyond it), for its fit and every bootstrap replicate, as power
laws the same way: the approaches *agree* when their intervals overlap.

Budgets: each run's last point gives its compute.  A ``budget`` column groups
runs exactly (C = its value); else each run is within a factor 1 + ``tol`` of
its budget's centre C, the geometric mean of the budget's compute.
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.core.tables import ci_text
from depthwidth.fit.boot import RESAMPLE
from depthwidth.fit.derived import EXPONENT  # the compute-optimal table's letters (not its values)
from depthwidth.fit.holdout import run_compute

AXES = ("auto", "params", "depth")
GRID = 401  # points of the law's own profile along each budget's curve
SKEW_MIN = 5  # distinct x values a budget needs for the cubic (skew) term
MIN_SHARE = 0.25  # bounded replicates below which an exponent's interval is unbounded
# Measured by benchmarks/calibration_isoflop.py (200 planted sweeps a case, 95% nominal), quoted by the warnings:
COVERAGE = {
    "plain": "81-85.5%",  # x* of 4-run budgets (plain parabola) on the width-depth profile, ±1.2 in ln D
    "partial": "92-97%",
}  # exponents whose interval rests on part of the replicates (6 cases)
INF = math.inf


def budgets(table, tol: float = 0.25) -> list[dict]:
    """[{C, rows, by}] with rows the index of each run's last point, runs grouped into budgets."""
    compute, by = run_compute(table)
    if compute is None or not by.startswith("FLOPs"):
        raise bad("--approach isoflop", "this table", "a table with flops, or params and tokens (C = 6·N·T)")
    runs = np.asarray(table["run"]).astype(str)
    last: dict[str, int] = {}
    for i, r in enumerate(runs):
        if r not in last or compute[i] > compute[last[r]]:
            last[r] = i
    idx = np.array(sorted(last.values(), key=lambda i: compute[i]))
    if "budget" in table:
        try:
            declared = np.asarray(table["budget"], dtype=float)[idx]
        except (TypeError, ValueError):
            declared = np.array([np.nan])
        if np.isfinite(declared).all() and (declared > 0).all():
            return [{"C": float(v), "rows": idx[declared == v], "by": "budget"} for v in np.unique(declared)]
    lc, wide, groups, start = np.log(compute[idx]), math.log1p(tol), [], 0
    for i in range(1, len(idx) + 1):
        if i < len(idx):
            m = lc[start : i + 1].mean()  # sorted: the first and the newest member are the extremes
            if lc[i] - m <= wide and m - lc[start] <= wide:
                continue
        groups.append(np.arange(start, i))
        start = i
    return [{"C": float(np.exp(lc[g].mean())), "rows": idx[g], "by": "compute"} for g in groups]


def choose_axis(table, groups, axis: str) -> str:
    if axis not in AXES:
        raise bad("--isoflop-axis", axis, " | ".join(AXES))
    if axis != "auto":
        return axis
    if "depth" in table and "params" in table:
        # A shape sweep holds N (nearly) fixed and varies depth; a size sweep varies N.
        # Rounding widths to the quantum, and counting embeddings the sweep did not
        # hold fixed, move N by some percent: depth wins when it varies 3x more, in ln.
        lnN = np.log(np.asarray(table["params"], dtype=float))
        lnD = np.log(np.asarray(table["depth"], dtype=float))
        multi = [g["rows"] for g in groups if len(set(lnD[g["rows"]])) >= 3]
        if multi and all(np.ptp(lnD[r]) > 3 * np.ptp(lnN[r]) for r in multi):
            return "depth"
    return "params"


def minimum(coef: np.ndarray) -> np.ndarray:
    """Local minima of polynomials (rows of coef, highest power first, degree 2 or 3); NaN where none."""
    coef = np.atleast_2d(coef)
    d = coef[:, 0] if coef.shape[1] == 4 else np.zeros(len(coef))
    a, b = coef[:, -3], coef[:, -2]  # y' = 3d·u² + 2a·u + b; the root where y'' > 0, in a stable form
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        disc = a * a - 3 * b * d
        u = -b / (a + np.sqrt(np.where(disc > 0, disc, np.nan)))
    return np.where(np.isfinite(u), u, np.nan)


def sides(v: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) value of each replicate minimum: ±inf beyond [lo, hi], (-inf, +inf) for NaN (no fit)."""
    none = np.isnan(v)
    return (
        np.where(none | (v < lo), -INF, np.where(v > hi, INF, v)),
        np.where(none | (v > hi), INF, np.where(v < lo, -INF, v)),
    )


def interval(lo: np.ndarray, hi: np.ndarray, level: float, edges=(-INF, INF)) -> tuple[list | None, str | None]:
    """Percentile interval from replicate (lower, upper) values: an infinite side is None (open); an
    interval wholly past one edge of the range starts at that edge."""
    if len(lo) < 2:
        return None, None
    q = [50 * (1 - level), 50 * (1 + level)]
    with np.errstate(invalid="ignore"):
        a, b = float(np.percentile(lo, q[0], method="lower")), float(np.percentile(hi, q[1], method="higher"))
    a, b = edges[1] if a == INF else a, edges[0] if b == -INF else b
    ci = [a if math.isfinite(a) else None, b if math.isfinite(b) else None]
    opened = {(True, False): "below", (False, True): "above", (True, True): "both"}.get((ci[0] is None, ci[1] is None))
    return ci, opened


def _replicates(u, y, X, coef, deg, sig, rng, resample) -> tuple[np.ndarray, np.ndarray]:
    """(minima in u, no-minimum mask) of one budget's replicates: new noise at the fitted curve, or
    its runs resampled.  A curve without a minimum is lowest at one edge of the range: its minimum
    lies beyond that edge (±inf); NaN where no curve fits (fewer distinct x than coefficients)."""
    B, n = len(sig), len(u)
    if resample == "noise":
        ok, cb = (
            np.ones(B, dtype=bool),
            ((X @ coef)[None, :] + sig[:, None] * rng.standard_normal((B, n))) @ np.linalg.pinv(X).T,
        )
    else:
        pick = rng.integers(0, n, (B, n))
        ok = np.array([len(set(np.round(u[p], 9))) > deg for p in pick])
        Xb = X[pick]
        G = np.einsum("rni,rnj->rij", Xb, Xb)
        G[~ok] = np.eye(deg + 1)
        cb = np.linalg.solve(G, np.einsum("rni,rn->ri", Xb, y[pick])[..., None])[..., 0]
    v = u.mean() + minimum(cb)
    none = ok & np.isnan(v)
    top = np.polyval(cb.T, u.max() - u.mean()) < np.polyval(cb.T, u.min() - u.mean())
    return np.where(none, np.where(top, INF, -INF), np.where(ok, v, np.nan)), none


def _spread(rss, dof, rng) -> str | None:
    """A warning when the budgets' residual variances differ more than pooled noise allows (p < 1%)."""
    keep = np.asarray(dof) >= 2
    dof, s2 = np.asarray(dof)[keep], np.asarray(rss)[keep] / np.asarray(dof)[keep]
    sim = rng.chisquare(dof, size=(4000, len(dof))) / dof if len(dof) >= 2 else None
    p = float(np.mean(sim.max(1) / sim.min(1) >= s2.max() / max(s2.min(), 1e-300))) if sim is not None else 1.0
    if p >= 0.01:
        return None
    return (
        f"the budgets' residual scatter differs more than pooled noise allows (σ of ln loss "
        f"{math.sqrt(s2.min()):.2g}–{math.sqrt(s2.max()):.2g}, p = {p:.3f}): pooled, the noisier budgets' intervals "
        "are too narrow"
    )


def _power_law(lnC, lnx, lo, hi, level: float) -> dict:
    """ln x = k + a ln C: a with an interval from the replicates bounded at every budget ((R, budgets) arrays)."""
    a, k = np.polyfit(lnC, lnx, 1)
    ok = (np.isfinite(lo) & np.isfinite(hi)).all(axis=1)  # bounded: lo == hi
    out = {
        "exponent": float(a),
        "prefactor": float(math.exp(k)),
        "budgets": int(len(lnC)),
        "replicates": int(len(lo)),
        "bounded_replicates": int(ok.sum()),
        "ci": None,
        "ci_open": None,
    }
    if len(lo):
        share = float(ok.mean())
        if share >= MIN_SHARE:
            slopes = lo[ok] @ ((lnC - lnC.mean()) / ((lnC - lnC.mean()) ** 2).sum())  # least squares: Σ w·ln x*
            out["ci"] = interval(slopes, slopes, level)[0]
        else:
            out.update(
                ci=[None, None],
                ci_open="both",
                ci_because=f"only {share:.0%} of replicates have every "
                f"optimum inside its sampled range (at least {MIN_SHARE:.0%} needed)",
            )
    return out


def _carry(lo, hi, u, lw):
    """The replicates' (lower, upper) ln W* from their ln D*: ln W interpolated along the budget's runs."""
    o = np.argsort(u)
    u, lw = u[o], lw[o]
    a, b = [
        np.where(np.isfinite(v), np.interp(np.where(np.isfinite(v), v, 0.0), u, lw), np.sign(lw[-1] - lw[0]) * v)
        for v in (lo, hi)
    ]  # a D* off the range takes W* off the range on the side W moves to
    return np.minimum(a, b), np.maximum(a, b)


def _budget(row, u, y, deg, axis):
    """Fit one budget's curve (in u - mean u); fills row's minimum; returns (X, coef, rss)."""
    X = np.vander(u - u.mean(), deg + 1)
    coef = np.linalg.lstsq(X, y, rcond=None)[0]
    u0 = float(u.mean() + minimum(coef)[0])
    row.update(degree=deg, fit_ln_loss=[float(c) for c in coef], fit_centre=float(u.mean()))
    row["x_opt"] = float(math.exp(u0)) if math.isfinite(u0) else None
    row["loss_opt"] = float(math.exp(np.polyval(coef, u0 - u.mean()))) if math.isfinite(u0) else None
    if not math.isfinite(u0):
        row.update(identified=False, because="the fitted curve has no minimum (it opens downwards)")
    elif not u.min() <= u0 <= u.max():
        row.update(identified=False, because=f"the minimum {math.exp(u0):.4g} lies outside the sampled {axis} range")
    else:
        row["identified"] = True
    return X, coef, float(((y - X @ coef) ** 2).sum())


def isoflop(
    table,
    *,
    axis: str = "auto",
    B: int = 1000,
    level: float = default("level"),
    seed: int = 0,
    tol: float = 0.25,
    law=None,
    theta=None,
    resample: str = "noise",
    skew: bool = True,
) -> dict:
    """Per-budget minima, the optima's power laws in C and, with ``law`` and ``theta``
    (internal parameter vectors: the fit's first, then its bootstrap replicates), the
    same optima of the approach-3 law and the comparison.  ``resample``/``skew``: the
    alternatives the calibration compares (runs within budgets; plain parabolas)."""
    if resample not in RESAMPLE:
        raise bad("isoflop resample", resample, " | ".join(RESAMPLE))
    groups = budgets(table, tol)
    axis = choose_axis(table, groups, axis)
    x_all, L = np.asarray(table[axis], dtype=float), np.asarray(table["loss"], dtype=float)
    W = np.log(np.asarray(table["width"], dtype=float)) if axis == "depth" and "width" in table else None
    rng, rows, fits, warnings = np.random.default_rng(seed), [], {}, []
    for j, g in enumerate(groups):
        r = g["rows"]
        u, y = np.log(x_all[r]), np.log(L[r])
        distinct = len(set(np.round(u, 9)))
        row = {
            "C": g["C"],
            "runs": int(len(r)),
            "x_range": [float(x_all[r].min()), float(x_all[r].max())],
            "x_opt_ci": None,
            "x_opt_ci_open": None,
        }
        if "params" in table:
            row["params"] = float(np.exp(np.mean(np.log(np.asarray(table["params"], dtype=float)[r]))))
        rows.append(row)
        if distinct < 3:
            row.update(identified=False, because=f"{distinct} distinct {axis} values (a parabola needs 3)")
            continue
        row["points"] = [[float(a), float(b)] for a, b in sorted(zip(x_all[r], L[r]))]  # for the figure
        deg = 3 if skew and distinct >= SKEW_MIN else 2
        X, coef, rss = _budget(row, u, y, deg, axis)
        fits[j] = (u, y, X, coef, deg, rss, len(u) - deg - 1)
        if W is not None and row["x_opt"]:
            o = np.argsort(u)
            row["width_opt"] = float(math.exp(np.interp(math.log(row["x_opt"]), u[o], W[r][o])))
    pooled = [f for f in fits.values() if f[6] > 0]
    nu = int(sum(f[6] for f in pooled))
    s = math.sqrt(sum(f[5] for f in pooled) / nu) if nu else None
    out = {
        "axis": axis,
        "budgets": rows,
        "level": level,
        "replicates": B,
        "tol": tol,
        "grouped_by": groups[0]["by"],
        "resample": resample,
        "noise": {"sigma_ln_loss": s, "dof": nu, "budgets": len(pooled)},
    }
    bounds: dict[int, tuple] = {}  # budget -> replicates' (lower, upper) ln x*
    sig = s * np.sqrt(nu / rng.chisquare(nu, B)) if nu and B > 0 else np.empty(0)  # σ* with ν dof, shared by budgets
    for j, (u, y, X, coef, deg, _, df_j) in fits.items():
        row = rows[j]
        if B <= 0 or df_j <= 0:
            row["ci_because"] = (
                "--bootstrap 0: no replicates, no interval"
                if B <= 0
                else f"{row['runs']} runs: the parabola through them fits them exactly, "
                "so they cannot measure their own noise: no interval"
            )
            continue
        v, none = _replicates(u, y, X, coef, deg, sig, rng, resample)
        bounds[j] = sides(v, u.min(), u.max())
        ci, row["x_opt_ci_open"] = interval(*bounds[j], level, (u.min(), u.max()))
        row["x_opt_ci"] = [None if c is None else math.exp(c) for c in ci] if ci else None
        off = {
            "below": int((v < u.min()).sum()),
            "above": int((v > u.max()).sum()),
            "no_minimum": int(none.sum()),
            "no_fit": int(np.isnan(v).sum()),
        }
        row.update(replicates_off_range=off, failed_replicates=off["below"] + off["above"] + off["no_fit"])
    warnings += [w for w in [_spread([f[5] for f in pooled], [f[6] for f in pooled], rng)] if w]
    plain = [f"{rows[j]['C']:.3g}" for j, f in fits.items() if skew and f[4] == 2 and j in bounds]
    if plain:
        warnings.append(
            f"budget(s) {', '.join(plain)}: fewer than {SKEW_MIN} runs, so a plain parabola (no skew term); "
            f"on a planted asymmetric profile such intervals held the optimum {COVERAGE['plain']} of the "
            "time at 95% (benchmarks/calibration_isoflop.py): add runs"
        )
    good = [i for i, r in enumerate(rows) if r.get("identified")]
    laws = _laws(rows, fits, bounds, good, W, groups, axis, level, B) if len(good) >= 2 else {}
    for sym, p in laws.items():
        if (
            p["replicates"]
            and p["ci_open"] is None
            and p["bounded_replicates"] < (1 - (1 - level) / 2) * p["replicates"]
        ):
            warnings.append(
                f"{sym}* ∝ C^{EXPONENT[sym]}: its interval rests on the "
                f"{p['bounded_replicates'] / p['replicates']:.0%} of replicates with every budget's optimum "
                "inside its sampled range; such intervals held the "
                f"planted exponent {COVERAGE['partial']} of the time at 95% (benchmarks/calibration_isoflop.py)"
            )
    out["power_laws"] = laws
    if len(good) < 3:
        out["note"] = (
            f"{len(good)} budget(s) with an identified minimum: the exponents need at least 2 (3 to be trusted)"
        )
    law_laws = {}
    if law is not None and theta is not None and len(good) >= 2:
        law_laws = law_optima(
            table, law, np.atleast_2d(theta), [groups[i] for i in good], [rows[i] for i in good], axis, level
        )
    out.update(law_power_laws=law_laws, comparison=compare_approaches(laws, law_laws), warnings=warnings)
    return out


def _laws(rows, fits, bounds, good, W, groups, axis, level, B) -> dict:
    """The identified optima's power laws in C (N, or D and W), intervals from every budget's replicates."""
    lnC = np.log([rows[i]["C"] for i in good])
    missing = [f"{rows[i]['C']:.3g}" for i in good if i not in bounds]
    empty = np.empty((0, len(good)))
    stack = lambda k, arrs: np.stack([a[k] for a in arrs], axis=1) if not missing else empty  # noqa: E731
    reps = [bounds.get(i) for i in good]
    laws = {
        "N" if axis == "params" else "D": _power_law(
            lnC, np.log([rows[i]["x_opt"] for i in good]), stack(0, reps), stack(1, reps), level
        )
    }
    if W is not None:
        wr = [] if missing else [_carry(*bounds[i], fits[i][0], W[groups[i]["rows"]]) for i in good]
        laws["W"] = _power_law(lnC, np.log([rows[i]["width_opt"] for i in good]), stack(0, wr), stack(1, wr), level)
    if missing:
        why = "--bootstrap 0" if B <= 0 else f"no interval at budget(s) {', '.join(missing)} (too few runs)"
        for p in laws.values():
            p["ci_because"] = why
    return laws


def law_optima(table, law, theta: np.ndarray, groups: list[dict], rows: list[dict], axis: str, level: float) -> dict:
    """The approach-3 law's own optima along each budget's curve, as power laws in C."""
    lnC = np.log([g["C"] for g in groups])
    x_all = np.log(np.asarray(table[axis], dtype=float))
    lo = np.full((len(theta), len(groups)), np.nan)
    hi, wlo, whi = lo.copy(), lo.copy(), lo.copy()
    for j, g in enumerate(groups):
        r = g["rows"]
        order = np.argsort(x_all[r])
        u = x_all[r][order]
        grid = np.linspace(u[0], u[-1], GRID)
        curve = {"loss": np.ones(GRID)}
        for c in set(law.columns) | ({"width"} if "width" in table else set()):
            curve[c] = grid if c == axis else np.interp(grid, u, np.log(np.asarray(table[c], dtype=float)[r][order]))
            curve[c] = np.exp(curve[c])
        pred = law.evaluate(theta, law.data(curve))  # (R, GRID) log loss
        k = np.argmin(np.where(np.isfinite(pred), pred, np.inf), axis=1)
        v = np.where(np.isfinite(pred).any(axis=1), grid[k], np.nan)
        v = np.where(k == 0, -INF, np.where(k == GRID - 1, INF, v))  # a minimum on the edge lies beyond it
        lo[:, j], hi[:, j] = sides(v, grid[0], grid[-1])
        rows[j]["law_x_opt"] = float(math.exp(v[0])) if math.isfinite(v[0]) else None
        if "width" in curve:
            wlo[:, j], whi[:, j] = _carry(lo[:, j], hi[:, j], grid, np.log(curve["width"]))
    out = {}
    sym = "N" if axis == "params" else "D"
    if np.isfinite(lo[0]).all() and np.isfinite(hi[0]).all():
        out[sym] = _power_law(lnC, lo[0], lo[1:], hi[1:], level)
        if axis == "depth" and "width" in table:
            out["W"] = _power_law(lnC, wlo[0], wlo[1:], whi[1:], level)
    return out


def compare_approaches(laws: dict, law_laws: dict) -> list[dict]:
    """Approach 2 vs approach 3 exponents: agree when their intervals overlap (an open side reaches ±∞)."""
    out = []
    for sym in laws:
        (a2, c2), (a3, c3) = (
            (laws[sym]["exponent"], laws[sym]["ci"]),
            (law_laws.get(sym, {}).get(k) for k in ("exponent", "ci")),
        )
        row = {"quantity": f"{sym}* ∝ C^{EXPONENT[sym]}", "isoflop": a2, "isoflop_ci": c2, "law": a3, "law_ci": c3}
        if a3 is None or not c2 or not c3:
            row["agree"] = None
            row["because"] = (
                "an interval is missing (" + laws[sym].get("ci_because", "no bootstrap replicates") + ")"
                if a3 is not None
                else "the law has no minimum inside the sampled range at every budget"
            )
        else:
            (l2, h2), (l3, h3) = [(-INF if c[0] is None else c[0], INF if c[1] is None else c[1]) for c in (c2, c3)]
            row["agree"] = bool(l2 <= h3 and l3 <= h2)
            row["because"] = "the intervals overlap" if row["agree"] else "the intervals do not overlap"
            if row["agree"] and (None in c2 or None in c3):
                row["because"] += " (an open interval: the agreement is weak)"
        out.append(row)
    return out


def summary_lines(iso: dict) -> list[str]:
    lines = []
    for sym, p in iso["power_laws"].items():
        ci = ci_text(p["ci"], "{:.3g}")
        lines.append(
            f"isoFLOP: {sym}* ∝ C^{p['exponent']:.3g}"
            + ("" if ci == "—" else f" {ci}")
            + f" over {p['budgets']} budgets"
            + (f" ({p['ci_because']})" if p.get("ci_because") else "")
        )
    for c in iso["comparison"]:
        law = "—" if c["law"] is None else f"{c['law']:.3g}"
        verdict = {True: "agree", False: "DISAGREE", None: "cannot compare"}[c["agree"]]
        lines.append(
            f"{c['quantity']}: isoFLOP {c['isoflop']:.3g} vs the law's {law} along the same budgets: {verdict} "
            f"({c['because']})"
        )
    nz = iso.get("noise") or {}
    if nz.get("sigma_ln_loss") is not None:
        lines.append(
            f"isoFLOP intervals: noise σ = {nz['sigma_ln_loss']:.3g} in ln loss pooled over {nz['budgets']} "
            f"budget(s), {nz['dof']} residual degrees of freedom ({iso.get('resample', 'noise')} bootstrap)"
        )
    lines += iso.get("warnings") or []
    if iso.get("note"):
        lines.append(iso["note"])
    return lines
