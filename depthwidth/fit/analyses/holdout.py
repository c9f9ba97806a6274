"""``--holdout largest[:K]``: the K largest runs by FLOPs predicted from the others, each with its
prediction interval and an inside yes/NO (the statistics: fit/holdout.py)."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table
from depthwidth.fit.analyses import said

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
    ctx.shared["holdout"] = h  # --metric predicts the same runs in two steps (analyses/downstream.py)
    return {k: v for k, v in h.items() if not k.startswith("_")}


def verdicts(fit: dict) -> dict:
    """The lines under the hold-out's table: the plain fit's errors and coverage, and the errors of the
    fit made for the held-out runs where it is local (fit/target_fit.py)."""
    from depthwidth.fit.holdout import summary_lines

    return {"lines": summary_lines(fit["holdout"])}


def tables(fit) -> dict:
    """The held-out runs, each predicted from the others with its prediction interval."""
    h = fit.sections["holdout"]
    rows = [
        {
            "run": p["run"],
            "params": p.get("params"),
            "tokens": p.get("tokens"),
            "loss": p["loss"],
            "predicted": p["predicted"],
            "pi_lo": p["pi"][0],
            "pi_hi": p["pi"][1],
            "inside": p["inside"],
        }
        for p in h["points"]
    ]
    lvl = f"{100 * h['level']:.0f}%"
    cols = [
        Col("run", "run"),
        Col("params", "params", "{:.3g}"),
        Col("tokens", "tokens", "{:.3g}"),
        Col("loss", "measured", "{:.4g}"),
        Col("predicted", "predicted", "{:.4g}"),
        Col("pi_lo", f"{lvl} PI lo", "{:.4g}"),
        Col("pi_hi", f"{lvl} PI hi", "{:.4g}"),
        Col("inside", "inside"),
    ]
    ft = h.get("for_target") or {}
    if ft.get("local"):  # the fit made for the held-out runs (fit/target_fit.py) differs from the plain one
        for row, v in zip(rows, ft["predicted"]):
            row["for_target"] = v
        cols.insert(5, Col("for_target", "made for them", "{:.4g}"))
    t = Table("fit_holdout", f"Hold-out: {h['split']['name']} predicted from the others", cols, rows)
    t.notes += said(fit, "holdout").get("lines") or []
    return {"fit_holdout": t}
