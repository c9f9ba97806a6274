"""A table as dw shows it: raw values in ``rows`` (json, csv), how to display them in ``cols``.

``dw report`` and ``dw fit`` render the same ``Table`` (report/render.py); the analyses of a fit
(fit/analyses/) build theirs here, below the report, so that an analysis owns its tables.
Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

NOT_IDENTIFIED = "not identified"  # a number a table cannot give (outside its meaningful range)


@dataclass
class Col:
    key: str
    label: str
    fmt: str = "{}"  # format for display; None values show as "—"
    right: bool = False  # right-justified where a renderer asks (the dry run's, dw status's tables)

    def show(self, v) -> str:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "no"
        try:
            return self.fmt.format(v)
        except (ValueError, TypeError):
            return str(v)


@dataclass
class Table:
    key: str
    title: str
    cols: list[Col]
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pivot: dict | None = None  # {"index", "columns", "cell"(row -> str), "index_label", "column_label"}

    def display(self, skip: tuple[str, ...] = ()) -> tuple[list[str], list[list[str]]]:
        """(header labels, rows of strings) as a person reads the table, less the columns ``skip``."""
        if self.pivot:
            p = self.pivot
            idx = sorted({r[p["index"]] for r in self.rows})
            cs = sorted({r[p["columns"]] for r in self.rows})
            cell = {(r[p["index"]], r[p["columns"]]): p["cell"](r) for r in self.rows}
            head = [p["index_label"]] + [f"{p['column_label']}{c}" for c in cs]
            return head, [[fmt_int(i)] + [cell.get((i, c), "") for c in cs] for i in idx]
        cols = [c for c in self.cols if c.key not in skip]
        return [c.label for c in cols], [[c.show(r.get(c.key)) for c in cols] for r in self.rows]

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "columns": {c.key: c.label for c in self.cols},
            "rows": self.rows,
            "notes": self.notes,
        }


def plural(n: int, word: str) -> str:
    """``3 runs``, ``1 run``: a count with its noun (an English plural in -s)."""
    return f"{n} {word}{'s' * (n != 1)}"


def fmt_int(x) -> str:
    return str(int(x)) if isinstance(x, (int, float)) and math.isfinite(x) and float(x).is_integer() else str(x)


def ci_pair(c):
    """(lo, hi) of an interval ``[lo, hi]``, else (None, None)."""
    return (c[0], c[1]) if isinstance(c, (list, tuple)) and len(c) == 2 else (None, None)


def ci_text(ci, fmt: str = "{:.4g}") -> str:
    """An interval as text (an isoFLOP optimum's, a power law's exponent's): [lo, hi], "> lo",
    "< hi", "unbounded", or "—" (no interval)."""
    if not ci:
        return "—"
    lo, hi = ci
    if lo is None or hi is None:
        return "unbounded" if lo is hi else ("> " + fmt.format(lo) if hi is None else "< " + fmt.format(hi))
    return f"[{fmt.format(lo)}, {fmt.format(hi)}]"
