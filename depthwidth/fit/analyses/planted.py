"""A store ``dw simulate`` wrote: each fitted number beside the world's planted value, and whether
its interval holds it (the world and the comparison: fit/planted.py).  Asked for by the data, not
by a flag: every run of the fitted table is simulated and the store keeps its world."""

from __future__ import annotations

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
