"""``--approach isoflop``: approach 2 beside the law — a parabola in ln x through each compute
budget's runs, its minimum x* with an interval, and x*'s power law in C compared with the law's
(the statistics: fit/isoflop.py); its figure ``isoflop.png`` (``figures``, drawn by report/figs.py)."""

from __future__ import annotations

import math

from depthwidth.core.tables import Col, Table, ci_text
from depthwidth.fit.analyses import said

SECTION = "isoflop"
OPTIONS = ("approach", "isoflop_axis")


def section(ctx) -> dict:
    import numpy as np

    from depthwidth.fit.isoflop import isoflop

    o = ctx.opts
    return isoflop(
        ctx.clean,
        axis=o.isoflop_axis,
        B=o.bootstrap,
        level=o.level,
        seed=o.seed,
        law=ctx.chk.law,
        theta=np.vstack([ctx.fr.theta[None, :], ctx.iv.theta]),
        resample=o.resample,
    )


def verdicts(fit: dict) -> dict:
    """The lines under the isoFLOP table: x*'s power laws and whether they agree with the law's."""
    from depthwidth.fit.isoflop import summary_lines

    return {"lines": summary_lines(fit["isoflop"])}


def tables(fit) -> dict:
    """Approach 2: each compute budget's minimum x* with its interval, beside the law's."""
    iso = fit.sections["isoflop"]
    rows = [
        {
            "C": b["C"],
            "runs": b["runs"],
            "x_lo": b["x_range"][0],
            "x_hi": b["x_range"][1],
            "x_opt": b.get("x_opt") if b.get("identified") else None,
            "ci_lo": (b.get("x_opt_ci") or [None, None])[0],
            "ci_hi": (b.get("x_opt_ci") or [None, None])[1],
            "ci": ci_text(b.get("x_opt_ci")),
            "law_x_opt": b.get("law_x_opt"),
            "note": row_note(b, iso["level"]) or None,
        }
        for b in iso["budgets"]
    ]
    x = iso["axis"]
    cols = [
        Col("C", "C (FLOPs)", "{:.3g}"),
        Col("runs", "runs"),
        Col("x_lo", f"{x} min", "{:.4g}"),
        Col("x_hi", f"{x} max", "{:.4g}"),
        Col("x_opt", f"{x}* (isoFLOP)", "{:.4g}"),
        Col("ci", f"{100 * iso['level']:.0f}% CI"),
        Col("law_x_opt", f"{x}* (law)", "{:.4g}"),
        Col("note", "no minimum, no interval, or an open one"),
    ]
    t = Table("fit_isoflop", f"IsoFLOP profiles (approach 2): loss vs ln {x} per budget", cols, rows)
    t.notes += said(fit, "isoflop").get("lines") or []
    return {"fit_isoflop": t}


def row_note(b: dict, level: float = 0.95) -> str:
    """Why an isoFLOP budget row has no minimum, no interval, or an open one ("" when none of these)."""
    if not b.get("identified"):
        return b.get("because", "")
    if b.get("ci_because"):
        return b["ci_because"]
    side = b.get("x_opt_ci_open")
    return (
        ""
        if not side
        else (
            f"open {side.replace('both', 'on both sides')}: over {50 * (1 - level):.3g}% of "
            "replicate minima lie past the sampled range"
        )
    )


