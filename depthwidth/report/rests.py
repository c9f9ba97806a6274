"""Report tables for what a fit rests on: identification, hold-out, isoFLOP, sensitivity and planted
truth (from fit.json); ``dw fit`` prints the same tables.  The verdicts are fit/verdicts.py's."""

from __future__ import annotations

from depthwidth.fit.holdout import summary_line as holdout_line
from depthwidth.fit.result import verdicts_of
from depthwidth.fit.verdicts import below_floor
from depthwidth.fit.isoflop import ci_text, row_note, summary_lines as isoflop_lines
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
        t.notes.append(verdicts_of(fit).planted)
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
        t.notes += verdicts_of(fit).notes  # the verdicts (decided by dw fit: fit/result.py), then what the fit rests on
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
    out.update(downstream_tables(fit.get("downstream")))
    out.update(tuning_tables(fit.get("tuning")))
    return out


def lr_tables(fit: dict) -> dict:
    """``dw fit --law lr``: lr* as power laws in N, and in D and W, with the verdicts."""
    rows = []
    for form, label in (("N", "lr* = c · N^e_N"), ("DW", "lr* = c · D^e_D · W^e_W")):
        f = fit.get(form) or {}
        for k, v in (f.get("coef") or {}).items():
            lo, hi = f["ci"][k]
            rows.append({"form": label, "coef": k, "value": v, "ci_lo": lo, "ci_hi": hi})
        if f.get("note"):
            rows.append({"form": label, "coef": f["note"]})
    cols = [
        Col("form", "law"),
        Col("coef", "coefficient"),
        Col("value", "fitted", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
    ]
    t = Table("fit_lr", "Learning-rate laws: each tuning group's lr* (interpolated, else best)", cols, rows)
    t.notes.append(
        f"{fit['used']} of {fit['groups']} groups ({fit['at_edge']} with their best at an edge of the grid left out: "
        "dw sweep NAME --extend-tuning)"
    )
    t.notes += fit.get("verdicts") or []
    return {"fit_lr": t}


def halving_table(h: dict) -> Table:
    """Successive halving: per tuning group, where its runs were compared, who goes on and who was
    pruned (the group's own record, runs/NAME/halving/GROUP.json), and the compute saved."""
    rows = []
    for gid, doc in sorted(h["groups"].items()):
        dec = doc.get("decision") or {}
        reps = doc.get("reports") or {}
        toks = sorted({r.get("tokens") for r in reps.values() if r.get("tokens")})
        loss = lambda rids: ", ".join(  # noqa: E731
            f"{reps[r]['val_loss']:.4f}" if reps.get(r, {}).get("val_loss") is not None else "inf" for r in rids
        )
        rows.append(
            {
                "group": gid,
                "members": len(doc.get("members") or []),
                "reported": len(reps),
                "tokens": toks[0] if toks else None,
                "kept": loss(dec.get("keep") or []) if dec else None,
                "pruned": loss(dec.get("prune") or []) if dec else None,
                "state": "decided" if dec else f"waiting for {len(doc.get('members') or []) - len(reps)}",
            }
        )
    cols = [
        Col("group", "group"),
        Col("members", "runs"),
        Col("reported", "at budget"),
        Col("tokens", "compared at (tokens)", "{:,.0f}"),
        Col("kept", "kept (loss there)"),
        Col("pruned", "pruned (loss there)"),
        Col("state", "state"),
    ]
    t = Table("halving", "Successive halving: each tuning group compared at its first budget", cols, rows)
    sm = h["summary"]
    frac = f" ({sm['saved_fraction']:.0%} of the runs' planned compute)" if sm.get("saved_fraction") is not None else ""
    t.notes.append(f"{sm['pruned']} runs pruned; compute saved {sm['flops_saved']:.3g} FLOPs{frac}")
    return t


def tuning_tables(t: dict | None) -> dict:
    """A tuned sweep's fit: each group's best value, measured and interpolated, and the edges."""
    if not t:
        return {}
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


def downstream_tables(d: dict | None) -> dict:
    """``dw fit --metric``: the loss-to-metric sigmoid (step 2) and, with a hold-out, both steps'
    predictions of the held-out runs' metric."""
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
