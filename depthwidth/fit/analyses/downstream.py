"""``--metric METRIC:TASK``: a downstream metric as a sigmoid of each run's final loss, so the loss
law predicts it in two steps; with ``--holdout`` both steps predict the held-out runs' metric (the
statistics: the last section).

``dw fit --metric acc:TASK``: a downstream metric predicted in two steps, as the ladders do.

Step 1 is the loss law ``dw fit`` fits anyway: a run's final loss from its size and tokens.  Step 2
maps loss to the metric with a sigmoid fitted on the sweep's own runs (each run's final loss and
its measured metric, ``dw eval``'s ``METRIC:TASK`` column of the run table):

    acc(L) = lo + (hi - lo) / (1 + exp(k · (L - L0)))

lo is the metric at a loss far above the runs' (chance, for a multiple-choice task), hi the ceiling,
L0 the loss at the midpoint and k the steepness.  OLMo's and Marin's downstream predictions use
this form: accuracy is near chance until the loss falls low enough, then rises steeply, and a line
fitted through the small runs' near-chance accuracies would say nothing about a large run's.

Why two steps and not the metric regressed on size directly: the loss law carries what a sweep
measures best (the loss: smooth, low noise) to the large run, and the sigmoid only has to hold
over the loss range, where the sweep's runs are also the evidence.  Its weakness is stated
beside every prediction: a large run whose predicted loss lies below every run's has its metric
extrapolated along the sigmoid, which the sweep cannot check (``extrapolated``).

Uncertainty: the sigmoid is refitted on the fitted curve plus fresh noise at its residuals'
scale (a noise bootstrap, as the loss law's; ``bootstrap_sigmoid`` says why not pairs), and each
replicate is paired with one replicate of step 1's predicted log loss of the target run (its own
bootstrap, plus a new run's noise); a prediction interval adds the sigmoid's residual noise (the
run-to-run spread of the metric at equal loss: seeds and a finite test set).  ``--holdout
largest:K`` fits both steps without the K largest runs and predicts their metric: error and how
many measured values fall inside their intervals.

Bounds: 0 <= lo <= hi <= 1 (a metric in [0, 1]), k in [0.1, 100] per nat, L0 within 2 nats of the
runs' losses.  No torch at import.

Its figure, ``accuracy_vs_loss.png`` (``figures``, drawn by report/figs.py with or without the
section, from the report's downstream table of the runs' eval.json): each accuracy-like metric
against each run's final loss, a marker per width shape.
"""

from __future__ import annotations

import math
import re

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.core.tables import Col, Table
from depthwidth.fit.table import last_points

SECTION = "downstream"
OPTIONS = ("metric",)


def section(ctx) -> dict:
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


ACCURACY = ("acc", "acc_norm", "exact_match")  # metrics in [0, 1], higher is better


def figures(fit, tables=None, **_) -> dict:
    """{"accuracy_vs_loss": the downstream accuracy figure (core/figures.py ``Figure``) or why it is not
    drawn}: each accuracy-like ``METRIC:TASK`` (``ACCURACY``) of each finished run's final checkpoint
    against its held-out loss, a colour per metric and a marker per width shape: whether a lower loss
    buys the same downstream accuracy whatever the shape.  Drawn from the runs' eval.json whether or
    not the fit has this section: ``tables``, the report's tables, whose ``downstream`` table (one row
    per finished run: its shape, loss and ``METRIC:TASK`` columns; report/downstream.py) it reads."""
    from depthwidth.core.figures import Figure, Panel, Series
    from depthwidth.model.shapes import FAMILIES, LABELS

    t = (tables or {}).get("downstream")
    rows = t.rows if t is not None else []
    acc = [c.key for c in (t.cols if t is not None else []) if ":" in c.key]
    acc = [c for c in acc if c.split(":", 1)[0].split(",", 1)[0] in ACCURACY]
    if not any(r.get(c) is not None and r["loss"] is not None for c in acc for r in rows):
        why = "no accuracy (acc, acc_norm, exact_match) in the finished runs' eval.json (dw eval NAME --tasks ...)"
        return {"accuracy_vs_loss": why}
    markers = dict(zip(FAMILIES, "osD^v"))
    title = "Downstream accuracy vs held-out loss"
    panel = Panel(xlabel="held-out loss (nats/token)", ylabel="accuracy", title=title, legend_fontsize=7)
    shapes_seen = set()
    for i, c in enumerate(acc):
        for r in rows:
            if r.get(c) is not None and r["loss"] is not None:
                panel.series.append(
                    Series("plot", r["loss"], r[c], markers.get(r["shape"], "o"), {"color": f"C{i}", "ms": 5})
                )
                shapes_seen.add(r["shape"])
        panel.series.append(Series("plot", [], [], "o", {"color": f"C{i}", "label": c}))  # the metric's legend entry
    for s in sorted(shapes_seen, key=lambda s: FAMILIES.index(s) if s in FAMILIES else 99):
        panel.series.append(Series("plot", [], [], markers.get(s, "o"), {"color": "0.4", "label": LABELS.get(s, s)}))
    caption = "final checkpoints (dw eval); colour: METRIC:TASK, marker: shape"
    return {"accuracy_vs_loss": Figure("accuracy_vs_loss.png", title, caption, (6.4, 4.2), [panel])}


