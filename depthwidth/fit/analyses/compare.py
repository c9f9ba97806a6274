"""``--compare``: the laws named, fitted to the same runs and ranked by in-sample and held-out
error (the statistics: fit/compare.py); the D_crit form's paired test is decided there."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

SECTION = "compare"
OPTIONS = ("compare", "holdout")  # --holdout's split also gives the comparison's extrap. column


def wanted(ctx) -> bool:
    return bool(ctx.chk.compare)


def section(ctx) -> dict:
    from depthwidth.fit.compare import compare_laws
    from depthwidth.fit.laws import label
    from depthwidth.fit.laws import is_user

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


def tables(fit) -> dict:
    """The laws ``--compare`` fitted, by in-sample and held-out error."""
    cmp = fit.sections.get("compare")
    if not cmp or not cmp.get("laws"):
        return {}
    best = cmp.get("best") or {}
    rows = [
        {
            "law": r.get("law"),
            "k": r.get("k"),
            "r2": r.get("r2"),
            "rmse": r.get("rmse"),
            "loro_rmse": r.get("loro_rmse"),
            "extrapolation_rmse": r.get("extrapolation_rmse"),
            "aic": r.get("aic"),
            "bic": r.get("bic"),
            "best": ", ".join(k for k, v in best.items() if v == r.get("law")) or None,
        }
        for r in cmp["laws"]
    ]
    split = cmp.get("extrapolation_split")
    cols = [
        Col("law", "law"),
        Col("k", "k"),
        Col("r2", "R²", "{:.4f}"),
        Col("rmse", "RMSE", "{:.4g}"),
        Col("loro_rmse", "held-out RMSE (LORO)", "{:.4g}"),
        Col("extrapolation_rmse", "extrap. RMSE", "{:.4g}"),
        Col("aic", "AIC", "{:.1f}"),
        Col("bic", "BIC", "{:.1f}"),
        Col("best", "best by"),
    ]
    t = Table("fit_compare", "Law comparison (errors in nats)" + (f"; extrap.: {split}" if split else ""), cols, rows)
    t.notes += [f"rank by {key}: " + " < ".join(order) for key, order in (cmp.get("rank") or {}).items()]
    if "dcrit_preference" in cmp:
        p = cmp["dcrit_preference"]  # fit/compare.py; a fit.json before its paired test has no line
        t.notes.append(
            p.get("line")
            or f"D_crit form with the lower held-out error: {p.get('prefers')} (not tested against the runs' scatter)"
        )
    return {"fit_compare": t}
