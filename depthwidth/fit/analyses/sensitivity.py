"""``--sensitivity``: the fit redone under each fitting choice (Huber delta, start grid, N without
embeddings, outliers dropped, one budget per run); a number that moves more than its interval is
wide is flagged (the refits: fit/sensitivity.py)."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

SECTION = "sensitivity"
OPTIONS = ("sensitivity",)


def wanted(ctx) -> bool:
    return bool(ctx.opts.sensitivity)


def section(ctx) -> dict:
    from depthwidth.fit.files import jsonable
    from depthwidth.fit.sensitivity import sensitivity

    o, iv = ctx.opts, ctx.iv
    return jsonable(
        sensitivity(
            ctx.clean,
            ctx.chk.law,
            pins=ctx.chk.pins,
            widths=ctx.widths,
            ci={**iv.ci, **iv.dci} if o.bootstrap else {},
            base=ctx.fr,
            boot=(o.bootstrap, o.level),
            convention=ctx.n_conv,
            count=ctx.count,
            c_ref=o.c_ref,
            resample=o.resample,
            **ctx.common,
        )
    )


def tables(fit: dict) -> dict:
    from depthwidth.fit.sensitivity import WIDTH_NOTE, summary_line
    from depthwidth.fit.verdicts import below_floor

    s = fit["sensitivity"]
    fitted = [r for r in s["choices"] if "values" in r]
    q = (fit.get("identification") or {}).get("quantum")
    rows = []
    for k, v in s["numbers"].items():
        vals = {r["key"]: v["values"].get(r["key"]) for r in fitted}
        rows.append(
            {
                "number": k,
                **{c: "not identified" if below_floor(k, x, q) else x for c, x in vals.items()},
                "spread": v["spread"],
                "ci_width": v.get("compared_width", v["ci_width"]),
                "flagged": v["flagged"],
                "farthest": v.get("farthest"),
            }
        )
    cols = (
        [Col("number", "number")]
        + [Col(r["key"], r["short"], "{:.4g}") for r in fitted]
        + [
            Col("spread", "spread", "{:.4g}"),
            Col("ci_width", "CI width", "{:.4g}"),
            Col("flagged", "spread > CI"),
            Col("farthest", "moved most by"),
        ]
    )
    t = Table("fit_sensitivity", "Sensitivity: each number under each fitting choice", cols, rows)
    t.notes.append(summary_line(s))
    t.notes.append(f"CI width: {WIDTH_NOTE}")
    t.notes += [f"{r['short']}: skipped ({r['skipped']})" for r in s["choices"] if "skipped" in r]
    return {"fit_sensitivity": t}