# -- The two steps (the statistics) ----------------------------------------------------------------


NAMES = ("lo", "hi", "k", "L0")
METRIC = re.compile(r"^[A-Za-z_][\w.,-]*:[\w.-]+$")  # METRIC:TASK, as dw eval names run-table columns
K_BOUNDS = (0.1, 100.0)
L0_MARGIN = 2.0  # nats beyond the runs' losses that L0 may lie
MIN_RUNS = 5  # the sigmoid has 4 parameters: one more run than that to have a residual at all


def check_metric(spec: str | None, columns) -> str | None:
    """``--metric``: a ``METRIC:TASK`` column of the run table; bad input naming the ones there are."""
    if spec is None:
        return None
    have = sorted(c for c in map(str, columns) if METRIC.match(c))
    if not METRIC.match(str(spec)) or spec not in have:
        return _no_metric(spec, have)
    return str(spec)


def _no_metric(spec, have: list[str]):
    raise bad(
        "--metric",
        spec,
        "a METRIC:TASK column of the run table (dw eval writes them): " + (", ".join(have[:12]) or "none yet"),
    )


def sigmoid(p: np.ndarray, L) -> np.ndarray:
    """The metric at losses ``L``: ``p`` (4,) and L (n,) give (n,); p (B, 4) gives (B, n), with L (n,)
    shared or (B, n) row by row."""
    p = np.asarray(p, dtype=float)
    lo, hi, k, L0 = (p[..., i : i + 1] for i in range(4))
    with np.errstate(over="ignore"):
        return lo + (hi - lo) / (1.0 + np.exp(k * (np.asarray(L, dtype=float) - L0)))


