"""Gradient persistence: tau(W) from the runs' per-layer gradient-norm profiles (probes.jsonl),
and D_crit by the 1/e rule per width beside the law's (the statistics: the last section).
Asked for by the data, not by a flag: a sweep whose runs wrote probes.

Fitted on the runs this fit is about: those ``--where`` kept, less failed and diverged runs (their
last profiles are not training's) -- the runs the report's tau(W) figure draws.  Its warnings join
the fit's (fit.json ``warnings``).  Its numbers are shown where they are read beside the law's: the
fit table's tau(W) rows and the D_crit table's 1/e column (report/fit_view.py) and its own figures
(``figures``, drawn by report/figs.py from the report's probe records): the per-layer gradient
profiles with their exponential fits (``grad_profiles.png``) and tau(W) (``tau_vs_width.png``); it has
no table of its own.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.defaults import default

SECTION = "gradient_persistence"
OPTIONS = ("probe_step", "bootstrap", "level", "seed")
DROPPED = ("failed", "diverged")  # run statuses whose probe profiles tau(W) leaves out


def section(ctx) -> dict | None:
    from depthwidth.track.run_source import probe_profiles

    df, o = ctx.table, ctx.opts
    kept = set(np.asarray(df["run"]).astype(str)) if "run" in df else set()
    profs = [p for p in probe_profiles(ctx.sweep_dir) if p["run"] in kept and p.get("status") not in DROPPED]
    if not profs:
        return None
    gp = persistence(
        profs,
        step=o.probe_step,
        B=o.bootstrap,
        level=o.level,
        seed=o.seed,
        law=ctx.chk.law,
        law_values=ctx.fr.params,
        law_samples=ctx.iv.samples,
    )
    ctx.doc["warnings"] += gp.pop("warnings", [])
    return gp


def tables(fit) -> dict:
    """None of its own: its numbers sit in the fit table and the D_crit table (report/)."""
    return {}


FIGURE_STEP = 1000  # the probe step whose profiles the figures draw (the paper measures around step 1000)


def _tau_fit(g):
    """(tau, log-intercept at the top layer) of log g = a - d/tau, d = distance below the top: the
    dashed curve of the gradient-profile figure."""
    g = np.asarray(g, float)
    d = (len(g) - 1) - np.arange(len(g))
    ok = np.isfinite(g) & (g > 0)
    if ok.sum() < 2:
        return None, None
    b, a = np.polyfit(d[ok], np.log(g[ok]), 1)
    return (-1.0 / b if b < 0 else math.inf), a


def drawn_profiles(probes) -> list[dict]:
    """The profiles the figures draw: per healthy uniform run of depth >= 2 (``probes``: the report's
    probe records, ``{run, width, shape, status, probes}``), its per-layer gradient norms at the probe
    step nearest ``FIGURE_STEP``, with tau and the log-intercept of its exponential fit."""
    out = []
    for pr in probes or []:
        if pr.get("status") in DROPPED or pr.get("shape") not in (None, "uniform") or not pr.get("width"):
            continue
        rec = record_at(pr.get("probes") or [], FIGURE_STEP)
        if rec is None or len(rec["grad_norm"]["block"]) < 2:
            continue
        tau, a = _tau_fit(rec["grad_norm"]["block"])
        out.append(
            {
                "run": pr["run"],
                "width": int(pr["width"]),
                "depth": len(rec["grad_norm"]["block"]),
                "g": rec["grad_norm"]["block"],
                "step": rec.get("step"),
                "tau": tau,
                "a": a,
            }
        )
    return out


def tau_points(fit, probes=None) -> list[dict]:
    """The (run, width, tau) points of the tau(W) figure: with a fit.json, exactly the runs its tau(W)
    law was fitted on (``dw fit --where`` and all); without one, every healthy uniform profile of
    ``probes`` (the report's probe records: ``drawn_profiles``, read only then)."""
    gp = fit.sections.get(SECTION) if fit else None
    runs = gp.get("runs") if gp and gp.get("tau_law") else None
    pts = runs if runs is not None else drawn_profiles(probes)
    return [
        {"run": p["run"], "width": p["width"], "tau": p["tau"]}
        for p in pts
        if p["tau"] is not None and math.isfinite(p["tau"]) and p["tau"] > 0
    ]


def figures(fit, probes=None, **_) -> dict:
    """{"grad_profiles": the gradient-profile figure, "tau_vs_width": the tau(W) figure} (core/figures.py
    ``Figure``s, or why one is not drawn), from the report's probe records (``probes``; see
    ``drawn_profiles``) and the fit's tau(W) law."""
    return {"grad_profiles": _grad_profiles(drawn_profiles(probes)), "tau_vs_width": _tau_vs_width(fit, probes)}


def _viridis(n: int) -> list[dict]:
    """``n`` colours along the viridis map (a ``Series``' colour), as the report's other figures pick them."""
    return [{"cmap": "viridis", "at": x} for x in (np.linspace(0.05, 0.85, n) if n > 1 else [0.4])]


def _grad_profiles(prof: list[dict]):
    """Per width (four at most, spread over the range), each run's per-layer gradient norms against
    the layer, log y, with its fitted exponential decay from the top layer dashed."""
    from depthwidth.core.figures import Figure, Panel, Series

    if not prof:
        return "no probes.jsonl with per-layer gradient norms of uniform runs of depth >= 2"
    widths = sorted({p["width"] for p in prof})
    if len(widths) > 4:
        widths = [widths[i] for i in np.linspace(0, len(widths) - 1, 4).round().astype(int)]
    n = len(widths)
    rows, cols = (1, n) if n <= 3 else (2, 2)
    panels = []
    for k, w in enumerate(widths):
        panel = Panel(
            xlabel="layer l (1 = bottom)",
            ylabel="‖grad_l‖ (gradient L2 norm)" if k % cols == 0 else "",
            title=f"W = {w}",
            yscale="log",
            legend_fontsize=7,
        )
        ps = sorted((p for p in prof if p["width"] == w), key=lambda p: p["depth"])
        for p, col in zip(ps, _viridis(len(ps))):
            layers = np.arange(1, p["depth"] + 1)
            tau = p["tau"]
            lab = f"L={p['depth']}, τ=" + ("∞" if tau is None or not math.isfinite(tau) else f"{tau:.2g}")
            panel.series.append(Series("plot", layers, p["g"], "o-", {"ms": 3, "color": col, "lw": 1, "label": lab}))
            if tau is not None and math.isfinite(tau):
                d = p["depth"] - layers
                panel.series.append(Series("plot", layers, np.exp(p["a"] - d / tau), "--", {"color": col, "lw": 1}))
        panels.append(panel)
    steps = sorted({p["step"] for p in prof if p["step"] is not None})
    title = "Per-layer gradient norms with fitted exp(−(L−l)/τ)"
    caption = (
        f"solid: measured at the probe step nearest {FIGURE_STEP}; dashed: least-squares exponential decay "
        "from the top layer"
    )
    return Figure(
        "grad_profiles.png",
        title,
        caption,
        (6.4, 3.6 * rows),
        panels,
        grid=(rows, cols),
        sharey=True,
        suptitle=title + (f", step {steps[-1]}" if len(steps) == 1 else ""),
    )


def _tau_vs_width(fit, probes):
    """tau per run against W, log-log, with the fit's own law and interval over the same points (a
    least-squares line without one) and the paper's exponent through their geometric mean."""
    from depthwidth.core.figures import Figure, Panel, Series
    from depthwidth.fit.papers import DD_TAU_EXPONENT

    prof = tau_points(fit, probes)
    ws = sorted({p["width"] for p in prof})
    if len(ws) < 2:
        return "finite τ at fewer than two widths"
    W = np.array([p["width"] for p in prof], float)
    tau = np.array([p["tau"] for p in prof], float)
    gp = ((fit.sections.get(SECTION) if fit else None) or {}).get("tau_law")
    pexp, k = np.polyfit(np.log(W), np.log(tau), 1)
    ci = None
    if gp and gp.get("p") is not None:  # the fit's own law and interval, over the same points
        pexp, k, ci = gp["p"], math.log(gp["prefactor"]), gp.get("p_ci")
    ww = np.geomspace(W.min() / 1.1, W.max() * 1.1, 50)
    lab = f"fit: τ ∝ W^{pexp:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    gm_w, gm_t = math.exp(np.log(W).mean()), math.exp(np.log(tau).mean())
    title = "Gradient persistence length vs width"
    panel = Panel(
        [
            Series("scatter", W, tau, style={"color": "C0", "zorder": 3, "label": "runs (τ per profile)"}),
            Series("plot", ww, np.exp(k) * ww**pexp, "-", {"color": "C0", "label": lab}),
            Series(
                "plot",
                ww,
                gm_t * (ww / gm_w) ** DD_TAU_EXPONENT,
                "--",
                {"color": "C3", "label": f"paper: τ ∝ W^{DD_TAU_EXPONENT} (through our mean)"},
            ),
        ],
        xlabel="width W (hidden units)",
        ylabel="gradient persistence τ (layers)",
        title=title,
        xscale="log",
        yscale="log",
        plain_ticks=True,
    )
    caption = (
        f"log-log; the paper's exponent {DD_TAU_EXPONENT} drawn through the geometric mean of our points "
        "(its prefactor is not published)"
    )
    return Figure("tau_vs_width.png", title, caption, (6.4, 4.2), [panel])


# -- tau(W) and D_crit by the 1/e rule from the profiles (the statistics) --------------------------
# Gradient persistence from probes.jsonl (docs/science.md §1).
#
# Model: ||grad_l|| ~ ||grad_top|| · exp(-d_l / tau(W)), d_l = distance of layer
# l below the top layer (0 at the top).  Per run, tau = -1/slope of the least-
# squares line of log ||grad_l|| on d_l at the probe step nearest ``step``
# (the paper measures around step 1000), with its R².  Across runs,
# log tau = log k + p·log W gives tau(W) ∝ W^p with a run-bootstrap interval on p
# (the paper: p = 0.44, R² = 0.98).
#
# D_crit by the 1/e rule, read directly off each profile without the
# exponential model, as a *depth* (docs/science.md §4, §5): the number of
# layers of a network whose bottom layer sits at 1/e of the top layer's
# gradient, i.e. 1 + the distance below the top at which ||grad_l||/||grad_top||
# first falls to 1/e (log-linear interpolation between layers).  A 16-layer
# network whose bottom layer is at 1/e has D_crit = 16; under the exponential
# model D_crit = tau + 1.  This is the quantity the law's D_crit(W) is (a
# depth), so the two are compared directly.  Runs whose bottom layer is still
# above 1/e are censored (D_crit > depth; reported as the depth).


def record_at(probes: list[dict], step: int):
    """The probe record nearest ``step`` (the earlier of two as near) with per-layer gradient norms,
    else None: the profile tau(W) is fitted to here, and the report's gradient-profile figure draws."""
    rec = [
        p
        for p in probes
        if isinstance(p, dict) and isinstance(p.get("grad_norm"), dict) and p["grad_norm"].get("block")
    ]
    if not rec:
        return None
    return min(rec, key=lambda p: (abs(float(p.get("step", 0)) - step), float(p.get("step", 0))))


def profile_fit(g) -> dict:
    """tau, R² and D_crit by the 1/e rule (a depth: 1 + the crossing's distance below the top) for one
    profile (index 0 = bottom layer)."""
    g = np.asarray(g, dtype=float)
    L = len(g)
    d = (L - 1) - np.arange(L)  # distance below the top layer
    ok = np.isfinite(g) & (g > 0)
    out = {"layers": L, "tau": None, "r2": None, "dcrit_1e": None, "censored": None}
    if ok.sum() >= 2:
        x, y = d[ok].astype(float), np.log(g[ok])
        A = np.vstack([x, np.ones_like(x)]).T
        (slope, icpt), *_ = np.linalg.lstsq(A, y, rcond=None)
        yhat = A @ np.array([slope, icpt])
        ss_tot = float(((y - y.mean()) ** 2).sum())
        out["r2"] = 1.0 - float(((y - yhat) ** 2).sum()) / ss_tot if ss_tot > 0 else None
        out["tau"] = float(-1.0 / slope) if slope < 0 else math.inf
    if ok[L - 1]:
        lr = np.full(L, np.nan)
        lr[ok] = np.log(g[ok] / g[L - 1])
        lr_by_d = lr[::-1]  # index = distance below top
        cross = None
        for k in range(1, L):
            a, b = lr_by_d[k - 1], lr_by_d[k]
            if not (np.isfinite(a) and np.isfinite(b)):
                continue
            if b <= -1.0:
                cross = (k - 1) + ((-1.0 - a) / (b - a) if b != a else 0.0)
                break
        out["dcrit_1e"] = 1.0 + float(cross) if cross is not None else float(L)
        out["censored"] = cross is None
    return out


def persistence(
    profiles: list[dict],
    step: int = 1000,
    B: int = 1000,
    level: float = default("level"),
    seed: int = 0,
    law=None,
    law_values: dict | None = None,
    law_samples: dict | None = None,
) -> dict:
    """Per-run tau fits, tau(W) ∝ W^p with a run-bootstrap interval, D_crit by 1/e per width."""
    runs = []
    shaped = 0
    for pr in profiles:
        rec = record_at(pr.get("probes") or [], step)
        if rec is None or pr.get("width") is None:
            continue
        if pr.get("shape") not in (None, "uniform"):  # tau(W) is a law of uniform width W
            shaped += 1
            continue
        f = profile_fit(rec["grad_norm"]["block"])
        runs.append(
            {"run": pr["run"], "width": float(pr["width"]), "depth": pr.get("depth"), "step": rec.get("step"), **f}
        )
    out: dict = {"probe_step": step, "runs": runs, "warnings": []}
    if shaped:
        out["warnings"].append(f"{shaped} run(s) with a non-uniform width shape left out of tau(W)")
    if not runs:
        out["warnings"].append("no probes.jsonl with per-layer gradient norms in this sweep")
        return out
    fin = [r for r in runs if r["tau"] is not None and math.isfinite(r["tau"]) and r["tau"] > 0]
    nd = [r["run"] for r in runs if r["tau"] is not None and not math.isfinite(r["tau"])]
    if nd:
        out["warnings"].append(
            f"{len(nd)} run(s) show no decay of gradient norm with distance from the top (tau = inf)"
        )
    lw = np.log([r["width"] for r in fin]) if fin else np.array([])
    lt = np.log([r["tau"] for r in fin]) if fin else np.array([])
    if len(set(np.round(lw, 9))) >= 2:
        p, k, r2 = _loglog(lw, lt)
        rng = np.random.default_rng(seed)
        ps = []
        for _ in range(B):
            i = rng.integers(0, len(lw), len(lw))
            if len(set(np.round(lw[i], 9))) >= 2:
                ps.append(_loglog(lw[i], lt[i])[0])
        ci = None  # B = 0 (--bootstrap 0): no interval at all
        if B > 0 and len(ps) >= 2:
            lo, hi = np.percentile(ps, [50 * (1 - level), 50 * (1 + level)])
            ci = [float(lo), float(hi)]
        out["tau_law"] = {
            "p": p,
            "p_ci": ci,
            "prefactor": float(math.exp(k)),
            "r2": r2,
            "runs": len(fin),
            "widths": len(set(np.round(lw, 9))),
        }
        if len(set(np.round(lw, 9))) < 3:
            out["warnings"].append("tau(W) fitted on fewer than 3 widths: p is barely constrained")
        if ci is not None and ci[0] <= 0 <= ci[1]:
            out["warnings"].append(f"the interval of p [{ci[0]:.3g}, {ci[1]:.3g}] contains 0")
    else:
        out["warnings"].append("tau(W) needs finite tau at two or more widths")
    by_w: dict = {}
    for r in runs:
        by_w.setdefault(int(r["width"]), []).append(r)
    table = {}
    for w, rs in sorted(by_w.items()):
        vals = [r["dcrit_1e"] for r in rs if r["dcrit_1e"] is not None and not r["censored"]]
        row = {
            "profiles": float(np.median(vals)) if vals else None,
            "runs": len(rs),
            "censored": sum(1 for r in rs if r["censored"]),
        }
        if law is not None and "dcrit" in law.options and law_values is not None:
            row["law"] = float(law.dcrit(law_values, [w])[0])
            if law_samples:
                s = law.dcrit(law_samples, [w])[:, 0]
                s = s[np.isfinite(s)]
                if len(s) >= 2:
                    lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
                    row["law_ci"] = [float(lo), float(hi)]
        table[str(w)] = row
    out["dcrit_by_width"] = table
    return out


def _loglog(x, y):
    A = np.vstack([x, np.ones_like(x)]).T
    (p, k), *_ = np.linalg.lstsq(A, y, rcond=None)
    yhat = A @ np.array([p, k])
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - yhat) ** 2).sum()) / ss if ss > 0 else None
    return float(p), float(k), r2
