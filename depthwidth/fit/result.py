"""A fit's result as typed records: what ``fit.json`` holds (schema ``dw.fit/1``), read and written here.

``FitDocument`` is the document ``dw fit`` writes, field by field (``dw fit`` writes it through it; the
engine's own numeric result is fit/engine.py's ``FitResult``); the optional analyses (law
comparison, hold-out, sensitivity, isoFLOP, planted truth, tuning, …) stay their own sections,
kept in order under ``sections``.  ``Verdicts`` are every line and flag a reader prints about the
fit — the fitted law's label, each parameter's flags, the optima and D_crit values outside the
meaningful range, the verdict lines under the fit (the D_crit ladder first, fit/verdicts.py), the
optima's caveat, the planted-truth line, what the loss-vs-depth figure draws (which law, solid or
dashed, and why) and the line said when the claim is not identified, what each analysis' table
says (its lines, the cells it marks) — decided once when the fit is made (``decide``) and stored
in fit.json as ``verdicts``.  ``dw fit`` (fit/pipeline.py ``fit_document``) returns a FitDocument and
``dw report`` reads fit.json into one (report/load.py); their tables (report/, each analysis'
``tables``) walk it, reading its verdicts as stored and deciding none again.  A fit.json written
before ``verdicts`` existed, or under older rules (``version``), is still read: its verdicts are
decided when it is loaded, by the same rules (``Rules``, the old-file path); one that kept gradient
persistence inside ``derived`` has it read as its own section (``MOVED``).

Standard library only at import (``dw status`` reads a fit without the fit engine).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA = "dw.fit/1"
# 2: what each analysis' table says (``analyses``); 3: ``figure``, ``truth_line``; 4: optima bound by the claim
VERDICTS_VERSION = 4


@dataclass
class Verdicts:
    """Every line and flag printed about a fit, decided when it is made (fit/verdicts.py's rules)."""

    label: str
    """The fitted law's label, e.g. ``depth-delusion[log]`` (law and D_crit form)."""
    parameters: dict[str, list[str]]
    """Per parameter, what to say beside it: pinned, on bound, CI ∋ 0, interval withheld/flagged."""
    optimum: dict[str, dict]
    """D_opt and W_opt of the compute-optimal allocation: {value, identified, because}."""
    dcrit_range: dict[str, dict]
    """D_crit at each sweep width and reference model: {value, identified, because} (below one layer: not)."""
    notes: list[str]
    """The verdict lines under the fit: the claim (the D_crit ladder's line), each optimum not
    identified, the preferred law, and what the fit rests on."""
    optima_caveat: str | None = None
    """One warning when the optima derive from a claim the fit does not identify, else None."""
    planted: str | None = None
    """A simulated store's fit against its planted world, in one line, else None."""
    figure: dict | None = None
    """What a figure draws of the fit, as its verdict allows (fit/verdicts.py ``drawn``): {fit: {law,
    options, params}, style: solid | dashed, label, line: why (or None), alternative: {fit, label} to
    draw dashed beside, or None}; None without fitted parameters."""
    truth_line: str | None = None
    """The one line said when the fit's claim is not identified (the law the held-out comparison
    prefers, drawn instead, or else the verdict), else None."""
    analyses: dict[str, dict] = field(default_factory=dict)
    """What each analysis' table says beyond its section's numbers, by section (fit/analyses/):
    ``lines`` under it (hold-out, isoFLOP, sensitivity) and, for sensitivity, ``not_identified``:
    per number, the fitting choices whose value is outside the meaningful range."""
    version: int = VERDICTS_VERSION
    """The rules' version: a fit.json whose verdicts are older is decided again when read."""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Verdicts:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def decide(cls, doc: dict) -> Verdicts:
        """The verdicts of fit document ``doc``, every one by its rule (imports them: numpy, the laws)."""
        rules = Rules(doc)
        return cls(**{f.name: getattr(rules, f.name) for f in fields(cls) if f.name != "version"})


class Rules:
    """The verdicts of a fit document, each decided by its rule (fit/verdicts.py, an analysis' own
    ``verdicts``) when it is read (``rules.notes``; ``Verdicts.decide`` reads them all): when ``dw fit``
    makes the fit, and for a document that does not store them (a fit.json written before they
    were, one made by hand, one under older rules) when ``FitDocument.from_json`` reads it: the
    old-file path, the one place a reader of fit.json has a verdict decided."""

    def __init__(self, doc: dict):
        self._doc = doc

    @property
    def label(self) -> str:
        from depthwidth.fit.verdicts import fitted_label

        return fitted_label(self._doc) if self._doc.get("law") else ""

    @property
    def parameters(self) -> dict:
        from depthwidth.fit.verdicts import parameter_flags

        return parameter_flags(self._doc)

    @property
    def optimum(self) -> dict:
        from depthwidth.fit.verdicts import flags

        return flags(self._doc)[0]

    @property
    def dcrit_range(self) -> dict:
        from depthwidth.fit.verdicts import flags

        return flags(self._doc)[1]

    @property
    def notes(self) -> list:
        from depthwidth.fit.verdicts import identification_notes

        return identification_notes(self._doc)

    @property
    def optima_caveat(self) -> str | None:
        from depthwidth.fit.verdicts import optima_caveat

        return optima_caveat(self._doc)

    @property
    def planted(self) -> str | None:
        from depthwidth.fit.analyses.planted import summary_line

        return summary_line(self._doc["planted"]) if self._doc.get("planted") else None

    @property
    def figure(self) -> dict | None:
        import json

        from depthwidth.fit.verdicts import drawn

        return json.loads(json.dumps(drawn(self._doc)))  # as fit.json holds it (lists, not tuples)

    @property
    def truth_line(self) -> str | None:
        from depthwidth.fit.verdicts import truth_line

        return truth_line(self._doc)

    @property
    def analyses(self) -> dict:
        from depthwidth.fit.analyses import verdicts

        return verdicts(self._doc)


@dataclass
class FitDocument:
    """``fit.json``: one fit of a law to a run table, with its intervals, checks and verdicts."""

    law: str
    """The law's name (``depth-delusion``, ``chinchilla``, a user law's file name …)."""
    params: dict[str, float]
    """The fitted parameters, by the law's names."""
    ci: dict[str, list[float]] = field(default_factory=dict)
    """95% interval of each parameter (bootstrap; see ``bootstrap``), where one is shown."""
    n: int = 0
    """Points fitted (a run's token budgets are points)."""
    n_runs: int = 0
    """Runs fitted."""
    r2: float | None = None
    """R² of the fitted law on its points."""
    rmse: float | None = None
    """RMSE (nats) of the fitted law on its points."""
    rmse_log: float | None = None
    """RMSE of log loss (None for a user law fitted with ``objective: raw``)."""
    objective: float | None = None
    """The Huber objective's value at the fit."""
    huber_delta: float | None = None
    """The Huber delta (on log loss; on the loss itself for ``objective: raw``)."""
    formula: str = ""
    """The law's formula as text."""
    options: dict = field(default_factory=dict)
    """The law's options (D_crit form …) and the fit's settings."""
    n_convention: dict = field(default_factory=dict)
    """Which parameter count N the law read (fit/derived.py)."""
    where: list[str] = field(default_factory=list)
    """The ``--where`` filters applied (a shape-blind law on a store of shapes: ``shape=uniform``)."""
    excluded: list = field(default_factory=list)
    """Rows left out before the fit, each with its reason (failed, diverged, no loss …)."""
    derived: dict = field(default_factory=dict)
    """Numbers derived from the law: D_crit per width and reference model, the compute-optimal shape."""
    pinned: dict = field(default_factory=dict)
    """Parameters fixed with ``--pin``, and their values."""
    on_bound: list = field(default_factory=list)
    """Parameters that ended on a bound of their range."""
    starts: dict = field(default_factory=dict)
    """The multi-start search: starts tried and converged, the precision it ran in."""
    checks: dict = field(default_factory=dict)
    """The depth penalty's BIC support and the law without it (fit/verdicts.py)."""
    bootstrap: dict = field(default_factory=dict)
    """The bootstrap: replicates asked and converged, what a replicate redraws (``--resample``)."""
    ci_withheld: dict = field(default_factory=dict)
    """Intervals not shown, each with why (fit/boot.py)."""
    ci_flagged: dict = field(default_factory=dict)
    """Intervals shown with a flag, each with why."""
    underdetermined: list = field(default_factory=list)
    """Lines said before any number: what the data cannot determine."""
    warnings: list[str] = field(default_factory=list)
    """Every warning line of the fit, in the order it is printed."""
    identification: dict | None = None
    """What the fit rests on and its claim (the D_crit ladder: docs/CONTRACTS.md)."""
    verdicts: Verdicts | None = None
    """Every line and flag printed about the fit, decided when it was made."""
    source: dict = field(default_factory=dict)
    """What the runs were read from: the sweep and its folder, or the table file, and ``--columns``."""
    provenance: dict = field(default_factory=dict)
    """Code (git commit, dirty flag), versions and the input table's fingerprint."""
    seconds: float | None = None
    """Wall time of the fit."""
    sections: dict[str, Any] = field(default_factory=dict)
    """The optional analyses, each its own section as written (compare, holdout, sensitivity,
    isoflop, planted, tuning, replicates, downstream, gradient_persistence …; a fit.json written
    before gradient_persistence was a section kept it in ``derived``, read here as the section)."""
    schema: str = SCHEMA
    """The document's schema (``dw.fit/1``)."""
    written: str | None = field(default=None, compare=False)
    """Where ``dw fit`` wrote it (None: not written); not part of fit.json."""

    @classmethod
    def from_json(cls, doc: dict) -> FitDocument:
        """A fit.json document as a FitDocument; one written before ``verdicts`` (or under older rules)
        gets them decided now, one written before gradient persistence was its own section has it
        moved there (``_moved``)."""
        doc = _moved(doc)
        names = {f.name for f in fields(cls)} - {"sections", "verdicts"}
        kw = {k: v for k, v in doc.items() if k in names}
        sections = {k: v for k, v in doc.items() if k not in names and k != "verdicts"}
        verdicts = _stored(doc) or Verdicts.decide(doc)
        return cls(**kw, verdicts=verdicts, sections=sections)

    def to_json(self) -> dict:
        """The fit.json document: every field under its own key, the sections after the fit's own."""
        out: dict = {"schema": self.schema}
        for f in fields(self):
            if f.name in ("schema", "sections", "verdicts", "seconds", "written"):
                continue
            out[f.name] = getattr(self, f.name)
        out.update(self.sections)
        out["verdicts"] = self.verdicts.to_json() if self.verdicts else None
        out["seconds"] = self.seconds
        return out

    def as_dict(self) -> dict:
        """``to_json()`` and, when it was written, where (``written``, last): what ``run_fit`` returns
        and ``dw fit --json`` prints."""
        return {**self.to_json(), **({"written": self.written} if self.written else {})}


def with_verdicts(doc: dict) -> dict:
    """``doc`` with its ``verdicts`` decided (what ``dw fit`` writes; a document read without them)."""
    return {**doc, "verdicts": Verdicts.decide(doc).to_json()}


MOVED = {"gradient_persistence": "derived"}
"""Sections an older fit.json kept inside another field: {section: the field that held it}."""


def _moved(doc: dict) -> dict:
    """``doc`` with each section an older fit.json kept inside another field (``MOVED``: gradient
    persistence in ``derived``) under its own key, as ``dw fit`` writes it now; else ``doc`` itself."""
    for sec, holder in MOVED.items():
        inner = doc.get(holder)
        if isinstance(inner, dict) and sec in inner and sec not in doc:
            doc = {**doc, holder: {k: v for k, v in inner.items() if k != sec}, sec: inner[sec]}
    return doc


def _stored(doc: dict) -> Verdicts | None:
    """The verdicts ``doc`` stores under the current rules, else None."""
    v = doc.get("verdicts")
    return Verdicts.from_json(v) if isinstance(v, dict) and v.get("version") == VERDICTS_VERSION else None
