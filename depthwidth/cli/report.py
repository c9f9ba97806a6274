"""``dw report``: tables, figures and markdown from a sweep (and its fit) or a run table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from depthwidth.cli.options import with_options
from depthwidth.report.render import console, emit_json
from depthwidth.track.run_source import SOURCE_OPTIONS


@with_options(SOURCE_OPTIONS)  # --runs, --columns, --root, --source, --project, --group: track/run_source.py
def report_cmd(
    name: Optional[str] = typer.Argument(None, help="sweep name: ROOT/NAME (its runs, manifest and fit.json)"),
    fmt: str = typer.Option("rich", "--format", "-f", help="rich | markdown | csv | json"),
    plots: Optional[Path] = typer.Option(
        None,
        "--plots",
        help="write PNG figures, report.md (figures linked), report.json and tables/*.csv to this folder",
    ),
    fit: Optional[Path] = typer.Option(
        None, "--fit", help="a fit.json to report (default: ROOT/NAME/fit.json when present)"
    ),
    at_width: Optional[int] = typer.Option(
        None, "--at-width", help="width of the U-shape table (default: the width with most depths)"
    ),
    at_depth: Optional[int] = typer.Option(
        None, "--at-depth", help="depth of the width-sweep table (default: the depth with most widths)"
    ),
    show_all: bool = typer.Option(
        False,
        "--all",
        help="in the terminal, every table (default: the headline ones, the rest named; markdown, json, csv and "
        "--plots always hold every table)",
    ),
    **source,
) -> None:
    """Tables, figures and the papers' numbers beside ours, for a sweep (finished or not) or a run table.

    Example: dw report demo --plots out/demo

    Example: dw report depth_delusion --format markdown > results.md

    Example: dw report --runs gemstones.jsonl --columns loss=final_loss,run=run_name --format csv

    Example: dw report --source wandb --project me/depthwidth --group depth_delusion

    Tables: loss grid (depth × width), U-shape, width sweep, shallow-wide vs
    deep-narrow pairs, shape families, the fit, D_crit, FLOPs to match uniform
    (match.json from dw fit NAME --match, or computed when uniform and another
    shape have ≥2 sizes), paper vs measured, and what is missing (runs
    pending, failed or diverged).  Exit codes: 0 ok; 2 bad input; 1 the report
    could not be written.
    """
    import depthwidth.report as rp
    from depthwidth.core.errors import bad

    if fmt not in rp.FORMATS:
        raise bad("--format", fmt, " | ".join(rp.FORMATS))
    rep = rp.make(name, plots=plots, at_width=at_width, at_depth=at_depth, fit_path=fit, **source)
    _render(rep, fmt, plots, brief=not show_all)
    if plots is not None:
        console(stderr=True).print(
            f"report: {len(rep['figures'])} figures, report.md, report.json and tables/ in {plots}/"
        )


def _render(rep: dict, fmt: str, plots: Optional[Path], brief: bool) -> None:
    """The report on stdout in ``fmt`` (rich: the headline tables unless ``brief`` is False)."""
    import depthwidth.report as rp

    if fmt == "json":
        emit_json(rp.to_json(rep))
    elif fmt == "markdown":
        typer.echo(rp.render_markdown(rep, fig_base=str(plots) if plots is not None else None), nl=False)
    elif fmt == "csv":
        typer.echo(rp.render_csv(rep), nl=False)
    else:
        c = console()
        if not c.is_terminal:
            c.width = max(c.width, 160)
        rp.render_rich(rep, c, brief=brief)
