"""``dw suggest``: the next runs of a sweep, chosen by what they would teach per GPU-hour."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import emit_json, wide_console
from depthwidth.sweep.options import SUGGEST_OPTIONS  # dw suggest's options (sweep/options.py)


@with_options(SUGGEST_OPTIONS)
def suggest_cmd(
    name: str = typer.Argument(..., help="sweep name: a file sweeps/NAME.yaml (its fit.json, or --prior)"),
    overrides: Optional[List[str]] = typer.Argument(
        None, help="as dw sweep takes them, for every candidate: launcher=slurm (GPU-hours), train.steps=..."
    ),
    **kw,
) -> None:
    """Choose the runs that shrink the target's interval most per GPU-hour, within a budget.

    The sweep's fit.json holds bootstrap replicates of its law; each candidate run's value is the
    expected reduction of the target's variance once its loss is measured (fit/predict.py).  The
    picks go to sweeps/NAME_next.yaml, whose runs join NAME's store: dw sweep NAME_next submits them,
    dw status NAME / dw fit NAME count them with the rest.

    Example: dw suggest depth_delusion launcher=slurm --budget 500 --target dcrit@1024

    Example: dw suggest depth_delusion launcher=slurm --prior published --budget 200   (no runs yet)
    """
    from depthwidth.sweep.suggest import suggest

    o = taken((SUGGEST_OPTIONS,), kw)
    as_json, write = o.pop("as_json"), not o.pop("no_write")
    s = suggest(name, overrides=overrides or [], write=write, **o)
    doc = s.to_dict()
    if as_json:
        emit_json(doc)
        return
    _render(doc)


def _render(doc: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    c = wide_console()
    t = Table(
        title=escape(
            f"dw suggest {doc['sweep']}: {len(doc['runs'])} {doc.get('unit', 'runs')} for {doc['target_label']} "
            f"({doc['spent_hours']:.3g} of {doc['budget_hours']:.3g} device-hours)"
        ),
        title_justify="left",
    )
    for col, j in (
        ("#", "right"),
        ("run id", "left"),
        ("label", "left"),
        ("L×W", "right"),
        ("shape", "left"),
        ("seed", "right"),
        ("device-h", "right"),
        ("pred. loss [95% PI]", "right"),
        ("target CI after", "right"),
    ):
        t.add_column(col, justify=j, no_wrap=True)
    for i, r in enumerate(doc["runs"], 1):
        t.add_row(
            str(i),
            r["run_id"],
            r.get("label") or "",
            f"{r['depth']}×{r['width']}",
            r["shape"],
            str(r["seed"]),
            f"{r['hours']:.3g}",
            "; ".join(  # a multi-output law's run reveals every output: each predicted
                f"{o + ' ' if o else ''}{p['loss']:.3f} [{p['pi'][0]:.3f}, {p['pi'][1]:.3f}]"
                for o, p in (r.get("outputs") or {"": {"loss": r["predicted_loss"], "pi": r["pi"]}}).items()
            ),
            "—" if r["interval_after"] is None else f"{r['interval_after']:.3g}",
        )
    c.print(t)
    after = "not determined" if doc["interval_after"] is None else f"{doc['interval_after']:.3g}"
    c.print(
        escape(
            f"{doc['target_label']}: 95% interval {doc['interval_now']:.3g} wide now, expected "
            f"{after} after these runs (from the {doc['from']}; {doc['candidates']} candidates"
            f"{' (tuning groups)' if doc.get('unit') == 'tuning groups' else ''}; runs already in the store "
            f"{doc.get('candidates_in_store', 0)}, refused by the plan {doc.get('candidates_refused', 0)})"
        ),
        highlight=False,
        soft_wrap=True,
    )
    if doc.get("fit_verdict"):  # the fit it starts from, as dw fit decided it (fit.json's identification)
        c.print(escape(f"the fit it starts from: {doc['fit_verdict']}"), highlight=False, soft_wrap=True)
    for n in doc.get("notes") or []:
        c.print(escape(f"note: {n}"), highlight=False, soft_wrap=True)
    if doc.get("written"):
        c.print(
            escape(
                f"wrote {doc['written']}: dw sweep {Path(doc['written']).stem} --dry-run shows it "
                "(with --no-data-check before its data are prepared)"
            )
        )
