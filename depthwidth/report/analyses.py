"""The optional analyses' tables (fit/analyses/), as ``dw fit`` prints them and ``dw report`` shows
them: each shows its fit.json section and what the fit decided its table says (fit.json's
``verdicts.analyses``: the lines under it, the cells it marks); none calls back into the fit.

``TABLES`` lists them in the fit's registry order (fit/analyses/__init__.py ``REGISTRY``); an
analysis added there adds its table here."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table, ci_text
from depthwidth.report.document import verdicts

NOT_IDENTIFIED = "not identified"


def said(fit: dict, section: str) -> dict:
    """What the fit decided ``section``'s table says: {lines, …} (empty when it says nothing more)."""
    return (verdicts(fit).get("analyses") or {}).get(section) or {}


def compare_tables(fit: dict) -> dict:
    """The laws ``--compare`` fitted, by in-sample and held-out error."""
    cmp = fit.get("compare")
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


def holdout_tables(fit: dict) -> dict:
    """The held-out runs, each predicted from the others with its prediction interval."""
    h = fit["holdout"]
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


def isoflop_tables(fit: dict) -> dict:
    """Approach 2: each compute budget's minimum x* with its interval, beside the law's."""
    iso = fit["isoflop"]
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
    t.notes += said(fit, "isoflop").get("lines") or []
    return {"fit_isoflop": t}


def row_note(b: dict, level: float = 0.95) -> str:
    """Why an isoFLOP budget row has no minimum, no interval, or an open one ("" when none of these)."""
    if not b.get("identified"):
        return b.get("because", "")
    if b.get("ci_because"):
        return b["ci_because"]
    side = b.get("x_opt_ci_open")
    return (
        ""
        if not side
        else (
            f"open {side.replace('both', 'on both sides')}: over {50 * (1 - level):.3g}% of "
            "replicate minima lie past the sampled range"
        )
    )


def sensitivity_tables(fit: dict) -> dict:
    """Each number under each fitting choice; a value outside the meaningful range reads "not identified"."""
    s = fit["sensitivity"]
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


def downstream_tables(fit: dict) -> dict:
    """The loss-to-metric sigmoid (step 2) and, with a hold-out, both steps' predictions of the
    held-out runs' metric."""
    d = fit.get("downstream")
    if not d:
        return {}
    out = {}
    ci = d.get("ci") or {}
    rows = [
        {"quantity": k, "fitted": v, "ci_lo": (ci.get(k) or [None])[0], "ci_hi": (ci.get(k) or [None, None])[1]}
        for k, v in d["params"].items()
    ]
    rows.append({"quantity": "run-to-run sd of the metric", "fitted": d["noise_sd"]})
    cols = [
        Col("quantity", "quantity"),
        Col("fitted", "fitted", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
    ]
    t = Table("fit_downstream", f"{d['metric']} from loss: {d['form']}", cols, rows)
    lo, hi = d["loss_range"]
    t.notes.append(f"fitted on {d['runs']} runs' final loss ({lo:.3f}-{hi:.3f} nats) and measured {d['metric']}")
    out["fit_downstream"] = t
    h = d.get("holdout")
    if h and h.get("points"):
        lvl = f"{100 * d['level']:.0f}%"
        rows = [
            {**{k: p[k] for k in ("run", "measured", "predicted")}, "pi_lo": p["pi"][0], "pi_hi": p["pi"][1]}
            | {"inside": p["inside"], "extrapolated": "yes" if p["extrapolated"] else None}
            for p in h["points"]
        ]
        cols = [
            Col("run", "run"),
            Col("measured", "measured", "{:.4g}"),
            Col("predicted", "predicted", "{:.4g}"),
            Col("pi_lo", f"{lvl} PI lo", "{:.4g}"),
            Col("pi_hi", f"{lvl} PI hi", "{:.4g}"),
            Col("inside", "inside"),
            Col("extrapolated", "below every fitted loss"),
        ]
        t = Table(
            "fit_downstream_holdout", f"Hold-out: {d['metric']} of {h['split']} predicted in two steps", cols, rows
        )
        t.notes.append(
            f"{h['inside']}/{len(h['points'])} measured values inside their {lvl} prediction intervals; "
            f"RMSE {h['rmse']:.3g} (the loss law and the sigmoid fitted on the other {h['fitted_runs']} runs)"
        )
        out["fit_downstream_holdout"] = t
    elif h and h.get("note"):
        out["fit_downstream"].notes.append(h["note"])
    return out


def planted_tables(fit: dict) -> dict:
    """A simulated store's fit: each number beside the planted world's value, inside its interval or not."""
    p = fit["planted"]
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
        "fit_planted", f"Planted truth ({p['world'].get('label')}, dw simulate): is it inside the interval?", cols, rows
    )
    t.notes.append(verdicts(fit).get("planted"))
    return {"fit_planted": t}


TABLES = {  # section -> its tables, in the fit's registry order
    "compare": compare_tables,
    "holdout": holdout_tables,
    "isoflop": isoflop_tables,
    "sensitivity": sensitivity_tables,
    "downstream": downstream_tables,
    "planted": planted_tables,
}


def analysis_tables(fit: dict, sections: tuple[str, ...] | None = None) -> dict:
    """{key: Table} of every analysis section ``fit`` holds (of ``sections`` only, in that order, when given)."""
    out = {}
    for name in TABLES if sections is None else sections:
        if fit.get(name) and name in TABLES:
            out.update(TABLES[name](fit))
    return out
