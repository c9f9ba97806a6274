"""Approach 2, isoFLOP profiles: ``dw fit NAME --approach isoflop``.

At each compute budget C the runs trade one thing against another at fixed
C: model size against tokens (axis ``params``), or, at fixed parameters and
tokens, depth against width (axis ``depth``).  Per budget, loss is fitted as
a parabola in u = ln x (Hoffmann et al. 2022, approach 2); its vertex
x* = exp(-b / 2a) is the budget's optimum.  Its interval comes from a
residual bootstrap (the design, i.e. the x values, stays fixed; residuals
are inflated by sqrt(n / (n - 3)) for the three fitted coefficients).  A
vertex outside the sampled range, or a parabola that opens downwards, is
"not identified" and left out of the power laws.

The optima are then fitted as power laws in C, ln x* = k + a·ln C, with
intervals from the same bootstrap replicates (replicate r of every budget
together): N* ∝ C^a for axis ``params``; D* ∝ C^a_D and W* ∝ C^a_W for axis
``depth``, where W* is read off the budget's own runs (ln W interpolated in
ln D along the fixed-parameter curve).

Beside them, the same quantities from the approach-3 law fitted to the same
runs: along each budget's own curve (its runs' other columns interpolated in
ln x, ``GRID`` points over the sampled range) the law's loss is minimised,
for its point estimate and for every bootstrap replicate, and the law's
optima are fitted as power laws in C the same way.  Approaches 2 and 3
*agree* on an exponent when their intervals overlap.

Budgets: each run's last point (its largest token budget) gives its compute;
runs whose compute lies within ``tol`` (relative) of the previous one share a
budget, C being their geometric mean.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.fit.holdout import run_compute

AXES = ("auto", "params", "depth")
GRID = 401  # points of the law's own profile along each budget's curve


def budgets(table, tol: float = 0.25) -> list[dict]:
    """[{C, rows}] with rows the index of each run's last point, runs grouped by compute."""
    compute, by = run_compute(table)
    if compute is None or not by.startswith("FLOPs"):
        raise bad("--approach isoflop", "this table", "a table with flops, or params and tokens (C = 6·N·T)")
    runs = np.asarray(table["run"]).astype(str)
    last: dict[str, int] = {}
    for i, r in enumerate(runs):
        if r not in last or compute[i] > compute[last[r]]:
            last[r] = i
    idx = np.array(sorted(last.values(), key=lambda i: compute[i]))
    groups, cur = [], [idx[0]]
    for i in idx[1:]:
        if compute[i] <= compute[cur[-1]] * (1 + tol):
            cur.append(i)
        else:
            groups.append(cur)
            cur = [i]
    groups.append(cur)
    return [{"C": float(np.exp(np.mean(np.log(compute[g])))), "rows": np.array(g)} for g in groups]


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


