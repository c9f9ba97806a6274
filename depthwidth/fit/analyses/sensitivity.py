"""``--sensitivity``: the fit redone under each fitting choice (Huber delta, start grid, N without
embeddings, outliers dropped, one budget per run); a number that moves more than its interval is
wide is flagged (the refits: fit/sensitivity.py)."""

from __future__ import annotations

from depthwidth.core.tables import NOT_IDENTIFIED, Col, Table
from depthwidth.fit.analyses import said

SECTION = "sensitivity"
OPTIONS = ("sensitivity",)


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


def verdicts(fit: dict) -> dict:
    """The lines under the sensitivity table, and ``not_identified``: per number, the fitting choices
    whose value of it is outside the meaningful range (D_crit or D* below one layer, W* below the
    width quantum: shown "not identified")."""
    from depthwidth.fit.sensitivity import WIDTH_NOTE, summary_line
    from depthwidth.fit.verdicts import below_floor

    s = fit["sensitivity"]
    q = (fit.get("identification") or {}).get("quantum")
    fitted = [r["key"] for r in s["choices"] if "values" in r]
    below = {
        k: [c for c in fitted if below_floor(k, v["values"].get(c), q)] for k, v in (s.get("numbers") or {}).items()
    }
    return {
        "lines": [summary_line(s), f"CI width: {WIDTH_NOTE}"],
        "not_identified": {k: cs for k, cs in below.items() if cs},
    }


def tables(fit) -> dict:
    """Each number under each fitting choice; a value outside the meaningful range reads "not identified"."""
    s = fit.sections["sensitivity"]
    says = said(fit, "sensitivity")
    below = says.get("not_identified") or {}
    fitted = [r for r in s["choices"] if "values" in r]
    rows = []
    for k, v in s["numbers"].items():
        vals = {r["key"]: v["values"].get(r["key"]) for r in fitted}
        rows.append(
            {
                "number": k,
                **{c: NOT_IDENTIFIED if c in below.get(k, ()) else x for c, x in vals.items()},
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
    t.notes += says.get("lines") or []
    t.notes += [f"{r['short']}: skipped ({r['skipped']})" for r in s["choices"] if "skipped" in r]
    return {"fit_sensitivity": t}
