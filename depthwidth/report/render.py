"""Render a report: rich tables in the terminal, markdown, csv, json, and the
files ``dw report --plots DIR`` writes (report.md, report.json, tables/); and what every ``dw``
command shares for output (the last section): rich consoles, ``--json`` documents, a sweep's
progress bar and large tables drawn directly.  cli/ imports these; nothing here imports cli/."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Iterator

from depthwidth.core.atomic import write_text
from depthwidth.core.tables import Table

ORDER = (
    "loss_grid",
    "apart",
    "u_shape",
    "width_sweep",
    "pairs",
    "shapes",
    "router",
    "fit",
    "fit_compare",
    "fit_identification",
    "fit_optimal",
    "fit_holdout",
    "fit_downstream",
    "fit_downstream_holdout",
    "fit_tuning",
    "halving",
    "fit_tuned_vs_fixed",
    "fit_lr",
    "fit_sensitivity",
    "fit_isoflop",
    "fit_planted",
    "dcrit_widths",
    "dcrit_models",
    "flops_curves",
    "flops_match",
    "paper",
    "inside",
    "inside_claims",
    "downstream",
    "missing",
    "provenance",
)


# what the papers claim or published, beside this sweep's numbers: on a sweep that is not one of the
# papers' grids these come last, under their own heading (report/tables.py sets rep["papers_grid"])
PAPER_KEYS = ("dcrit_models", "paper", "inside_claims")
PAPER_HEADING = "Beside the papers: their claims and published numbers (this sweep is not one of their grids)"


def in_order(tables: dict) -> list[str]:
    """The keys of ``tables`` in print order: ORDER's, then any other (a new analysis's) as built."""
    return [k for k in ORDER if k in tables] + [k for k in tables if k not in ORDER]


def _tables(rep):
    return [t for _, t in _sections(rep)]


def _sections(rep) -> list[tuple[str | None, Table]]:
    """(heading or None, table) in print order."""
    keys = in_order(rep["tables"])
    if rep.get("papers_grid", True):
        return [(None, rep["tables"][k]) for k in keys]
    own = [(None, rep["tables"][k]) for k in keys if k not in PAPER_KEYS]
    return own + [(PAPER_HEADING, rep["tables"][k]) for k in keys if k in PAPER_KEYS]


def _title(rep) -> str:
    s = rep["source"]
    what = f"sweep {s['sweep']}" if s.get("sweep") else f"run table {s.get('runs')}"
    st = ", ".join(f"{n} {k}" for k, n in sorted(rep["states"].items()))
    apart = len(rep["tables"]["apart"].rows) if "apart" in rep.get("tables", {}) else 0
    more = f"; {apart} more set apart" if apart else ""
    return f"dw report — {what}: {rep['runs']} runs ({st or 'none'}{more})"


def print_table(t: Table, console, skip: tuple[str, ...] = ()) -> None:
    """One report table and its notes on a rich console, less the columns ``skip``."""
    from rich.markup import escape
    from rich.table import Table as RT

    head, rows = t.display(skip)
    rt = RT(title=escape(t.title), title_justify="left")
    for i, h in enumerate(head):
        rt.add_column(escape(h), justify="left" if i == 0 and not t.pivot else "right")
    for r in rows:
        rt.add_row(*(escape(x) for x in r))
    if rows:
        console.print(rt)
    else:
        console.print(f"[bold]{escape(t.title)}[/bold]: —")
    for n in t.notes:
        console.print(f"  [dim]{escape(n)}[/dim]")


# the terminal's report without --all: the sweep's own headline tables; the rest are named in one line
BRIEF = (
    "loss_grid",
    "apart",
    "shapes",
    "fit",
    "fit_identification",
    "fit_optimal",
    "fit_planted",
    "dcrit_widths",
    "inside",
    "downstream",
    "missing",
)


def render_rich(rep, console, brief: bool = False) -> None:
    """Every table on a rich console; ``brief``: the BRIEF ones, the others named at the end."""
    from rich.markup import escape

    console.print(f"[bold]{escape(_title(rep))}[/bold]")
    said, rest = None, []
    for head, t in _sections(rep):
        if brief and t.key not in BRIEF:
            rest.append(t.title)
            continue
        if head and head != said:
            console.print(f"\n[bold underline]{escape(head)}[/bold underline]")
            said = head
        print_table(t, console)
    if rest:
        console.print(
            escape(f"{len(rest)} more tables (dw report NAME --all, or --plots DIR for report.md): " + "; ".join(rest)),
            style="dim",
        )
    for n in rep["notes"]:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")
    for f in rep["figures"]:
        console.print(escape(f"figure: {f['path']} ({f['width_px']}×{f['height_px']} px) — {f['title']}"))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_note(n: str) -> str:
    return n.replace("*", "\\*")


def md_table(t: Table) -> str:
    head, rows = t.display()
    out = [
        "| " + " | ".join(_md_cell(h) for h in head) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|",
    ]
    out += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(rep, fig_base: str | None = None) -> str:
    """Markdown a person can paste into a draft; figures linked relative to ``fig_base``."""
    out = [f"# {_title(rep)}", ""]
    said = None
    for head, t in _sections(rep):
        if head and head != said:
            out += [f"## {head}", ""]
            said = head
        out += [f"{'###' if head else '##'} {t.title}", ""]
        out += [md_table(t), ""] if t.rows else ["—", ""]
        out += [f"- {_md_note(n)}" for n in t.notes] + ([""] if t.notes else [])
    if rep["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]] + [""]
    if rep["figures"]:
        out += ["## Figures", ""]
        for f in rep["figures"]:
            link = f["file"] if fig_base is None else f"{fig_base.rstrip('/')}/{f['file']}"
            out += [f"![{f['title']}]({link})", "", f"*{f['title']}* — {f['caption']}", ""]
    return "\n".join(out).rstrip() + "\n"


def csv_frame(rep):
    """All tables in one rectangular frame: column ``table`` names the table, other columns are its keys."""
    import pandas as pd

    frames = []
    for t in _tables(rep):
        if t.rows:
            frames.append(pd.DataFrame(t.rows).assign(table=t.key))
    if not frames:
        return pd.DataFrame(columns=["table"])
    df = pd.concat(frames, ignore_index=True, sort=False)
    return df[["table"] + [c for c in df.columns if c != "table"]]


def render_csv(rep) -> str:
    return csv_frame(rep).to_csv(index=False)


def to_json(rep) -> dict:
    from depthwidth.fit.files import jsonable

    out = {k: v for k, v in rep.items() if k != "tables"}
    out["tables"] = {t.key: t.to_json() for t in _tables(rep)}
    return jsonable(out)


def write_outputs(rep, out_dir: Path) -> list[str]:
    """report.md (figures linked), report.json and tables/NAME.csv in ``out_dir``."""
    import json

    written = []
    write_text(out_dir / "report.md", render_markdown(rep))
    write_text(out_dir / "report.json", json.dumps(to_json(rep), indent=2) + "\n")
    written += [str(out_dir / "report.md"), str(out_dir / "report.json")]
    for t in _tables(rep):
        if t.rows:
            import pandas as pd

            p = out_dir / "tables" / f"{t.key}.csv"
            write_text(p, pd.DataFrame(t.rows).to_csv(index=False))
            written.append(str(p))
    return written


# --- what every command shares for output (cli/ imports these): rich consoles and ``--json`` documents

FAST_ABOVE = 200  # rows beyond which a table is drawn directly (rich.Table measures every cell, ~0.1 ms each)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def emit_json(obj: Any) -> None:
    """One JSON document on stdout (for ``--json``); a document of more than ``FAST_ABOVE`` runs is
    written compact (json's C encoder: indenting 10,000 runs took longer than planning them)."""
    from depthwidth.core.atomic import json_default

    runs = obj.get("runs") if isinstance(obj, dict) else None
    big = isinstance(runs, (list, tuple)) and len(runs) > FAST_ABOVE  # dw report's "runs" is a count
    sys.stdout.write(json.dumps(obj, indent=None if big else 2, default=json_default) + "\n")


def wide_console():
    """Tables are wide: when stdout is not a terminal, do not squeeze them into 80 columns."""
    import sys

    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)