def vertex(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Vertices -b/(2a) of least-squares parabolas y ≈ a·u² + b·u + c, one per row of y (R, n); NaN where a <= 0."""
    V = np.vstack([u * u, u, np.ones_like(u)]).T
    coef = np.linalg.lstsq(V, np.atleast_2d(y).T, rcond=None)[0]  # (3, R)
    a, b = coef[0], coef[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, -b / (2 * a), np.nan)


def _percentile(s, level):
    s = np.asarray(s, dtype=float)
    s = s[np.isfinite(s)]
    if len(s) < 2:
        return None
    return [float(x) for x in np.percentile(s, [50 * (1 - level), 50 * (1 + level)])]


def _power_law(lnC: np.ndarray, lnx: np.ndarray, lnx_boot: np.ndarray, level: float) -> dict:
    """ln x = k + a ln C: a with a bootstrap interval (replicates with every budget finite)."""
    a, k = np.polyfit(lnC, lnx, 1)
    ok = np.isfinite(lnx_boot).all(axis=1)
    slopes = [np.polyfit(lnC, row, 1)[0] for row in lnx_boot[ok]]
    return {"exponent": float(a), "ci": _percentile(slopes, level), "prefactor": float(math.exp(k)),
            "budgets": int(len(lnC)), "replicates": int(ok.sum())}


def isoflop(table, *, axis: str = "auto", B: int = 1000, level: float = 0.95, seed: int = 0,
            tol: float = 0.25, law=None, theta=None) -> dict:
    """Per-budget minima, the optima's power laws in C and, with ``law`` and ``theta``
    (internal parameter vectors: the fit's first, then its bootstrap replicates), the
    same optima of the approach-3 law and the comparison."""
    groups = budgets(table, tol)
    axis = choose_axis(table, groups, axis)
    x_all = np.asarray(table[axis], dtype=float)
    L = np.asarray(table["loss"], dtype=float)
    rng = np.random.default_rng(seed)
    rows, boot_u, boot_w = [], {}, {}  # replicate vertices by budget index
    for g in groups:
        r = g["rows"]
        u, y = np.log(x_all[r]), L[r]
        row = {"C": g["C"], "runs": int(len(r)), "x_range": [float(x_all[r].min()), float(x_all[r].max())]}
        if "params" in table:
            row["params"] = float(np.exp(np.mean(np.log(np.asarray(table["params"], dtype=float)[r]))))
        if len(set(np.round(u, 9))) < 3:
            row.update(identified=False, because=f"{len(set(np.round(u, 9)))} distinct {axis} values (a parabola needs 3)")
            rows.append(row)
            continue
        u0 = float(vertex(u, y)[0])
        coef = np.polyfit(u, y, 2)
        row["points"] = [[float(a), float(b)] for a, b in sorted(zip(x_all[r], y))]  # for the figure
        row["parabola_ln_x"] = [float(c) for c in coef]  # loss ≈ c0·u² + c1·u + c2, u = ln x
        fit = np.polyval(coef, u)
        res = (y - fit) * math.sqrt(len(u) / max(len(u) - 3, 1))
        yb = fit[None, :] + rng.choice(res, size=(B, len(u)), replace=True) if B > 0 else np.empty((0, len(u)))
        ub = vertex(u, yb) if B > 0 else np.empty(0)
        ub = np.where((ub >= u.min()) & (ub <= u.max()), ub, np.nan)  # a vertex off the range is no minimum
        row["x_opt"] = float(math.exp(u0)) if math.isfinite(u0) else None
        ci = _percentile(ub, level)
        row["x_opt_ci"] = [math.exp(ci[0]), math.exp(ci[1])] if ci else None
        row["loss_opt"] = float(np.polyval(coef, u0)) if math.isfinite(u0) else None
        row["failed_replicates"] = int((~np.isfinite(ub)).sum())
        if not math.isfinite(u0):
            row.update(identified=False, because="the parabola opens downwards: no minimum")
        elif not u.min() <= u0 <= u.max():
            row.update(identified=False, because=f"the minimum {math.exp(u0):.4g} lies outside the sampled {axis} range")
        else:
            row["identified"] = True
        if axis == "depth" and "width" in table:
            order = np.argsort(u)
            lw = np.log(np.asarray(table["width"], dtype=float)[r])[order]
            interp = lambda v: np.interp(v, u[order], lw) if np.isfinite(v) else np.nan  # noqa: E731
            row["width_opt"] = float(math.exp(interp(u0))) if math.isfinite(u0) else None
            boot_w[len(rows)] = np.array([interp(v) for v in ub])
        boot_u[len(rows)] = ub
        rows.append(row)
    out = {"axis": axis, "budgets": rows, "level": level, "replicates": B, "tol": tol}
    good = [i for i, r in enumerate(rows) if r.get("identified")]
    laws = {}
    if len(good) >= 2 and B > 0:
        lnC = np.log([rows[i]["C"] for i in good])
        bu = np.stack([boot_u[i] for i in good], axis=1)
        sym = "N" if axis == "params" else "D"
        laws[sym] = _power_law(lnC, np.log([rows[i]["x_opt"] for i in good]), bu, level)
        if axis == "depth" and "width" in table:
            bw = np.stack([boot_w[i] for i in good], axis=1)
            laws["W"] = _power_law(lnC, np.log([rows[i]["width_opt"] for i in good]), bw, level)
    out["power_laws"] = laws
    if len(good) < 3:
        out["note"] = f"{len(good)} budget(s) with an identified minimum: the exponents need at least 2 (3 to be trusted)"
    law_laws = {}
    if law is not None and theta is not None and len(good) >= 2:
        law_laws = law_optima(table, law, np.atleast_2d(theta), [groups[i] for i in good],
                              [rows[i] for i in good], axis, level)
    out["law_power_laws"] = law_laws
    out["comparison"] = compare_approaches(laws, law_laws)
    return out


def law_optima(table, law, theta: np.ndarray, groups: list[dict], rows: list[dict], axis: str, level: float) -> dict:
    """The approach-3 law's own optima along each budget's curve, as power laws in C."""
    lnC = np.log([g["C"] for g in groups])
    x_all = np.log(np.asarray(table[axis], dtype=float))
    lnx = np.full((len(theta), len(groups)), np.nan)
    lnw = np.full_like(lnx, np.nan)
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
        inside = (k > 0) & (k < GRID - 1)  # a minimum on the edge of the range is no minimum
        lnx[inside, j] = grid[k[inside]]
        if "width" in curve:
            lnw[inside, j] = np.log(curve["width"][k[inside]])
        rows[j]["law_x_opt"] = float(math.exp(grid[k[0]])) if inside[0] else None
    out = {}
    sym = "N" if axis == "params" else "D"
    if np.isfinite(lnx[0]).all():
        out[sym] = _power_law(lnC, lnx[0], lnx[1:], level)
        if axis == "depth" and np.isfinite(lnw[0]).all():
            out["W"] = _power_law(lnC, lnw[0], lnw[1:], level)
    return out


def compare_approaches(laws: dict, law_laws: dict) -> list[dict]:
    """Approach 2 vs approach 3 exponents: agree when their intervals overlap."""
    out = []
    for sym in laws:
        a2, c2 = laws[sym]["exponent"], laws[sym]["ci"]
        a3 = law_laws.get(sym, {}).get("exponent")
        c3 = law_laws.get(sym, {}).get("ci")
        row = {"quantity": f"{sym}* ∝ C^a", "isoflop": a2, "isoflop_ci": c2, "law": a3, "law_ci": c3}
        if a3 is None or not c2 or not c3:
            row["agree"] = None
            row["because"] = ("an interval is missing (no bootstrap replicates)" if a3 is not None
                              else "the law has no minimum inside the sampled range at every budget")
        else:
            row["agree"] = bool(c2[0] <= c3[1] and c3[0] <= c2[1])
            row["because"] = "the intervals overlap" if row["agree"] else "the intervals do not overlap"
        out.append(row)
    return out


def summary_lines(iso: dict) -> list[str]:
    lines = []
    for sym, p in iso["power_laws"].items():
        ci = p["ci"]
        lines.append(f"isoFLOP: {sym}* ∝ C^{p['exponent']:.3g}" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")
                     + f" over {p['budgets']} budgets")
    for c in iso["comparison"]:
        law = "—" if c["law"] is None else f"{c['law']:.3g}"
        verdict = {True: "agree", False: "DISAGREE", None: "cannot compare"}[c["agree"]]
        lines.append(f"{c['quantity']}: isoFLOP {c['isoflop']:.3g} vs the law's {law}: {verdict} ({c['because']})")
    if iso.get("note"):
        lines.append(iso["note"])
    return lines
