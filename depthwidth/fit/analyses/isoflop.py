"""``--approach isoflop``: approach 2 beside the law — a parabola in ln x through each compute
budget's runs, its minimum x* with an interval, and x*'s power law in C compared with the law's
(the statistics: fit/isoflop.py)."""

from __future__ import annotations

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
