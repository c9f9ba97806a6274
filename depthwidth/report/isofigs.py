"""The isoFLOP figure of ``dw report --plots``: loss vs x per budget with each parabola and
its minimum, and the optima vs C with their power laws (fit.json's ``isoflop``)."""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.tables import ci_text


def draw(plt, iso: dict):
    """Two panels; returns the figure (the caller saves it)."""
    axis = iso["axis"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.4))
    colors = plt.get_cmap("viridis")(np.linspace(0.05, 0.9, max(1, len(iso["budgets"]))))
    for b, col in zip(iso["budgets"], colors):
        pts = np.array(b.get("points") or [])
        if not len(pts):
            continue
        a1.plot(pts[:, 0], pts[:, 1], "o", color=col, ms=4, label=f"C = {b['C']:.2g}")
        u = np.linspace(math.log(pts[:, 0].min()), math.log(pts[:, 0].max()), 100)
        if b.get("fit_ln_loss"):  # ln loss ≈ polynomial in ln x - centre
            a1.plot(np.exp(u), np.exp(np.polyval(b["fit_ln_loss"], u - b["fit_centre"])), "-", color=col, lw=1)
        elif b.get("parabola_ln_x"):  # fit.json from before: loss ≈ parabola in ln x
            a1.plot(np.exp(u), np.polyval(b["parabola_ln_x"], u), "-", color=col, lw=1)
        if b.get("identified"):
            x0, (lo, hi) = b["x_opt"], b.get("x_opt_ci") or (b["x_opt"], b["x_opt"])
            # an open side (None) runs to the sampled range's edge, with an arrow: beyond it, unbounded
            lo_x, hi_x = b["x_range"][0] if lo is None else lo, b["x_range"][1] if hi is None else hi
            a1.errorbar(
                [x0], [b["loss_opt"]], xerr=[[x0 - lo_x], [hi_x - x0]], fmt="*", color=col, ms=11, mec="k", capsize=3
            )
            for edge, open_, m in ((lo_x, lo is None, "<"), (hi_x, hi is None, ">")):
                if open_:
                    a1.plot([edge], [b["loss_opt"]], m, color=col, ms=7)
    a1.set_xscale("log")
    a1.set_xlabel(f"{axis} (log)")
    a1.set_ylabel("loss (nats)")
    a1.set_title(f"loss vs {axis} per budget; ★ minimum [{100 * iso['level']:.0f}% CI; ◂ ▸ open]")
    a1.legend(loc="best")
    good = [b for b in iso["budgets"] if b.get("identified")]
    for key, sym, mark in (("x_opt", "N" if axis == "params" else "D", "o"), ("width_opt", "W", "s")):
        pts = [(b["C"], b[key]) for b in good if b.get(key)]
        if not pts:
            continue
        C, x = map(np.array, zip(*pts))
        line = a2.plot(C, x, mark, label=f"{sym}* (isoFLOP)")[0]
        p = iso["power_laws"].get(sym)
        if p:
            ci = ci_text(p["ci"], "{:.3f}")
            a2.plot(
                C,
                p["prefactor"] * C ** p["exponent"],
                "-",
                color=line.get_color(),
                label=f"{sym}* ∝ C^{p['exponent']:.3f}" + ("" if ci == "—" else f" {ci}"),
            )
        law = iso.get("law_power_laws", {}).get(sym)
        if law:
            a2.plot(
                C,
                law["prefactor"] * C ** law["exponent"],
                "--",
                color=line.get_color(),
                label=f"law: {sym}* ∝ C^{law['exponent']:.3f}",
            )
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("training compute C (FLOPs)")
    a2.set_ylabel("optimum")
    a2.set_title("optima vs compute (solid: isoFLOP fit; dashed: the fitted law)")
    if a2.lines:
        a2.legend(loc="best")
    return fig
