"""A tuned sweep (sweep file ``tune:``): how the law's table was chosen (each group's pick, the edges
of the grid, ``--tuned``) and whether the conclusion survives tuning: the same law fitted the untuned
way (one value of the tuned setting for every group) beside the fit on each group's best.

The picks themselves stay in pipeline.py, before the fit: they choose the table the law is fitted on
(``--tuned best | interpolated``); this module gets the untuned table and the picks (``ctx.untuned``,
``ctx.picks``) and makes fit.json's ``tuning`` from them, its line first among the fit's warnings,
and the fixed-value fit through ``ctx.refit`` (pipeline.py ``run_fit``, which an analysis may not
import).  The statistics and the rule of the comparison's line: fit/tuning.py (``comparison``); the
line is stored in the section (``tuning.fixed.line``), as before.
"""

from __future__ import annotations

from dataclasses import replace

SECTION = "tuning"
OPTIONS = ("tuned",)


def section(ctx) -> dict:
    """fit.json's ``tuning``: the mode, every group's pick, the edges, and the fixed-value fit."""
    from depthwidth.fit.tuning import line as tuning_line
    from depthwidth.fit.tuning import section as tuning_section

    t = tuning_section(ctx.picks, ctx.opts.tuned or "best", len(ctx.untuned), len(ctx.table))
    ctx.doc["warnings"].insert(0, tuning_line(t))  # said first among the fit's warnings
    t["fixed"] = _fixed_fit(ctx, ctx.untuned, ctx.doc)
    return t


def _fixed_fit(ctx, df, tuned_res: dict) -> dict:
    """The same law fitted the untuned way (one value of the tuned setting for every group: the
    shared value nearest the grid's middle), set beside the fit on each group's best."""
    from depthwidth.core.errors import BadInput
    from depthwidth.fit.tuning import HALTED, comparison, first_points, fixed_value, halved

    found, opts = ctx.picks, ctx.opts
    key, value = found[0].key, fixed_value(found)
    if value is None:
        return {"note": f"no value of {key} is shared by every group: no fixed-value fit to compare"}
    lean = replace(opts, holdout=None, compare=None, sensitivity=False, approach="3", tuned=None, metric=None)
    at = ""
    if halved(df[df[key] == value]):  # its run pruned somewhere: both fits where halving compared every run
        df = first_points(df)  # every run measured there, the pruned ones too
        df = df.assign(status=df["status"].replace({h: "done" for h in HALTED}))
        tokens = df.loc[df["group"].notna(), "tokens"]
        at = f"; both at the first budget ({tokens.min():,.0f} tokens), where successive halving compared every run"
        try:
            tuned_res = ctx.refit(df.reset_index(drop=True), replace(lean, tuned="best"))
        except BadInput as e:
            return {"note": f"the fit on each group's best at the first budget failed: {e}"}
    rows = df[(df["group"].isna()) | (df[key] == value)].drop(columns=["group"])
    try:
        res = ctx.refit(rows.reset_index(drop=True), lean)
    except BadInput as e:
        return {"note": f"the fit at {key} = {value:g} failed: {e}"}
    return comparison(tuned_res, res, key, value, at)


def tables(fit) -> dict:
    """A tuned sweep's fit: each group's best value, measured and interpolated, and the edges; the
    fit at one value for every rung beside the fit on each group's best, with its stored line."""
    from depthwidth.core.tables import Col, Table

    t = fit.sections["tuning"]
    key = t["key"]
    rows = []
    for p in t["picks"]:
        ci = p.get("optimum_ci") or [None, None]
        rows.append(
            {
                "group": p["group"],
                "values": len(p["values"]),
                "best": p["best"],
                "best_loss": p["best_loss"],
                "optimum": p.get("optimum"),
                "ci_lo": ci[0],
                "ci_hi": ci[1],
                "edge": f"{p['edge']}: extend to {p['next_value']:.3g}" if p.get("edge") else None,
            }
        )
    cols = [
        Col("group", "group"),
        Col("values", "values"),
        Col("best", f"best {key}", "{:.3g}"),
        Col("best_loss", "its loss", "{:.4f}"),
        Col("optimum", "interpolated", "{:.3g}"),
        Col("ci_lo", "CI lo", "{:.3g}"),
        Col("ci_hi", "CI hi", "{:.3g}"),
        Col("edge", "edge of the grid"),
    ]
    tab = Table(
        "fit_tuning", f"Tuning groups: the best {key} of each (the law is fitted on --tuned {t['mode']})", cols, rows
    )
    if t["extend"]:
        tab.notes.append(f"{len(t['extend'])} group(s) at an edge: dw sweep NAME --extend-tuning adds the next value")
    out = {"fit_tuning": tab}
    f = t.get("fixed") or {}
    if f.get("rows"):
        cols = [
            Col("number", "number"),
            Col("fixed", f"at {f['key']} = {f['value']:g}", "{:.4g}"),
            Col("fixed_lo", "CI lo", "{:.4g}"),
            Col("fixed_hi", "CI hi", "{:.4g}"),
            Col("tuned", "at each group's best", "{:.4g}"),
            Col("tuned_lo", "CI lo", "{:.4g}"),
            Col("tuned_hi", "CI hi", "{:.4g}"),
        ]
        rows = [
            {
                "number": r["number"],
                "fixed": r["fixed"],
                "fixed_lo": (r["fixed_ci"] or [None, None])[0],
                "fixed_hi": (r["fixed_ci"] or [None, None])[1],
                "tuned": r["tuned"],
                "tuned_lo": (r["tuned_ci"] or [None, None])[0],
                "tuned_hi": (r["tuned_ci"] or [None, None])[1],
            }
            for r in f["rows"]
        ]
        cmp = Table(
            "fit_tuned_vs_fixed",
            "Does the conclusion survive tuning? One value for every rung vs each best",
            cols,
            rows,
        )
        if f.get("line"):
            cmp.notes.append(f["line"])
        out["fit_tuned_vs_fixed"] = cmp
    elif f.get("note"):
        tab.notes.append(f["note"])
    return out
