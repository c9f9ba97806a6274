"""``--approach isoflop``: approach 2 beside the law — a parabola in ln x through each compute
budget's runs, its minimum x* with an interval, and x*'s power law in C compared with the law's
(the statistics: fit/isoflop.py)."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

SECTION = "isoflop"
OPTIONS = ("approach", "isoflop_axis")


def wanted(ctx) -> bool:
    return ctx.opts.approach == "isoflop"


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


def tables(fit: dict) -> dict:
    from depthwidth.fit.isoflop import ci_text, row_note, summary_lines

    iso = fit["isoflop"]
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
    t.notes += summary_lines(iso)
    return {"fit_isoflop": t}
