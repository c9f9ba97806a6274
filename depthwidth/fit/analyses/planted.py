"""A store ``dw simulate`` wrote: each fitted number beside the world's planted value, and whether
its interval holds it (the world and the comparison: fit/planted.py).  Asked for by the data, not
by a flag: every run of the fitted table is simulated and the store keeps its world."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

SECTION = "planted"
OPTIONS = ()


def wanted(ctx) -> bool:
    c = ctx.clean
    return ctx.sweep_dir is not None and "simulated" in c and bool(c["simulated"].astype(bool).all())


def section(ctx) -> dict | None:
    from depthwidth.fit.planted import compare, read_world

    world = read_world(ctx.sweep_dir)
    if world is None:
        return None
    iv = ctx.iv
    return compare(
        world,
        ctx.chk.law,
        ctx.fr.params,
        iv.ci,
        ctx.point,
        iv.dci,
        ctx.widths,
        ctx.opts.c_ref,
        ctx.count,
        ctx.n_conv,
        iv.withheld,
    )


def tables(fit: dict) -> dict:
    from depthwidth.fit.result import verdicts_of

    p = fit["planted"]
    rows = [
        {
            "number": k,
            "planted": v["planted"],
            "estimate": v["estimate"],
            "ci_lo": (v.get("ci") or [None, None])[0],
            "ci_hi": (v.get("ci") or [None, None])[1],
            "inside": {True: "yes", False: "NO", None: None}[v["covered"]],
        }
        for k, v in p["numbers"].items()
    ]
    cols = [
        Col("number", "number"),
        Col("planted", "planted", "{:.4g}"),
        Col("estimate", "fitted", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
        Col("inside", "inside"),
    ]
    t = Table(
        "fit_planted", f"Planted truth ({p['world'].get('label')}, dw simulate): is it inside the interval?", cols, rows
    )
    t.notes.append(verdicts_of(fit).planted)
    return {"fit_planted": t}
