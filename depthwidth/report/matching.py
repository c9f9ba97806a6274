"""Where the report's "FLOPs to match uniform" section comes from (the analysis, its verdict lines,
tables and figure: fit/analyses/match.py; the statistics: fit/match.py).

Where it comes from: ``ROOT/NAME/match.json`` when ``dw fit NAME --match``
wrote one; otherwise it is computed here from the report's runs (each run's
final budget, 200 bootstrap replicates) whenever the uniform shape and at
least one other shape have two or more sizes.  Otherwise the section says what
is missing.  No torch here.
"""

from __future__ import annotations

import json
from pathlib import Path

from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.fit.analyses import match as analysis
from depthwidth.fit.match import final_points, flops_to_match
from depthwidth.report.document import DONE, Data, is_uniform
from depthwidth.track.run_source import mean_width

REPORT_BOOTSTRAP = 200


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
    f = Path(d) / analysis.DOCUMENT if d else None
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


def tables(data: Data) -> dict:
    return analysis.tables(*load_match(data))
