"""The papers' numbers beside the sweep's: D_crit at the sweep's widths (law, gradient profiles, the
paper's kappa·ln W), D_crit extrapolated to production models, and published losses of the
configurations a sweep shares with the papers (docs/science.md §1)."""

from __future__ import annotations

import math
from depthwidth.fit.result import FitDocument
from depthwidth.core.tables import Col, Table, ci_pair
from depthwidth.fit.papers import DD_DCRIT, DD_KAPPA
from depthwidth.report.document import DONE, is_uniform, paper_loss


def dcrit_tables(fit: FitDocument | None, widths=(), probes=()) -> dict:
    """{"dcrit_widths", "dcrit_models"}: D_crit from the law (and 1/e gradient profiles) at the sweep's
    ``widths`` and the fit's, and extrapolated to production models, beside the paper's.  ``probes``
    (the runs' probes.jsonl records) give the profiles' D_crit when the fit carries none."""
    derived, sections = (fit.derived, fit.sections) if fit is not None else ({}, {})
    dc = derived.get("dcrit") or {}
    gp = (sections.get("gradient_persistence") or {}).get("dcrit_by_width") or {}
    prof = gp or _profile_dcrit(probes)
    widths = sorted(set(widths) | {int(w) for w in (dc.get("widths") or {})} | {int(w) for w in prof})
    rows = []
    for w in widths:
        v = (dc.get("widths") or {}).get(str(w)) or {}
        lo, hi = ci_pair(v.get("ci"))
        p = prof.get(str(w)) or {}
        rows.append(
            {
                "width": w,
                "law": v.get("value"),
                "ci_lo": lo,
                "ci_hi": hi,
                "profiles": p.get("profiles"),
                "censored": f"{p['censored']}/{p['runs']}" if "censored" in p else None,
                "paper": DD_KAPPA * math.log(w) if w > 1 else None,
            }
        )
    cols = [
        Col("width", "width"),
        Col("law", "D_crit measured (law)", "{:.3g}"),
        Col("ci_lo", "CI lo", "{:.3g}"),
        Col("ci_hi", "CI hi", "{:.3g}"),
        Col("profiles", "D_crit measured (1/e, profiles)", "{:.3g}"),
        Col("censored", "censored"),
        Col("paper", f"D_crit paper ({DD_KAPPA:g}·ln W)", "{:.3g}"),
    ]
    t = Table(
        "dcrit_widths",
        f"D_crit at the sweep's widths (law form: {dc.get('formula', 'no D_crit in the fitted law')})",
        cols,
        rows,
    )
    t.notes.append(
        "1/e: D_crit as a depth, like the law's: the depth of a network whose bottom layer's gradient norm "
        "is 1/e of the top layer's (1 + the distance below the top where a run's profile falls to 1/e); "
        "censored = runs whose bottom layer never got there (D_crit > depth)"
    )
    mrows = []
    for m, paper in DD_DCRIT.items():
        v = (dc.get("reference") or {}).get(m) or {}
        from depthwidth.fit.derived import REFERENCE_MODELS

        w, d = REFERENCE_MODELS[m]
        lo, hi = ci_pair(v.get("dcrit_ci"))
        mrows.append(
            {
                "model": m,
                "width": w,
                "depth": d,
                "measured": v.get("dcrit"),
                "ci_lo": lo,
                "ci_hi": hi,
                "depth_over_dcrit": v.get("depth_over_dcrit"),
                "paper": paper,
                "paper_ratio": d / paper,
            }
        )
    mcols = [
        Col("model", "model"),
        Col("width", "width"),
        Col("depth", "depth used"),
        Col("measured", "D_crit measured", "{:.3g}"),
        Col("ci_lo", "CI lo", "{:.3g}"),
        Col("ci_hi", "CI hi", "{:.3g}"),
        Col("depth_over_dcrit", "depth/D_crit measured", "{:.3g}"),
        Col("paper", "D_crit paper", "{:.3g}"),
        Col("paper_ratio", "depth/D_crit paper", "{:.3g}"),
    ]
    mt = Table("dcrit_models", "D_crit extrapolated to production models", mcols, mrows)
    if not dc:
        mt.notes.append("measured column empty: the fit has no D_crit (dw fit NAME --law depth-delusion)")
    mt.notes.append(f"paper: kappa = {DD_KAPPA:g} from widths ≤ 6144; an extrapolation over two orders of magnitude")
    return {"dcrit_widths": t, "dcrit_models": mt}


def _profile_dcrit(probes) -> dict:
    """D_crit by the 1/e rule per width straight from probes (when no fit.json carries it)."""
    from depthwidth.fit.gradient_persistence import persistence

    if not probes:
        return {}
    return persistence(probes, step=1000, B=0).get("dcrit_by_width") or {}


def paper_table(runs) -> Table:
    rows = []
    for r in runs:
        pl, pp, src = paper_loss(r)
        if pl is None:
            continue
        ref = r.get("ref") or {}
        cfg = f"{r['depth']}L×{r['width']}" + ("" if is_uniform(r) else f" {r['shape']}")
        rows.append(
            {
                "config": cfg,
                "note": ref.get("note") or ref.get("scale"),
                "paper_loss": pl,
                "measured_loss": r["loss"] if r["state"] in DONE else None,
                "delta": (r["loss"] - pl) if r["state"] in DONE and r["loss"] is not None else None,
                "paper_params": pp,
                "measured_params": r["params"],
                "state": r["state"],
                "from": src,
                "run": r["run"],
            }
        )
    cols = [
        Col("config", "config"),
        Col("note", "note"),
        Col("paper_loss", "loss paper", "{:.3f}"),
        Col("measured_loss", "loss measured", "{:.4f}"),
        Col("delta", "measured − paper", "{:+.4f}"),
        Col("paper_params", "params paper", "{:.4g}"),
        Col("measured_params", "params measured", "{:.4g}"),
        Col("state", "state"),
        Col("from", "paper value from"),
    ]
    t = Table("paper", "Published numbers beside ours (configurations that match)", cols, rows)
    t.notes.append(
        "paper losses are the papers' (training loss on SlimPajama / DCLM); ours are held-out on this sweep's data"
    )
    if not rows:
        t.notes.append("no run of this sweep matches a published configuration")
    return t