def figures(fit, **_) -> dict:
    """{"isoflop_profiles": the isoFLOP figure (core/figures.py ``Figure``) or why it is not drawn}: left,
    loss vs x per budget with its parabola in ln x and its minimum with the interval (an open side runs
    to the sampled range's edge, with an arrow); right, the optima vs C with their power laws, the
    isoFLOP fit's solid and the law's dashed."""
    import numpy as np

    from depthwidth.core.figures import Figure, Panel, Series

    iso = fit.sections.get(SECTION) if fit else None
    if not iso:
        return {"isoflop_profiles": "no isoflop in fit.json (dw fit NAME --approach isoflop)"}
    axis = iso["axis"]
    a1, a2 = Panel(), Panel()
    at = np.linspace(0.05, 0.9, max(1, len(iso["budgets"])))
    for b, x in zip(iso["budgets"], at):
        col = {"cmap": "viridis", "at": float(x)}
        pts = np.array(b.get("points") or [])
        if not len(pts):
            continue
        a1.series.append(
            Series("plot", pts[:, 0], pts[:, 1], "o", {"color": col, "ms": 4, "label": f"C = {b['C']:.2g}"})
        )
        u = np.linspace(math.log(pts[:, 0].min()), math.log(pts[:, 0].max()), 100)
        if b.get("fit_ln_loss"):  # ln loss ≈ polynomial in ln x - centre
            y = np.exp(np.polyval(b["fit_ln_loss"], u - b["fit_centre"]))
            a1.series.append(Series("plot", np.exp(u), y, "-", {"color": col, "lw": 1}))
        elif b.get("parabola_ln_x"):  # fit.json from before: loss ≈ parabola in ln x
            a1.series.append(Series("plot", np.exp(u), np.polyval(b["parabola_ln_x"], u), "-", {"color": col, "lw": 1}))
        if b.get("identified"):
            x0, (lo, hi) = b["x_opt"], b.get("x_opt_ci") or (b["x_opt"], b["x_opt"])
            # an open side (None) runs to the sampled range's edge, with an arrow: beyond it, unbounded
            lo_x, hi_x = b["x_range"][0] if lo is None else lo, b["x_range"][1] if hi is None else hi
            err = {"xerr": [[x0 - lo_x], [hi_x - x0]], "color": col, "ms": 11, "mec": "k", "capsize": 3}
            a1.series.append(Series("errorbar", [x0], [b["loss_opt"]], "*", err))
            for edge, open_, m in ((lo_x, lo is None, "<"), (hi_x, hi is None, ">")):
                if open_:
                    a1.series.append(Series("plot", [edge], [b["loss_opt"]], m, {"color": col, "ms": 7}))
    a1.xscale, a1.xlabel, a1.ylabel = "log", f"{axis} (log)", "loss (nats)"
    a1.title = f"loss vs {axis} per budget; ★ minimum [{100 * iso['level']:.0f}% CI; ◂ ▸ open]"
    good = [b for b in iso["budgets"] if b.get("identified")]
    drawn = 0  # the optima's colours: the default cycle's, one per quantity drawn
    for key, sym, mark in (("x_opt", "N" if axis == "params" else "D", "o"), ("width_opt", "W", "s")):
        pts = [(b["C"], b[key]) for b in good if b.get(key)]
        if not pts:
            continue
        C, x = map(np.array, zip(*pts))
        col, drawn = f"C{drawn}", drawn + 1
        a2.series.append(Series("plot", C, x, mark, {"color": col, "label": f"{sym}* (isoFLOP)"}))
        p = iso["power_laws"].get(sym)
        if p:
            ci = ci_text(p["ci"], "{:.3f}")
            label = f"{sym}* ∝ C^{p['exponent']:.3f}" + ("" if ci == "—" else f" {ci}")
            a2.series.append(
                Series("plot", C, p["prefactor"] * C ** p["exponent"], "-", {"color": col, "label": label})
            )
        law = iso.get("law_power_laws", {}).get(sym)
        if law:
            label = f"law: {sym}* ∝ C^{law['exponent']:.3f}"
            a2.series.append(
                Series("plot", C, law["prefactor"] * C ** law["exponent"], "--", {"color": col, "label": label})
            )
    a2.xscale, a2.yscale = "log", "log"
    a2.xlabel, a2.ylabel = "training compute C (FLOPs)", "optimum"
    a2.title = "optima vs compute (solid: isoFLOP fit; dashed: the fitted law)"
    a2.legend_if_drawn = True
    return {
        "isoflop_profiles": Figure(
            "isoflop.png",
            f"IsoFLOP profiles and optima ({axis})",
            "per budget: loss vs x with its parabola in ln x and minimum; right: optima vs C with power laws",
            (11, 4.4),
            [a1, a2],
        )
    }
