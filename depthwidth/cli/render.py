"""What every command shares for output: rich consoles and ``--json`` documents."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Iterator

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
