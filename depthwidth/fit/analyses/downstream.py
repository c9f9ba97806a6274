"""``--metric METRIC:TASK``: a downstream metric as a sigmoid of each run's final loss, so the loss
law predicts it in two steps; with ``--holdout`` both steps predict the held-out runs' metric (the
statistics: fit/downstream.py)."""

from __future__ import annotations

SECTION = "downstream"
OPTIONS = ("metric",)


def section(ctx) -> dict:
    from depthwidth.fit.downstream import downstream

    o = ctx.opts
    return downstream(ctx.clean, o.metric, o.bootstrap, o.level, o.seed, ctx.shared.get("holdout"))
