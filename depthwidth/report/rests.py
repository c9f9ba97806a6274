"""Report tables for what a fit rests on: identification, hold-out, isoFLOP, sensitivity and planted
truth (from fit.json); ``dw fit`` prints the same tables.  The verdicts are fit/verdicts.py's."""

from __future__ import annotations

from depthwidth.fit.holdout import summary_line as holdout_line
from depthwidth.fit.verdicts import below_floor, identification_notes
from depthwidth.fit.isoflop import ci_text, row_note, summary_lines as isoflop_lines
from depthwidth.fit.planted import summary_line as planted_line
from depthwidth.fit.sensitivity import WIDTH_NOTE, summary_line as sensitivity_line
from depthwidth.report.document import Col, Table


def fit_notes(fit) -> list[str]:
    """The fit table's notes: what is said before the numbers, withheld and flagged intervals, warnings."""
    under = fit.get("underdetermined") or []
    out = [f"before the numbers: {w}" for w in under]
    out += [f"interval withheld: {k}: {why}" for k, why in (fit.get("ci_withheld") or {}).items()][:8]
    flagged = fit.get("ci_flagged") or {}
    if flagged:
        out.append(f"intervals flagged ({', '.join(list(flagged)[:8])}): {next(iter(flagged.values()))}")
    return out + [f"warning: {w}" for w in (fit.get("warnings") or []) if w not in under][:12]


def rest_tables(fit) -> dict:
    """{key: Table} for the sections of ``fit`` that are present."""
    if not fit:
        return {}
    out = {}
    p = fit.get("planted")
    if p:
        rows = [
            {
                "number": k,
                "planted": v["planted"],
                "estimate": v["estimate"],
                "ci_lo": (v.get("ci") or [None, None])[0],
                "ci_hi": (v.get("ci") or [None, None])[1],
                "inside": {True: "yes", False: "NO", None: None}[v["covered"]],
            }
            for k, v in p["numbers"].items()
        ]
        cols = [
            Col("number", "number"),
            Col("planted", "planted", "{:.4g}"),
            Col("estimate", "fitted", "{:.4g}"),
            Col("ci_lo", "CI lo", "{:.4g}"),
            Col("ci_hi", "CI hi", "{:.4g}"),
            Col("inside", "inside"),
        ]
        t = Table(
            "fit_planted",
            f"Planted truth ({p['world'].get('label')}, dw simulate): is it inside the interval?",
            cols,
            rows,
        )
        t.notes.append(planted_line(p))
        out["fit_planted"] = t
    ident = fit.get("identification")
    if ident:
        rows = [
            {"column": c, "min": v[0] if v else None, "max": v[1] if v else None} for c, v in ident["ranges"].items()
        ]
        t = Table(
            "fit_identification",
            f"What the fit rests on: {ident['runs']} runs, {ident['points']} points",
            [Col("column", "column"), Col("min", "min", "{:.4g}"), Col("max", "max", "{:.4g}")],
            rows,
        )
        t.notes += identification_notes(fit)  # the verdicts (fit/verdicts.py), then what the fit rests on
        out["fit_identification"] = t
    h = fit.get("holdout")
    if h:
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
        t = Table("fit_holdout", f"Hold-out: {h['split']['name']} predicted from the others", cols, rows)
        t.notes.append(holdout_line(h))
        out["fit_holdout"] = t
    iso = fit.get("isoflop")
    if iso:
        rows = [
            {
                "C": b["C"],
                "runs": b["runs"],
                "x_lo": b["x_range"][0],
                "x_hi": b["x_range"][1],
                "x_opt": b.get("x_opt") if b.get("identified") else None,
                "ci_lo": (b.get("x_opt_ci") or [None, None])[0],
                "ci_hi": (b.get("x_opt_ci") or [None, None])[1],
                "ci": ci_text(b.get("x_opt_ci")),
                "law_x_opt": b.get("law_x_opt"),
                "note": row_note(b, iso["level"]) or None,
            }
            for b in iso["budgets"]
        ]
        x = iso["axis"]
        cols = [
            Col("C", "C (FLOPs)", "{:.3g}"),
            Col("runs", "runs"),
            Col("x_lo", f"{x} min", "{:.4g}"),
            Col("x_hi", f"{x} max", "{:.4g}"),
            Col("x_opt", f"{x}* (isoFLOP)", "{:.4g}"),
            Col("ci", f"{100 * iso['level']:.0f}% CI"),
            Col("law_x_opt", f"{x}* (law)", "{:.4g}"),
            Col("note", "no minimum, no interval, or an open one"),
        ]
        t = Table("fit_isoflop", f"IsoFLOP profiles (approach 2): loss vs ln {x} per budget", cols, rows)
        t.notes += isoflop_lines(iso)
        out["fit_isoflop"] = t
    s = fit.get("sensitivity")
    if s:
        fitted = [r for r in s["choices"] if "values" in r]
        q = (ident or {}).get("quantum")
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
        t.notes.append(sensitivity_line(s))
        t.notes.append(f"CI width: {WIDTH_NOTE}")
        t.notes += [f"{r['short']}: skipped ({r['skipped']})" for r in s["choices"] if "skipped" in r]
        out["fit_sensitivity"] = t
    return out
