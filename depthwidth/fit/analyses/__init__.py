"""The optional analyses of a fit: one module each, and the registry that lists them.

An analysis module declares

- ``SECTION``: the key of fit.json it writes;
- ``OPTIONS``: the ``FitOptions`` fields it reads (their flags, defaults and help: fit/defaults.py);
- ``wanted(ctx)``, only where it decides further than the option (compare: the laws named, once
  parsed): whether this fit runs it (an analysis the data ask for, with no option, names what in
  the data asks in its registry line instead -- ``Entry.when``, a ``Context`` property -- so a fit
  whose data do not ask imports nothing of it);
- ``section(ctx)``: computes its section from the fit at hand (``Context``); ``None`` when there is
  nothing to say; a warning about the fit joins the fit's own (``ctx.doc["warnings"]``: gradient
  persistence);
- ``verdicts(fit)``, where its table says more than its section's numbers (hold-out, isoFLOP,
  sensitivity): the lines under its table and the cells it marks, decided with the fit's other
  verdicts (fit/result.py) and stored in fit.json's ``verdicts.analyses[SECTION]``.

- ``tables(fit)``: its tables (core/tables.py ``Table``: data, rendered by report/ and cli/) of the
  typed fit (fit/result.py ``FitDocument``): from its section (``fit.sections[SECTION]``) and what the
  fit decided its table says (``said(fit, SECTION)``: ``fit.verdicts.analyses``), deciding nothing again.
- ``figures(fit, **inputs)``, where it has figures of its own (gradient persistence's gradient
  profiles and tau(W), the isoFLOP profiles, FLOPs to match uniform's curves, downstream accuracy vs
  loss): ``{name: Figure, or why it is not drawn}`` (core/figures.py ``Figure``: data -- points,
  curves, labels -- which report/figs.py draws with matplotlib, so an analysis imports no plotting
  library), from the typed fit and what the report passes (``inputs``: gradient persistence's
  ``probes``, the runs' probe records; the match's ``tables`` as the report shows them and the runs'
  final ``points``; downstream's ``tables``, whose ``downstream`` table it reads); the name is the
  one the report's notes give a figure not drawn.

An analysis that is a document of its own (``--match``: match.json, ``--law lr``: lr_fit.json, beside
fit.json) declares ``DOCUMENT`` (its file), ``SCHEMA``, ``FLAG`` and ``CALL`` (how ``dw fit`` and the
library ask for it) and ``WIDTH`` (the terminal its tables need): ``dw fit`` makes it instead of a law
fit (``own(opts)``, pipeline.py ``run_fit``), its ``section`` the document's body; its
``verdicts(doc)`` and ``tables(doc)`` read that document.

``dw fit`` (pipeline.py) runs the ones asked for in ``REGISTRY``'s order (a line names the option
that asks for it, so a fit imports only what it runs); ``dw fit`` and ``dw report`` show their
``tables`` in the same order, ``dw report --plots`` their ``figures`` where its figures list them
(report/figs.py ``make_all``).  Adding an analysis is one module here and one line in ``REGISTRY``.
Its statistics may live in a module of their own (fit/holdout.py,
fit/isoflop.py …) when other parts of dw use them too.

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
    """The ``FitOptions`` field that asks for it; None: no option (``when`` decides, else always)."""
    value: object = None
    """The option's value that asks for it; None: any value but None or False."""
    when: str | None = None
    """Where the data ask for it, with no option: the ``Context`` field or property that says whether
    they do (``picks``, ``simulated``, ``probed``); None: only the option decides."""

    def asked(self, opts) -> bool:
        if self.option is None:
            return True
        v = getattr(opts, self.option)
        return (v is not None and v is not False) if self.value is None else v == self.value

    def runs(self, ctx) -> bool:
        """Whether the fit at hand asks for it: its option, then what in the data asks for it."""
        return self.asked(ctx.opts) and (self.when is None or bool(getattr(ctx, self.when)))

    @property
    def section(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def module(self) -> ModuleType:
        return importlib.import_module(self.name if "." in self.name else f"{__name__}.{self.name}")


REGISTRY = (
    Entry("tuning", when="picks"),  # a tuned sweep: the groups' picks and the fit at one value for every rung beside it
    Entry("compare", "compare"),  # --compare: laws by in-sample and held-out error
    Entry("holdout", "holdout"),  # --holdout: the largest runs predicted from the others
    Entry("isoflop", "approach", "isoflop"),  # --approach isoflop: approach 2 beside the law
    Entry("sensitivity", "sensitivity"),  # --sensitivity: each number under each fitting choice
    Entry("downstream", "metric"),  # --metric: a downstream metric from loss, in two steps
    Entry("planted", when="simulated"),  # a store dw simulate wrote: is the planted truth inside the intervals?
    Entry("gradient_persistence", when="probed"),  # a sweep's runs' probes.jsonl: tau(W) and D_crit by the 1/e rule
    Entry("match", "match"),  # --match: FLOPs to match uniform, match.json instead of a law fit
    Entry("lr_law", "law", "lr"),  # --law lr: a tuned sweep's learning-rate laws, lr_fit.json instead of a law fit
)


def modules() -> list[ModuleType]:
    """Every analysis's module, in the order a fit runs them."""
    return [e.module() for e in REGISTRY]


def own(opts) -> ModuleType | None:
    """The asked analysis that is a document of its own (``DOCUMENT``: ``--match``'s match.json, ``--law
    lr``'s lr_fit.json; the first in ``REGISTRY``'s order), which ``dw fit`` makes instead of a law fit;
    None: a law fit (only asked modules are imported)."""
    for e in REGISTRY:
        if e.option is not None and e.asked(opts) and hasattr(m := e.module(), "DOCUMENT"):
            return m
    return None


@dataclass
class Context:
    """What an analysis reads of the fit at hand (pipeline.py builds it once; for a document of its
    own, made instead of a law fit, only ``opts`` and ``table``)."""

    clean: object = None
    """The table the law was fitted on (rows cleaned, N in the fit's convention)."""
    fr: object = None
    """The engine's result (fit/engine.py ``FitResult``): parameters, theta, warnings."""
    chk: object = None
    """The checked options (fit/options.py ``Checked``): the law, compared laws, K, pins."""
    opts: object = None
    """The ``FitOptions``."""
    iv: object = None
    """The bootstrap's intervals (pipeline.py ``Intervals``)."""
    doc: dict = field(default_factory=dict)
    """The fit.json document so far (``derived``, ``identification`` …)."""
    sweep_dir: object = None
    widths: list = field(default_factory=list)
    count: object = None
    """N(D, W) in the fit's convention (fit/derived.py), None for a user law."""
    n_conv: str = ""
    point: dict = field(default_factory=dict)
    """The derived numbers at the fitted parameters."""
    shared: dict = field(default_factory=dict)
    """What one analysis leaves for a later one (the hold-out's split for --metric's two steps)."""
    table: object = None
    """The runs this fit is about, before cleaning: the table as read, ``--where`` and the tuned picks
    applied (failed runs still in it)."""
    untuned: object = None
    """A tuned sweep's table before the tuned picks (``--where`` applied): every run of every group."""
    picks: list = field(default_factory=list)
    """A tuned sweep's picks (fit/tuning.py ``Pick``: each group's best), which chose ``table``."""
    refit: object = None
    """``refit(table, options) -> dict``: another fit as ``dw fit`` makes it (pipeline.py ``run_fit``,
    not written), for an analysis that sets a second fit beside this one (tuning's fixed-value fit);
    passed in, as an analysis may not import pipeline.py."""

    @property
    def simulated(self) -> bool:
        """Every run of the fitted table was planted by ``dw simulate`` (its store keeps the world)."""
        c = self.clean
        return self.sweep_dir is not None and "simulated" in c and bool(c["simulated"].astype(bool).all())

    @property
    def probed(self) -> bool:
        """A run of the store wrote per-layer gradient probes (its ``probes.jsonl``)."""
        from depthwidth.core.store import store_runs

        return self.sweep_dir is not None and any(
            (d / "probes.jsonl").is_file() for d in store_runs(self.sweep_dir)[0].values()
        )

    @property
    def common(self) -> dict:
        """The fitting settings every refit uses."""
        o = self.opts
        return {"delta": o.delta, "seed": o.seed, "max_starts": o.max_starts}


def run_all(ctx: Context) -> dict:
    """{section: value} of every analysis this fit asked for (the others are not imported)."""
    out = {}
    for e in REGISTRY:
        if not e.runs(ctx):
            continue
        m = e.module()
        if not hasattr(m, "wanted") or m.wanted(ctx):
            value = m.section(ctx)
            if value is not None:
                out[m.SECTION] = value
    return out


def verdicts(fit: dict) -> dict:
    """{section: what its table says} of every analysis section ``fit`` holds whose module decides
    any (``verdicts``; fit/result.py stores them); an analysis whose section is absent is not imported."""
    out = {}
    for e in REGISTRY:
        if fit.get(e.section) and hasattr(m := e.module(), "verdicts"):
            out[e.section] = m.verdicts(fit)
    return out


def said(fit, section: str) -> dict:
    """What the fit decided ``section``'s table says ({lines, …}; empty when it says nothing more), as
    its verdicts hold it (fit.json's ``verdicts.analyses``; a document read without them has them
    decided when read: fit/result.py)."""
    return (fit.verdicts.analyses if fit.verdicts else {}).get(section) or {}


def tables(fit, sections: tuple[str, ...] | None = None) -> dict:
    """{key: Table} of every analysis section ``fit`` holds (of ``sections`` only, in that order, when
    given), each its module's ``tables(fit)``; an analysis whose section is absent is not imported.
    ``fit``: the typed fit (fit/result.py ``FitDocument``)."""
    entries = {e.section: e for e in REGISTRY}
    out = {}
    for name in entries if sections is None else sections:
        if fit.sections.get(name) and name in entries:
            out.update(entries[name].module().tables(fit))
    return out


def figures(fit, section: str, **inputs) -> dict:
    """{name: Figure, or why it is not drawn} of analysis ``section``: its module's ``figures(fit,
    **inputs)`` (empty when it has none), asked whether or not ``fit`` holds its section (a figure may
    be drawn from what the report passes: gradient persistence's tau(W) without a fit.json).
    ``fit``: the typed fit (fit/result.py ``FitDocument``) or None."""
    entry = {e.section: e for e in REGISTRY}[section]
    m = entry.module()
    return m.figures(fit, **inputs) if hasattr(m, "figures") else {}
