"""``dw fit``: fit a loss law to a sweep's runs or to any run table, with intervals."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import console, emit_json
from depthwidth.fit.defaults import FIT_OPTIONS  # every option of dw fit: one home (fit/defaults.py)
from depthwidth.track.run_source import SOURCE_OPTIONS

if TYPE_CHECKING:
    from depthwidth.fit.result import FitDocument


@with_options(SOURCE_OPTIONS, FIT_OPTIONS)  # --runs ... --group (track/run_source.py), --law ... (fit/defaults.py)
def fit_cmd(
    name: Optional[str] = typer.Argument(None, help="sweep name: every token-budget point of every run in ROOT/NAME"),
    out: Optional[Path] = typer.Option(
        None, "--out", help="write the result JSON here (a sweep writes ROOT/NAME/fit.json)"
    ),
    no_write: bool = typer.Option(False, "--no-write", help="do not write fit.json"),
    force: bool = typer.Option(
        False,
        "--force",
        help="replace a sweep's fit.json that holds a fit of another law or --where filter (the one its report shows)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of tables"),
    **kw,
) -> None:
    """Fit a loss law robustly (Huber on log loss, multi-start L-BFGS), with bootstrap intervals.

    Example: dw fit depth_delusion --law depth-delusion --bootstrap 1000

    Example: dw fit depth_delusion --law depth-delusion --n-convention total --c-ref 1e20

    Example: dw fit --runs gemstones.jsonl \
--columns loss=final_loss,params=params_active_precise,run=run_name --law width-depth

    Example: dw fit depth_delusion --law chinchilla --holdout largest:3 --compare chinchilla,width-depth

    Example: dw fit --runs gemstones.jsonl \
--columns loss=final_loss,params=params_active_precise,run=run_name --law chinchilla --sensitivity

    Example: dw fit isoflop_depth_cpu --law width-depth --approach isoflop

    Example: dw fit --source wandb --project me/depthwidth --group depth_delusion --law depth-delusion

    Example: dw fit demo --law chinchilla --metric acc:hellaswag --holdout largest:3

    Example: dw fit vwt_scaling --match --bootstrap 1000   (FLOPs to match uniform; needs ≥2 sizes per shape)
    """
    from depthwidth.fit.options import FitOptions
    from depthwidth.track.run_source import RunSource

    src = RunSource.take(name, kw)
    opts = FitOptions(**taken((FIT_OPTIONS,), kw))
    from depthwidth.fit.analyses import own
    from depthwidth.fit.pipeline import fit_document, run_fit

    if (m := own(opts)) is not None:  # --match, --law lr: an analysis that is a document of its own
        res = run_fit(src, options=opts, out=out, write=not no_write)
        emit_json(res) if as_json else render_document(m.tables(res), res, m.WIDTH)
        return
    doc = fit_document(src, options=opts, out=out, write=not no_write, force=force)
    emit_json(doc.as_dict()) if as_json else render(doc, kept=bool(doc.written))


# what ``dw fit`` prints of report/fit_view.py's tables, in the report's order (report/render.py ORDER)
DCRIT_KEYS = ("dcrit_widths", "dcrit_models")


def render(doc: FitDocument, kept: bool = True) -> None:
    """The fit's tables, the ones ``dw report`` shows for it (report/fit_view.py), in the terminal;
    ``kept``: False where no fit.json holds it (``--no-write``, a table fitted without ``--out``)."""
    from rich.markup import escape as esc

    from depthwidth.report.fit_view import fit_tables
    from depthwidth.core.tables import NOT_IDENTIFIED
    from depthwidth.report.render import in_order, print_table

    c = _console(120)
    for line in doc.underdetermined:  # before any number (fit/boot.py)
        c.print(f"[bold yellow]before the numbers:[/bold yellow] {esc(line)}")
    T = fit_tables(doc, kept=kept)
    if "dcrit" not in doc.derived:  # a law without D_crit: the paper's column alone says nothing
        for k in DCRIT_KEYS:
            T.pop(k, None)
    elif "dcrit_models" in T:  # production models this grid cannot reach: named in the table's note, no rows
        T["dcrit_models"].rows = [r for r in T["dcrit_models"].rows if r.get("measured") != NOT_IDENTIFIED]
    if "fit" in T:  # said above, before the numbers
        T["fit"].notes = [n for n in T["fit"].notes if not n.startswith("before the numbers: ")]
    for k in in_order(T):  # why an optimum is not identified is said once, in the identification table's notes
        print_table(T[k], c, skip=("note",) if k == "fit_optimal" else ())
    if doc.written:
        c.print(esc(f"wrote {doc.written}"))


def render_document(tables: dict, res: dict, width: int) -> None:
    """A document ``dw fit`` makes instead of a law fit (``--law lr``: lr_fit.json, ``--match``:
    match.json): its tables, in the terminal."""
    from rich.markup import escape as esc

    from depthwidth.report.render import print_table

    c = _console(width)
    for t in tables.values():
        print_table(t, c)
    if res.get("written"):
        c.print(esc(f"wrote {res['written']}"))


def _console(width: int):
    c = console()
    if not c.is_terminal:  # piped output: do not squeeze the tables into so few columns
        c.width = max(c.width, width)
    return c
