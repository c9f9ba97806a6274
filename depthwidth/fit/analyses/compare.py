"""``--compare``: the laws named, fitted to the same runs and ranked by in-sample and held-out
error (the statistics: fit/compare.py); the D_crit form's paired test is decided there."""

from __future__ import annotations

SECTION = "compare"
OPTIONS = ("compare", "holdout")  # --holdout's split also gives the comparison's extrap. column


def wanted(ctx) -> bool:
    return bool(ctx.chk.compare)


def section(ctx) -> dict:
    from depthwidth.fit.compare import compare_laws
    from depthwidth.fit.laws import label
    from depthwidth.fit.userlaw import is_user

    lw, chk = ctx.chk.law, ctx.chk
    names = chk.compare if lw.name in chk.compare else [lw if is_user(lw) else lw.name] + chk.compare
    # the fitted law takes part (a user-defined law as itself: it has no built-in name)
    cmp = compare_laws(
        ctx.clean,
        names,
        irreducible=ctx.opts.irreducible,
        pins=chk.pins,
        fits={label(lw): ctx.fr},
        holdout_k=chk.holdout_k,
        **ctx.common,
    )
    cmp.pop("_fits", None)
    return cmp