def fit_sigmoid(L: np.ndarray, y: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """Least-squares sigmoid of ``y`` on ``L`` within the bounds, from a small grid of starts (or from
    ``start`` alone: a bootstrap replicate starts at the full data's fit)."""
    from scipy.optimize import least_squares

    L, y = np.asarray(L, dtype=float), np.asarray(y, dtype=float)
    lo_b = np.array([0.0, 0.0, K_BOUNDS[0], L.min() - L0_MARGIN])
    hi_b = np.array([1.0, 1.0, K_BOUNDS[1], L.max() + L0_MARGIN])
    best, cost = None, math.inf
    span = max(float(np.ptp(L)), 1e-3)
    grid = [
        [min(y.min(), 0.99), max(y.max(), 0.01), k, L0]
        for L0 in np.quantile(L, [0.2, 0.5, 0.8])
        for k in (1.0 / span, 4.0 / span, 16.0 / span)
    ]
    for x0 in [start] if start is not None else grid:
        x0 = np.clip(x0, lo_b + 1e-9, hi_b - 1e-9)
        r = least_squares(lambda p: sigmoid(p, L) - y, x0, bounds=(lo_b, hi_b), method="trf")
        if r.cost < cost:
            best, cost = r.x, r.cost
    p = np.asarray(best, dtype=float)
    if p[0] > p[1]:  # lo <= hi: the same curve read the other way has k < 0, outside the bounds
        p[0] = p[1] = float(np.mean(y))
    return p


def bootstrap_sigmoid(L: np.ndarray, y: np.ndarray, B: int, seed: int = 0) -> np.ndarray:
    """(B, 4) sigmoids refitted to the fitted curve plus fresh noise, each from the full data's fit.

    The noise is Gaussian at the residuals' scale (n - 4 degrees of freedom), each replicate's scale
    drawn from its chi-squared distribution, as fit/boot.py's noise bootstrap does for the loss law:
    resampling the runs (pairs) instead held the planted parameters in 88% of 95% intervals
    on 24 runs (tests/test_downstream.py's worlds), the small-sample undercoverage of a percentile
    bootstrap of a 4-parameter curve."""
    rng = np.random.default_rng(seed)
    p = fit_sigmoid(L, y)
    fitted = sigmoid(p, L)
    df = max(len(L) - len(NAMES), 1)
    sd = math.sqrt(float(((y - fitted) ** 2).sum()) / df)
    out = np.empty((B, 4))
    for b in range(B):
        s_b = sd * math.sqrt(df / rng.chisquare(df))
        out[b] = fit_sigmoid(L, fitted + rng.normal(0.0, s_b, len(L)), p)
    return out


def per_run(clean, metric: str):
    """(final loss, metric, run names, rows of the run's final point) per run that has the metric."""
    last = last_points(clean[clean[metric].notna()] if metric in clean else clean.iloc[:0])
    return (
        np.asarray(last["loss"], dtype=float),
        np.asarray(last[metric], dtype=float),
        [str(r) for r in last["run"]],
        last,
    )


def predict_metric(
    reps: np.ndarray, noise_sd: float, loss: np.ndarray, level: float, seed: int = 0
) -> dict[str, np.ndarray]:
    """Metric intervals of targets whose losses are ``loss`` (B1, n) step-1 samples (each a
    replicate plus a new run's noise): each sigmoid replicate paired with one loss sample."""
    rng = np.random.default_rng(seed)
    B = max(len(reps), len(loss))
    i = rng.integers(0, len(reps), B)
    j = rng.integers(0, len(loss), B)
    m = sigmoid(reps[i], loss[j])  # (B, n): replicate i[b] at loss sample j[b]
    noisy = m + rng.normal(0.0, noise_sd, m.shape)
    q = [50 * (1 - level), 50 * (1 + level)]
    return {"ci": np.percentile(m, q, axis=0), "pi": np.clip(np.percentile(noisy, q, axis=0), 0.0, 1.0)}


def downstream(clean, metric: str, B: int, level: float, seed: int, holdout: dict | None = None) -> dict:
    """fit.json's ``downstream`` section: step 2 on every run with the metric, and with a hold-out
    (``fit/holdout.py``'s, carrying its held-out runs' step-1 samples) both steps predicted."""
    L, y, runs, _ = per_run(clean, metric)
    if len(L) < MIN_RUNS:
        raise bad("--metric", metric, f"a metric measured on at least {MIN_RUNS} runs ({len(L)} have it: dw eval them)")
    p = fit_sigmoid(L, y)
    resid = y - sigmoid(p, L)
    noise_sd = float(math.sqrt((resid**2).sum() / max(len(L) - len(NAMES), 1)))
    out: dict = {
        "metric": metric,
        "form": "lo + (hi - lo) / (1 + exp(k (L - L0)))",
        "runs": len(L),
        "params": dict(zip(NAMES, map(float, p))),
        "noise_sd": noise_sd,
        "rmse": float(math.sqrt(np.mean(resid**2))),
        "loss_range": [float(L.min()), float(L.max())],
        "level": level,
    }
    if B > 0:
        reps = bootstrap_sigmoid(L, y, B, seed)
        q = [50 * (1 - level), 50 * (1 + level)]
        out["ci"] = {n: [float(a), float(b)] for n, a, b in zip(NAMES, *np.percentile(reps, q, axis=0))}
    if holdout is not None and holdout.get("_samples") is not None:
        out["holdout"] = _holdout(clean, metric, holdout, B, level, seed)
    return out


def _holdout(clean, metric: str, h: dict, B: int, level: float, seed: int) -> dict:
    """Step 2 refitted on the runs the loss law was fitted on; the held-out runs' metric predicted
    from their step-1 samples (``h["_samples"]``: (B, points) noisy losses, ``h["_runs"]``)."""
    held = set(h["_runs"])
    L, y, runs, _ = per_run(clean, metric)
    fit_mask = np.array([r not in held for r in runs])
    if fit_mask.sum() < MIN_RUNS:
        return {"note": f"fewer than {MIN_RUNS} fitted runs have {metric}: no hold-out of it"}
    Lf, yf = L[fit_mask], y[fit_mask]
    p = fit_sigmoid(Lf, yf)
    resid = yf - sigmoid(p, Lf)
    noise_sd = float(math.sqrt((resid**2).sum() / max(len(Lf) - len(NAMES), 1)))
    reps = bootstrap_sigmoid(Lf, yf, max(B, 50), seed) if B else p[None, :]
    points = []
    samples, point_runs = h["_samples"], np.asarray(h["_runs"])
    measured = dict(zip(runs, y))
    for r in dict.fromkeys(point_runs):  # each held-out run's last point (its final loss)
        if r not in measured:
            continue
        col = int(np.flatnonzero(point_runs == r)[-1])
        pr = predict_metric(reps, noise_sd, samples[:, [col]], level, seed)
        pred = float(sigmoid(p, [float(np.median(samples[:, col]))])[0])
        pi = [float(pr["pi"][0, 0]), float(pr["pi"][1, 0])]
        points.append(
            {
                "run": str(r),
                "measured": float(measured[r]),
                "predicted": pred,
                "error": pred - float(measured[r]),
                "pi": pi,
                "inside": bool(pi[0] <= measured[r] <= pi[1]),
                "extrapolated": bool(np.median(samples[:, col]) < Lf.min()),
            }
        )
    err = np.array([q["error"] for q in points]) if points else np.zeros(0)
    return {
        "split": h["split"]["name"],
        "fitted_runs": int(fit_mask.sum()),
        "points": points,
        "inside": int(sum(q["inside"] for q in points)),
        "rmse": float(math.sqrt(np.mean(err**2))) if len(err) else None,
    }
