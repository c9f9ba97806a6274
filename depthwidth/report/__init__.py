"""``dw report`` as a library: gather a sweep or a run table, build its tables, render them.

    from depthwidth import report
    rep = report.build("demo")                      # a sweep under $DW_RUNS (or root=...)
    rep = report.build(runs="gemstones.jsonl")      # any run table
    print(report.render_markdown(rep))
    report.write_outputs(rep, Path("out/demo"))     # report.md, report.json, tables/
    rep = report.make("demo", plots=Path("out/demo"))  # dw report's work: build, then figures and files

Modules, in the order a report is made:

- load.py: a sweep, a run table or W&B (through track/run_source.py) -> ``Data``
- document.py: the report's document model (``Data``, ``Table``, ``Col``) and the papers' numbers
- tables.py: ``Data`` -> every table of the report (``build``)
- fit_view.py: every table of one fit; ``dw fit`` prints them: the parameters, the law comparison, what a fit
  rests on (identification, hold-out, isoFLOP, sensitivity, planted truth), D_crit beside the papers' numbers,
  published losses of shared configurations, the compute-optimal table ("not identified" outside the
  meaningful range)
- matching.py: FLOPs to match uniform: where the report's match comes from (match.json or computed) (its
  tables and figure: fit/analyses/match.py)
- router.py: the MoE router's load per layer
- inside.py: the runs' analysis.json per shape, the papers' claims with verdicts
- provenance.py: which code, versions, devices and precisions made the runs and the fit
- render.py: rich, markdown, csv, json and the files of ``--plots``; what every ``dw`` command shares for
  output (consoles, ``--json``, progress bars: cli/ imports it)
- figs.py: the figures (matplotlib, only for ``--plots``); an analysis's own (gradient persistence's
  gradient profiles and tau(W), the isoFLOP profiles, FLOPs to match uniform's curves, downstream accuracy
  vs loss) are its module's ``figures`` (fit/analyses/), drawn here
- inside_figs.py: the figures of the inside section
- readme.py: the README's demo section (``make readme-demo``)

No torch here.
"""

from __future__ import annotations

from depthwidth.report.load import load
from depthwidth.core.tables import Table
from depthwidth.report.document import FORMATS, Data
from depthwidth.report.render import (
    md_table,
    render_csv,
    render_markdown,
    render_rich,
    to_json,
    write_outputs,
)
from depthwidth.report.tables import build as build_tables

__all__ = [
    "FORMATS",
    "Data",
    "Table",
    "build",
    "build_tables",
    "load",
    "make",
    "md_table",
    "render_csv",
    "render_markdown",
    "render_rich",
    "to_json",
    "write_outputs",
]


def build(
    what: "str | Data | None" = None, *, at_width: int | None = None, at_depth: int | None = None, **load_options
) -> dict:
    """The report of ``what``: a sweep name, a ``Data`` from ``load``, or None with
    ``runs=TABLE`` (or ``source="wandb", project=...``) among ``load_options`` (see ``load``)."""
    data = what if isinstance(what, Data) else load(what, **load_options)
    return build_tables(data, at_width=at_width, at_depth=at_depth)


def make(
    what: "str | Data | None" = None,
    *,
    plots=None,
    at_width: int | None = None,
    at_depth: int | None = None,
    **load_options,
) -> dict:
    """``dw report``'s work: the report of ``what`` (as ``build``), and with ``plots`` (a folder) its
    figures, report.md, report.json and tables/ written there (``rep["figures"]``).  A folder that
    cannot be made is bad input, before any work."""
    from depthwidth.core.atomic import check_creatable

    if plots is not None:
        check_creatable("--plots", plots)
    data = what if isinstance(what, Data) else load(what, **load_options)
    rep = build_tables(data, at_width=at_width, at_depth=at_depth)
    if plots is not None:
        from depthwidth.report import figs as report_figs

        plots.mkdir(parents=True, exist_ok=True)
        rep["figures"] = report_figs.make_all(data, rep, plots)
        write_outputs(rep, plots)
    return rep
