"""``--approach isoflop``: approach 2 beside the law — a parabola in ln x through each compute
budget's runs, its minimum x* with an interval, and x*'s power law in C compared with the law's
(the statistics: fit/isoflop.py)."""

from __future__ import annotations

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
