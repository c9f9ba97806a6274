"""The optional analyses of a fit: one module each, and the registry that lists them.

An analysis module declares

- ``SECTION``: the key of fit.json it writes;
- ``OPTIONS``: the ``FitOptions`` fields it reads (their flags, defaults and help: fit/defaults.py);
- ``wanted(ctx)``: whether this fit asked for it (or, for some, whether its data call for it);
- ``section(ctx)``: computes its section from the fit at hand (``Context``), verdict lines
  included — decided here, once, and stored; ``None`` when there is nothing to say;
- ``tables(fit)``: ``{key: Table}``, its section as ``dw fit`` prints it and ``dw report`` shows it.

``dw fit`` (pipeline.py) runs the ones asked for in ``REGISTRY``'s order (a line names the option
that asks for it, so a fit imports only what it runs); the report walks the same list for their
tables and never calls back into the fit to decide.  Adding an analysis is one module here and one
line in ``REGISTRY``.  Its statistics may live in a module of their own
(fit/holdout.py, fit/isoflop.py …) when other parts of dw use them too.

Standard library at import: a module is imported when a fit or a report first needs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType


@dataclass(frozen=True)
class Entry:
    """One line of the registry: the analysis (its module's name, which is its fit.json section)
    and the option that asks for it, so that a fit imports only the analyses it runs."""

    name: str
    """The module under fit/analyses/ (a dotted name: a module elsewhere) and its SECTION."""
    option: str | None = None
    """The ``FitOptions`` field that asks for it; None: the module's ``wanted(ctx)`` decides."""
    value: object = None
    """The option's value that asks for it; None: any value but None, False or empty."""

    def asked(self, opts) -> bool:
        if self.option is None:
            return True
        v = getattr(opts, self.option)
        return bool(v) if self.value is None else v == self.value

    @property
    def section(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def module(self) -> ModuleType:
        return importlib.import_module(self.name if "." in self.name else f"{__name__}.{self.name}")


REGISTRY = (
    Entry("compare", "compare"),  # --compare: laws by in-sample and held-out error
    Entry("holdout", "holdout"),  # --holdout: the largest runs predicted from the others
    Entry("isoflop", "approach", "isoflop"),  # --approach isoflop: approach 2 beside the law
    Entry("sensitivity", "sensitivity"),  # --sensitivity: each number under each fitting choice
    Entry("downstream", "metric"),  # --metric: a downstream metric from loss, in two steps
    Entry("planted"),  # a store dw simulate wrote: is the planted truth inside the intervals?
)


def modules() -> list[ModuleType]:
    """Every analysis's module, in the order a fit runs them."""
    return [e.module() for e in REGISTRY]


@dataclass
class Context:
    """What an analysis reads of the fit at hand (pipeline.py builds it once)."""

    clean: object
    """The table the law was fitted on (rows cleaned, N in the fit's convention)."""
    fr: object
    """The engine's result (fit/solver.py ``FitResult``): parameters, theta, warnings."""
    chk: object
    """The checked options (fit/options.py ``Checked``): the law, compared laws, K, pins."""
    opts: object
    """The ``FitOptions``."""
    iv: object
    """The bootstrap's intervals (pipeline.py ``Intervals``)."""
    doc: dict
    """The fit.json document so far (``derived``, ``identification`` …)."""
    sweep_dir: object = None
    widths: list = field(default_factory=list)
    count: object = None
    """N(D, W) in the fit's convention (fit/count.py), None for a user law."""
    n_conv: str = ""
    point: dict = field(default_factory=dict)
    """The derived numbers at the fitted parameters."""
    shared: dict = field(default_factory=dict)
    """What one analysis leaves for a later one (the hold-out's split for --metric's two steps)."""

    @property
    def common(self) -> dict:
        """The fitting settings every refit uses."""
        o = self.opts
        return {"delta": o.delta, "seed": o.seed, "max_starts": o.max_starts}


def run_all(ctx: Context) -> dict:
    """{section: value} of every analysis this fit asked for (the others are not imported)."""
    out = {}
    for e in REGISTRY:
        if not e.asked(ctx.opts):
            continue
        m = e.module()
        if m.wanted(ctx):
            value = m.section(ctx)
            if value is not None:
                out[m.SECTION] = value
    return out


def tables(fit: dict, sections: tuple[str, ...] | None = None) -> dict:
    """{key: Table} of every analysis section ``fit`` holds (of ``sections`` only, in that order,
    when given); an analysis whose section is absent is not imported."""
    by = {e.section: e for e in REGISTRY}
    out = {}
    for name in by if sections is None else sections:
        if fit.get(name) and name in by:
            out.update(by[name].module().tables(fit))
    return out
