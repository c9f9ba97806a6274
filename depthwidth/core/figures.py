"""A figure as data: what an analysis draws (its points, curves, labels), which report/figs.py draws
with matplotlib; the analysis module that makes it (fit/analyses/, ``figures(fit, ...)``) imports
no plotting library.

A ``Figure`` is one PNG: its file, title and caption, its size in inches, and its panels side by
side (or on a ``grid`` of rows and columns, a cell left over hidden; with ``sharey``, one y axis; a
``suptitle`` over them).  A ``Panel`` is one set of axes: its series in drawing order, then its scales, labels, title
and legend.  A ``Series`` is one call of a matplotlib ``Axes`` method (``plot``, ``scatter``,
``errorbar``) on its ``x`` and ``y``, with ``fmt`` its format string and ``style`` its keyword
arguments; a colour in ``style`` may be ``{"cmap": name, "at": x}``: the colour map ``name`` at x in
[0, 1], which the drawer looks up."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Series:
    kind: str
    """The ``Axes`` method that draws it: ``plot``, ``scatter`` or ``errorbar``."""
    x: object
    y: object
    fmt: str = ""
    """The format string (``plot``, ``errorbar``): "o", "--" …; empty: none."""
    style: dict = field(default_factory=dict)
    """Its keyword arguments: color, label, lw, ms, zorder, xerr …"""


@dataclass
class Panel:
    series: list[Series] = field(default_factory=list)
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    xscale: str = "linear"
    yscale: str = "linear"
    plain_ticks: bool = False
    """Log axes labelled 32, 64, 2.5 rather than 3.2×10^1."""
    legend: str | None = "best"
    """The legend's place; None: no legend."""
    legend_if_drawn: bool = False
    """A legend only when a series is drawn."""
    legend_fontsize: float | None = None
    """The legend's type size in points; None: the figure's default."""


@dataclass
class Figure:
    file: str
    title: str
    caption: str
    size: tuple[float, float]
    """(width, height) in inches."""
    panels: list[Panel] = field(default_factory=list)
    grid: tuple[int, int] | None = None
    """(rows, columns) of the panels, filled row by row; None: one row."""
    sharey: bool = False
    """The panels share one y axis."""
    suptitle: str = ""
    """A title over the panels (the record's ``title`` may say less); empty: none."""
