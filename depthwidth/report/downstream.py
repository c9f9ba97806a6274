"""The report's downstream section, from each run's eval.json (``dw eval``, ``train.eval_tasks``).

``downstream``: one row per finished run with results of its final checkpoint:
run, shape, depth, width, held-out loss (at the final token budget, as the loss
grid has it), then one ``METRIC:TASK`` column per metric any of them has.
``accuracy_vs_loss`` (``--plots``): every accuracy-like column (``acc``,
``acc_norm``, ``exact_match``) against the held-out loss, a marker per shape:
whether a lower loss buys the same downstream accuracy whatever the shape.
No torch here.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.core.tables import Col, Table
from depthwidth.report.document import SHAPES, SHAPE_LABEL
from depthwidth.track import evaldoc

ACCURACY = ("acc", "acc_norm", "exact_match")  # metrics in [0, 1], higher is better


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


def accuracy_vs_loss(plt, data, rep, out):
    """Each accuracy-like METRIC:TASK against the held-out loss; a marker per width shape."""
    rows, cols = _rows(data)
    acc = [c for c in cols if c.split(":", 1)[0].split(",", 1)[0] in ACCURACY]
    pts = [(r, c) for c in acc for r in rows if r[c] is not None and r["loss"] is not None]
    if not pts:
        return "no accuracy (acc, acc_norm, exact_match) in the finished runs' eval.json (dw eval NAME --tasks ...)"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    markers = dict(zip(SHAPES, "osD^v"))
    shapes_seen = set()
    for i, c in enumerate(acc):
        mine = [r for r, cc in pts if cc == c]
        for r in mine:
            ax.plot(r["loss"], r[c], markers.get(r["shape"], "o"), color=f"C{i}", ms=5)
            shapes_seen.add(r["shape"])
        ax.plot([], [], "o", color=f"C{i}", label=c)
    for s in sorted(shapes_seen, key=lambda s: SHAPES.index(s) if s in SHAPES else 99):
        ax.plot([], [], markers.get(s, "o"), color="0.4", label=SHAPE_LABEL.get(s, s))
    ax.set_xlabel("held-out loss (nats/token)")
    ax.set_ylabel("accuracy")
    ax.legend(loc="best", fontsize=7)
    title = "Downstream accuracy vs held-out loss"
    ax.set_title(title)
    return fig, "accuracy_vs_loss.png", title, "final checkpoints (dw eval); colour: METRIC:TASK, marker: shape"