@contextlib.contextmanager
def runs_progress(verb: str, total: int, quiet: bool = False) -> Iterator:
    """A progress bar on stderr over a sweep's runs (``dw analyze``, ``dw eval``): yields the
    ``progress(done, total, run_dir)`` callback their libraries call after each run."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    cols = (TextColumn(verb), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"))
    with Progress(*cols, console=console(stderr=True), disable=quiet or not total) as bar:
        task = bar.add_task("", total=total)
        yield lambda i, n, d: bar.update(task, completed=i, description=d.name)


def plain_table(title, cols, rows, right, styled=None):
    """The same look as rich's default table, drawn as one Text (1,000 rows in ~50 ms).  ``styled``:
    (column, {value: style}) colours that column's cells (dw status's states)."""
    w, cells, out, bottom = _table_head(title, cols, rows, right)
    k = cols.index(styled[0]) if styled else None
    pre = sum(w[:k]) + 3 * k + 2 if styled else 0
    for r in rows:
        start = len(out)
        out.append("│" + cells(r) + "│\n")
        if styled:
            out.stylize(styled[1][r[k]], start + pre, start + pre + len(r[k]))
    out.append(bottom)
    return out


def print_plain_table(c, title, cols, rows, right) -> None:
    """``plain_table`` on console ``c``: its title and header through rich, its rows written as they are
    (rich splits, strips and measures every line it prints: 10,000 rows took ~0.5 s)."""
    _, cells, head, bottom = _table_head(title, cols, rows, right)
    head.rstrip()
    c.print(head, soft_wrap=True)
    c.file.write("".join(["│" + cells(r) + "│\n" for r in rows]) + bottom + "\n")


def _table_head(title, cols, rows, right):
    """(column widths, a row's cells drawn, the title and header as a Text, the bottom line)."""
    from rich.text import Text

    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    just = [str.rjust if c in right else str.ljust for c in cols]

    def cells(vals):
        return " " + " │ ".join([j(v, x) for j, v, x in zip(just, vals, w)]) + " "

    total = sum(w) + 3 * len(w) + 1
    out = Text(f"{title:^{total}}\n", style="italic")
    out.append("┏" + "┳".join("━" * (x + 2) for x in w) + "┓\n")
    out.append("┃" + cells(cols).replace("│", "┃") + "┃\n", style="bold")
    out.append("┡" + "╇".join("━" * (x + 2) for x in w) + "┩\n")
    return w, cells, out, "└" + "┴".join("─" * (x + 2) for x in w) + "┘"


def print_rows(c, t) -> None:
    """A ``core.tables.Table`` whose rows hold each cell as shown (the dry run's) on console ``c``: rich's
    table, as wide as it needs when piped, or drawn directly above ``FAST_ABOVE`` rows; its notes
    as the caption (below the drawn table)."""
    head, body = t.display()
    if len(body) > FAST_ABOVE:  # thousands of runs: drawn directly (rich measures every cell)
        print_plain_table(c, t.title, head, body, {col.label for col in t.cols if col.right})
        for n in t.notes:
            c.print(n, highlight=False, soft_wrap=True)
        return
    from rich.table import Table

    rt = Table(title=t.title, caption=" ".join(t.notes) or None)
    for col in t.cols:
        rt.add_column(col.label, justify="right" if col.right else "left", no_wrap=True)
    for cells in body:
        rt.add_row(*cells)
    if not c.is_terminal:  # piped: as wide as the table needs, never a column squeezed to "s…"
        from rich.measure import Measurement

        c.width = max(c.width, Measurement.get(c, c.options.update(max_width=10**5), rt).maximum)
    c.print(rt)
