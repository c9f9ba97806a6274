"""``dw report`` as a library: gather a sweep or a run table, build its tables, render them.

    from depthwidth import report
    rep = report.build("demo")                      # a sweep under $DW_RUNS (or root=...)
    rep = report.build(runs="gemstones.jsonl")      # any run table
    print(report.render_markdown(rep))
    report.write_outputs(rep, Path("out/demo"))     # report.md, report.json, tables/

Modules: model.py (the data model and the papers' numbers), load.py (sweep or
table -> Data), tables.py (Data -> tables), render.py (rich, markdown, csv,
json, files), figs.py (matplotlib, only for --plots), matching.py (FLOPs to
match uniform: tables and figure), readme.py (the README's demo section).
No torch here.
"""

from __future__ import annotations

from depthwidth.report.load import load
from depthwidth.report.model import FORMATS, Data, Table
from depthwidth.report.render import (
    md_table,
    render_csv,
    render_markdown,
    render_rich,
    to_json,
    write_outputs,
)
from depthwidth.report.tables import build as build_tables

__all__ = ["FORMATS", "Data", "Table", "build", "build_tables", "load", "md_table", "render_csv",
           "render_markdown", "render_rich", "to_json", "write_outputs"]


def build(what: "str | Data | None" = None, *, at_width: int | None = None, at_depth: int | None = None,
          **load_options) -> dict:
    """The report of ``what``: a sweep name, a ``Data`` from ``load``, or None with
    ``runs=TABLE`` (or ``source="wandb", project=...``) among ``load_options`` (see ``load``)."""
    data = what if isinstance(what, Data) else load(what, **load_options)
    return build_tables(data, at_width=at_width, at_depth=at_depth)
