"""Every choice of a fit in one dataclass: ``FitOptions``, shared by ``dw fit``, ``dw fit --match``
and the report.

``dw fit`` builds one from its flags and passes it to ``run_fit`` (pipeline.py;
with ``--match`` it makes match.json instead of a law fit, fit/analyses/match.py:
it reads the sampling options, ``where``, ``bootstrap``, ``level``, ``seed``, ``delta``).  A fit.json
records the law's options and filter; ``FitOptions.of_document(doc)`` reads
them back, so the report, ``--force`` and the preferred-law line name a fit
the same way (``label``: ``chinchilla``, ``depth-delusion[log+E]`` …).

``checked()`` validates every option before anything is read (bad input:
one line, exit 2) and returns the parsed values the pipeline works with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from depthwidth.core.errors import bad
from depthwidth.fit.boot import RESAMPLE
from depthwidth.fit.derived import check_convention
from depthwidth.fit.defaults import default
from depthwidth.fit.holdout import parse_holdout
from depthwidth.fit.isoflop import AXES as ISOFLOP_AXES
from depthwidth.fit.laws import LAW_NAMES, Law, get_law, label, parse_pins
from depthwidth.fit.tuning import MODES as TUNED_MODES
from depthwidth.fit.userlaw import is_law_file, is_user, law_of_label, load_law

APPROACHES = ("3", "isoflop")  # 3: the law fitted to every point; isoflop: approach 2 beside it
DCRIT_FORMS = ("log", "power")


MAX_BOOTSTRAP = 100_000  # bootstrap replicates: far past where intervals stop moving (a few thousand)


@dataclass(frozen=True)
class Checked:
    """The options parsed: the law, the laws to compare, K of the hold-out, N's convention, the pins."""

    law: Law
    compare: list
    holdout_k: int | None
    n_convention: str
    pins: dict


@dataclass(frozen=True)
class FitOptions:
    """Every choice of a fit; each field's default, allowed values and help: fit/defaults.py."""

    law: str | dict | Law = default("law")  # a built-in law's name, or a user law: FILE.yaml, a dict, a Law
    dcrit: str = default("dcrit")
    irreducible: bool = default("irreducible")
    where: list | tuple | None = default("where")  # COLUMN=VALUE filters of the table's rows
    bootstrap: int = default("bootstrap")
    resample: str = default("resample")  # what a replicate redraws (fit/boot.py)
    level: float = default("level")
    seed: int = default("seed")
    delta: float = default("delta")
    max_starts: int = default("max_starts")
    pins: object = default("pins")  # NAME=VALUE, a string or a list of them
    compare: str | None = default("compare")
    holdout: str | None = default("holdout")
    sensitivity: bool = default("sensitivity")
    approach: str = default("approach")
    isoflop_axis: str = default("isoflop_axis")
    n_convention: str | None = default("n_convention")  # None: the law's own
    c_ref: float = default("c_ref")
    probe_step: int = default("probe_step")
    metric: str | None = default("metric")  # analyses/downstream.py
    tuned: str | None = default("tuned")  # tuning.py; None: best
    pool_shapes: bool = default("pool_shapes")
    match: bool = default("match")  # analyses/match.py: match.json instead of a law fit

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of_document(cls, doc: dict) -> "FitOptions":
        """The law and filter a fit.json was fitted with (documents before ``options``: log, no E)."""
        law = law_of_label(doc.get("law", "chinchilla"), doc.get("options"))
        return cls(
            law=dict(law.options["user"]) if is_user(law) else law.name,
            dcrit=law.options.get("dcrit", "log"),
            irreducible=bool(law.options.get("irreducible", False)),
            where=list(doc.get("where") or []),
        )

    @property
    def where_list(self) -> list[str]:
        return [str(w) for w in (self.where or [])]

    def make_law(self) -> Law:
        """The law to fit; ``--dcrit`` and ``--irreducible`` shape depth-delusion only."""
        if isinstance(self.law, Law):
            return self.law
        if isinstance(self.law, str) and self.law in LAW_NAMES:  # a built-in: no law file ends in .yaml
            return get_law(self.law, dcrit=self.dcrit, irreducible=self.irreducible)
        if isinstance(self.law, dict) or is_law_file(self.law):
            return load_law(self.law)
        raise bad("--law", self.law, " | ".join(LAW_NAMES) + " | a law file FILE.yaml (docs/user_laws.md)")

    @property
    def label(self) -> str:
        return label(self.make_law())

    def identity(self) -> dict:
        """What makes two fits of one sweep the same fit (the report shows one): law and filter."""
        return {"law": self.label, "where": sorted(self.where_list)}

    def check_sampling(self) -> None:
        """The options every fit reads, ``--match`` included."""
        if not 0 <= self.bootstrap <= MAX_BOOTSTRAP:  # 1e12 replicates once asked numpy for 7.28 TiB
            raise bad("--bootstrap", self.bootstrap, f"an integer in [0, {MAX_BOOTSTRAP:,}] (0 disables intervals)")
        if not (self.delta > 0 and math.isfinite(self.delta)):
            raise bad("--huber-delta", self.delta, "a number > 0")
        if not 0 < self.level < 1:
            raise bad("--ci", self.level, "a level in (0, 1), e.g. 0.95")

    def checked(self) -> Checked:
        """Every option of a law fit checked, in the order the flags are documented."""
        self.check_sampling()
        if self.dcrit not in DCRIT_FORMS:
            raise bad("--dcrit", self.dcrit, " | ".join(DCRIT_FORMS))
        names: list[str] = []
        for c in (self.compare or "").split(","):
            c = c.strip()
            if c and c not in LAW_NAMES:
                raise bad("--compare", c, " | ".join(LAW_NAMES))
            if c and c not in names:
                names.append(c)
        if self.approach not in APPROACHES:
            raise bad("--approach", self.approach, " | ".join(APPROACHES))
        if self.isoflop_axis not in ISOFLOP_AXES:
            raise bad("--isoflop-axis", self.isoflop_axis, " | ".join(ISOFLOP_AXES))
        holdout_k = None if self.holdout is None else parse_holdout(self.holdout)  # fit/holdout.py only when asked
        law = self.make_law()
        n_conv = check_convention(self.n_convention, law.name)
        if self.resample not in RESAMPLE:
            raise bad("--resample", self.resample, " | ".join(RESAMPLE))
        c = self.c_ref
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise bad("--c-ref", c, "a compute in FLOPs > 0, e.g. 1e21")
        pins = parse_pins(self.pins, law)
        if self.tuned is not None and self.tuned not in TUNED_MODES:
            raise bad("--tuned", self.tuned, " | ".join(TUNED_MODES))
        if self.max_starts < 1:
            raise bad("--max-starts", self.max_starts, "an integer >= 1")
        return Checked(law, names, holdout_k, n_conv, pins)
