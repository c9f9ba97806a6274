"""The report's "FLOPs to match uniform" section (fit/match.py) and its figure.

Where it comes from: ``ROOT/NAME/match.json`` when ``dw fit NAME --match``
wrote one; otherwise it is computed here from the report's runs (each run's
final budget, 200 bootstrap replicates) whenever the uniform shape and at
least one other shape have two or more sizes.  Otherwise the section says what
is missing.  No torch here; matplotlib only inside the figure.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.fit.match import NEEDS, PAPER_MATCH, final_points, flops_to_match
from depthwidth.core.tables import Col, Table
from depthwidth.report.document import DONE, Data, is_uniform
from depthwidth.track.table import mean_width

MATCH_FILE = "match.json"
REPORT_BOOTSTRAP = 200


CI = "[{0[0]:.3f}, {0[1]:.3f}]"  # a [lo, hi] row value shown in one cell


def _ci(c):
    """[lo, hi] for a row; an open upper end (replicates that never reach the loss) is inf."""
    if not isinstance(c, (list, tuple)) or len(c) != 2 or c[0] is None:
        return None
    return [c[0], math.inf if c[1] is None else c[1]]


def run_frame(data: Data):
    """One row per finished run (its final budget) with what fit.match reads."""
    import pandas as pd

    rows = []
    for r in data.runs:
        if r["state"] not in DONE or r.get("loss") is None:
            continue
        mw = r.get("mean_width")
        if mw is None:
            mw = mean_width(r.get("widths"), r["width"] if is_uniform(r) else None)
        rows.append(
            {
                "run": r["run"],
                "shape": r["shape"] or "uniform",
                "loss": r["loss"],
                "flops": r.get("flops"),
                "depth": r["depth"],
                "width": r["width"],
                "mean_width": mw,
                "kv_bytes_per_token": r.get("kv_bytes_per_token"),
            }
        )
    return pd.DataFrame(
        rows, columns=["run", "shape", "loss", "flops", "depth", "width", "mean_width", "kv_bytes_per_token"]
    )


def load_match(data: Data) -> tuple[dict | None, str]:
    """(the match document or None, where it came from / why it is absent)."""
    d = data.source.get("dir")
    f = Path(d) / MATCH_FILE if d else None
    if f is not None and f.is_file():
        try:
            m = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return None, f"{f} is unreadable ({type(e).__name__})"
        if not (isinstance(m, dict) and "rows" in m and "curves" in m):
            return None, f"{f} is not a match.json written by dw fit --match"
        then, now = _runs_per_shape(m), _current_runs(data)
        if now is None or then == now:
            return m, f"from {f} (dw fit --match)"
        stale = f"{f} counts {_say(then)} runs, the sweep now {_say(now)}: recomputed (rerun dw fit --match to keep it)"
    else:
        stale = None
    try:
        m = flops_to_match(run_frame(data), bootstrap=REPORT_BOOTSTRAP).to_dict()
    except (BadInput, WorkFailed) as e:  # the report still renders; the section says why it is empty
        return None, str(e)
    return m, stale or f"computed by dw report from each run's final budget ({REPORT_BOOTSTRAP} bootstrap replicates)"


def _runs_per_shape(m: dict) -> dict:
    return {c["shape"]: int(c["runs"]) for c in m.get("curves") or []}


def _current_runs(data: Data) -> dict | None:
    """Usable runs per shape now, as flops_to_match would count them (None: not countable)."""
    try:
        pts = final_points(run_frame(data))
    except (BadInput, WorkFailed):
        return None
    sizes = pts.groupby("shape")["size"].nunique()
    counts = pts.groupby("shape").size()
    return {s: int(counts[s]) for s in counts.index if sizes[s] >= 2}  # the shapes a match fits a curve to


def _say(counts: dict) -> str:
    return ", ".join(f"{s} {n}" for s, n in sorted(counts.items())) or "no"


def match_tables(m: dict | None, origin: str) -> dict:
    """{"flops_curves": Table, "flops_match": Table}: the fitted curves and the matched fractions."""
    ccols = [
        Col("shape", "shape"),
        Col("sizes", "sizes"),
        Col("runs", "runs"),
        Col("E", "E", "{:.4g}"),
        Col("E_ci", "E CI", CI.replace(".3f", ".4g")),
        Col("A", "A", "{:.4g}"),
        Col("alpha", "alpha", "{:.4g}"),
        Col("alpha_ci", "alpha CI", CI.replace(".3f", ".4g")),
        Col("r2", "R²", "{:.4f}"),
        Col("flops_min", "C min", "{:.3g}"),
        Col("flops_max", "C max", "{:.3g}"),
    ]
    mcols = [
        Col("shape", "shape"),
        Col("width", "h"),
        Col("depth", "L"),
        Col("flops_uniform", "C uniform", "{:.3g}"),
        Col("loss_uniform_fit", "loss to reach", "{:.4f}"),
        Col("flops_fraction", "FLOPs ×unif", "{:.3f}"),
        Col("flops_fraction_ci", "CI", CI),
        Col("mean_width_ratio", "mean width ×unif", "{:.3f}"),
        Col("mean_width_ratio_ci", "CI", CI),
        Col("kv_ratio", "KV ×unif", "{:.3f}"),
        Col("kv_ratio_ci", "CI", CI),
        Col("extrapolated", "extrap."),
        Col("paper_flops", "paper FLOPs", "{:.3f}"),
        Col("paper_mean_width", "paper width", "{:.3f}"),
        Col("paper_kv", "paper KV", "{:.2f}"),
    ]
    ct = Table("flops_curves", "Loss vs training FLOPs per shape: L(C) = E + A·(C/C_ref)^-alpha", ccols)
    mt = Table(
        "flops_match",
        "FLOPs to match uniform: compute, mean width and KV cache each shape needs to reach the uniform model's loss",
        mcols,
    )
    p = PAPER_MATCH
    mt.notes.append(
        f"paper (Wu et al.): the × model reaches the {p['baseline']} loss {p['loss']} with "
        f"{100 * p['flops_fraction']:.1f}% of its FLOPs and {100 * p['mean_width_ratio']:.1f}% of its "
        "mean width (−15% KV cache); shown beside the × row at the largest uniform size"
    )
    if m is None:
        note = origin if NEEDS in origin else f"no FLOPs-to-match: {origin}"
        ct.notes.append(note)
        mt.notes.append(note)
        return {"flops_curves": ct, "flops_match": mt}
    lvl = (m.get("bootstrap") or {}).get("level", 0.95)
    for c in m["curves"]:
        ct.rows.append(
            {
                "shape": c["shape"],
                "sizes": c["sizes"],
                "runs": c["runs"],
                "formula": c["formula"],
                "E": c["params"]["E"],
                "E_ci": _ci(c["ci"].get("E")),
                "A": c["params"]["A"],
                "alpha": c["params"]["alpha"],
                "alpha_ci": _ci(c["ci"].get("alpha")),
                "r2": c["r2"],
                "flops_min": c["flops_range"][0],
                "flops_max": c["flops_range"][1],
                "c_ref": m["c_ref"],
            }
        )
    ct.notes.append(
        f"C_ref = {m['c_ref']:.0e} FLOPs; one point per run (its final budget); "
        f"CI: {100 * lvl:.0f}% run-bootstrap intervals; two sizes fit E = 0"
    )
    top = max((r["flops_uniform"] for r in m["rows"]), default=None)
    for r in m["rows"]:
        paper = r["shape"] == p["shape"] and r["flops_uniform"] == top
        mt.rows.append(
            {
                "shape": r["shape"],
                "width": r["width"],
                "depth": r["depth"],
                "flops_uniform": r["flops_uniform"],
                "loss_uniform": r["loss_uniform"],
                "loss_uniform_fit": r["loss_uniform_fit"],
                "flops_match": r["flops_match"],
                "flops_fraction": r["flops_fraction"],
                "flops_fraction_ci": _ci(r["flops_fraction_ci"]),
                "mean_width_ratio": r["mean_width_ratio"],
                "mean_width_ratio_ci": _ci(r["mean_width_ratio_ci"]),
                "kv_ratio": r["kv_ratio"],
                "kv_ratio_ci": _ci(r["kv_ratio_ci"]),
                "extrapolated": r["extrapolated"],
                "unreachable": r["unreachable"],
                "paper_flops": p["flops_fraction"] if paper else None,
                "paper_mean_width": p["mean_width_ratio"] if paper else None,
                "paper_kv": p["kv_ratio"] if paper else None,
            }
        )
    mt.notes.append(
        f"{origin}; ×unif < 1: the shape needs less than the uniform model; mean width and KV "
        "interpolated log-log along the shape's sizes at the matched FLOPs"
    )
    mt.notes += list(m.get("warnings", []))
    return {"flops_curves": ct, "flops_match": mt}


def tables(data: Data) -> dict:
    return match_tables(*load_match(data))


def flops_match_curves(plt, data: Data, rep, out: Path):
    """Figure: each run's final loss vs its training FLOPs, per shape, with the fitted curves."""
    from depthwidth.core.atomic import write_bytes

    curves = rep["tables"].get("flops_curves")
    if curves is None or not curves.rows:
        return "no FLOPs-to-match fit (" + (curves.notes[0] if curves is not None and curves.notes else "absent") + ")"
    pts = run_frame(data)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))  # the paper width figs.py uses
    for i, c in enumerate(curves.rows):
        g = pts[pts["shape"] == c["shape"]]
        label = "×" if c["shape"] == "x" else c["shape"]
        ax.scatter(
            g["flops"],
            g["loss"],
            color=f"C{i}",
            s=22,
            marker="o" if c["shape"] == "uniform" else "D",
            zorder=3,
            label=f"{label}: α = {c['alpha']:.3g}, E = {c['E']:.3g}",
        )
        C = np.geomspace(c["flops_min"] / 2, c["flops_max"] * 2, 100)
        ax.plot(C, c["E"] + c["A"] * (C / c["c_ref"]) ** -c["alpha"], "-", color=f"C{i}", lw=1.2)
        for r in rep["tables"]["flops_match"].rows:  # the inversion: from the uniform size to where s reaches its loss
            if r["shape"] == c["shape"] and r["flops_match"] is not None:
                ax.plot([r["flops_uniform"], r["flops_match"]], [r["loss_uniform_fit"]] * 2, ":", color=f"C{i}", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("training compute C (FLOPs)")
    ax.set_ylabel("held-out loss (nats/token)")
    title = "Loss vs training compute per shape, fitted L(C) = E + A·C^-α"
    ax.set_title(title)
    ax.legend(loc="best")
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    dpi = plt.rcParams["savefig.dpi"]
    fig.savefig(buf, format="png", dpi=dpi)
    w, h = fig.get_size_inches()
    plt.close(fig)
    path = Path(out) / "flops_match.png"
    write_bytes(path, buf.getvalue())
    return {
        "file": path.name,
        "path": str(path),
        "title": title,
        "caption": "one point per run at its final budget; lines: the fitted curves; dotted: from each uniform "
        "size to the FLOPs at which the shape reaches the same loss",
        "width_px": int(round(w * dpi)),
        "height_px": int(round(h * dpi)),
    }
