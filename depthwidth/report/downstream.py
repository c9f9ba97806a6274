"""The report's downstream section, from each run's eval.json (``dw eval``, ``train.eval_tasks``).

``downstream``: one row per finished run with results of its final checkpoint:
run, shape, depth, width, held-out loss (at the final token budget, as the loss
grid has it), then one ``METRIC:TASK`` column per metric any of them has.
Its figure (``--plots``: accuracy against the held-out loss, a marker per shape)
is fit/analyses/downstream.py's, drawn from this table.  No torch here.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.core.tables import Col, Table
from depthwidth.track import evaldoc


def read_evals(sweep_dir, runs: list[dict]) -> dict[str, dict]:
    """{run: eval.json document} for every run of the sweep that has one."""
    out = {}
    for r in runs:
        d = evaldoc.read(Path(sweep_dir) / str(r["run"]))
        if d is not None:
            out[r["run"]] = d
    return out


def _rows(data) -> tuple[list[dict], list[str]]:
    """(one row per finished run with final-checkpoint results, the METRIC:TASK columns in them)."""
    rows, cols = [], set()
    for r in data.runs:
        found = evaldoc.columns(data.evals.get(r["run"]), "final")
        if r["state"] != "done" or not found:
            continue
        cols.update(found)
        rows.append(
            {
                "run": r["run"],
                "shape": r["shape"] or "uniform",
                "depth": r["depth"],
                "width": r["width"],
                "loss": r["loss"],
                **{c: v for c, (_, v) in found.items()},
            }
        )
    return rows, sorted(cols)


def table(data) -> Table:
    rows, cols = _rows(data)
    t = Table(
        "downstream",
        "Downstream tasks (lm-evaluation-harness) beside the held-out loss",
        [
            Col("run", "run"),
            Col("shape", "shape"),
            Col("depth", "L"),
            Col("width", "h"),
            Col("loss", "loss", "{:.4f}"),
            *[Col(c, c, "{:.4f}") for c in cols],
        ],
        rows,
    )
    if rows:
        t.notes.append(
            "from each run's eval.json (dw eval), final checkpoint; a column is METRIC:TASK; "
            "eval.json records each task's limit, version and config hash"
        )
    else:
        t.notes.append("no finished run has results of its final checkpoint (run: dw eval NAME --tasks ...)")
    return t
