"""Gradient persistence: tau(W) from the runs' per-layer gradient-norm profiles (probes.jsonl),
and D_crit by the 1/e rule per width beside the law's (the statistics: fit/gradient_persistence.py).
Asked for by the data, not by a flag: a sweep whose runs wrote probes.

Fitted on the runs this fit is about: those ``--where`` kept, less failed and diverged runs (their
last profiles are not training's) -- the runs the report's tau(W) figure draws.  Its warnings join
the fit's (fit.json ``warnings``).  Its numbers are shown where they are read beside the law's: the
fit table's tau(W) rows and the D_crit table's 1/e column (report/fit_view.py) and its own tau(W)
figure (``figures``, drawn by report/figs.py); it has no table of its own.
"""

from __future__ import annotations

import math

SECTION = "gradient_persistence"
OPTIONS = ("probe_step", "bootstrap", "level", "seed")
DROPPED = ("failed", "diverged")  # run statuses whose probe profiles tau(W) leaves out


def wanted(ctx) -> bool:
    return ctx.sweep_dir is not None


def section(ctx) -> dict | None:
    import numpy as np

    from depthwidth.fit.gradient_persistence import persistence
    from depthwidth.track.table import probe_profiles

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


def tau_points(fit, profiles=None) -> list[dict]:
    """The (run, width, tau) points of the tau(W) figure: with a fit.json, exactly the runs its tau(W)
    law was fitted on (``dw fit --where`` and all); without one, every healthy uniform profile
    (``profiles()``: the report's, read only then)."""
    gp = fit.sections.get(SECTION) if fit else None
    runs = gp.get("runs") if gp and gp.get("tau_law") else None
    pts = runs if runs is not None else (profiles() if profiles is not None else [])
    return [
        {"run": p["run"], "width": p["width"], "tau": p["tau"]}
        for p in pts
        if p["tau"] is not None and math.isfinite(p["tau"]) and p["tau"] > 0
    ]


def figures(fit, profiles=None, **_) -> dict:
    """{"tau_vs_width": the tau(W) figure (core/figures.py ``Figure``) or why it is not drawn}: tau per
    run against W, log-log, with the fit's own law and interval over the same points (a least-squares
    line without one) and the paper's exponent through their geometric mean.  ``profiles``: see
    ``tau_points``."""
    import numpy as np

    from depthwidth.core.figures import Figure, Panel, Series
    from depthwidth.fit.papers import DD_TAU_EXPONENT

    prof = tau_points(fit, profiles)
    ws = sorted({p["width"] for p in prof})
    if len(ws) < 2:
        return {"tau_vs_width": "finite τ at fewer than two widths"}
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
    return {"tau_vs_width": Figure("tau_vs_width.png", title, caption, (6.4, 4.2), [panel])}
