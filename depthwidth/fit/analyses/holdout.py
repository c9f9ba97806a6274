"""``--holdout largest[:K]``: the K largest runs by FLOPs predicted from the others, each with its
prediction interval and an inside yes/NO (the statistics: fit/holdout.py)."""

from __future__ import annotations

SECTION = "holdout"
OPTIONS = ("holdout",)


def section(ctx) -> dict:
    from depthwidth.fit.holdout import holdout

    o = ctx.opts
    h = holdout(
        ctx.clean,
        ctx.chk.law,
        k=ctx.chk.holdout_k,
        bootstrap_n=o.bootstrap,
        level=o.level,
        pins=ctx.chk.pins,
        resample=o.resample,
        **ctx.common,
    )
    ctx.shared["holdout"] = h  # --metric predicts the same runs in two steps (downstream.py)
    return {k: v for k, v in h.items() if not k.startswith("_")}


def verdicts(fit: dict) -> dict:
    """The lines under the hold-out's table: the plain fit's errors and coverage, and the errors of the
    fit made for the held-out runs where it is local (fit/target_fit.py)."""
    from depthwidth.fit.holdout import summary_lines

    return {"lines": summary_lines(fit["holdout"])}
