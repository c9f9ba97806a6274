"""``--sensitivity``: the fit redone under each fitting choice (Huber delta, start grid, N without
embeddings, outliers dropped, one budget per run); a number that moves more than its interval is
wide is flagged (the refits: fit/sensitivity.py)."""

from __future__ import annotations

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
