"""``--metric METRIC:TASK``: a downstream metric as a sigmoid of each run's final loss, so the loss
law predicts it in two steps; with ``--holdout`` both steps predict the held-out runs' metric (the
statistics: fit/downstream.py)."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

SECTION = "downstream"
OPTIONS = ("metric",)


def section(ctx) -> dict:
    from depthwidth.fit.downstream import downstream

    o = ctx.opts
    return downstream(ctx.clean, o.metric, o.bootstrap, o.level, o.seed, ctx.shared.get("holdout"))


def tables(fit) -> dict:
    """The loss-to-metric sigmoid (step 2) and, with a hold-out, both steps' predictions of the
    held-out runs' metric."""
    d = fit.sections.get("downstream")
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
