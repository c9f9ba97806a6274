"""User-defined laws: ``dw fit --law FILE.yaml`` (docs/user_laws.md), or a dict from Python.

A law file::

    name: farseer                       # optional: default the file's stem
    formula: "exp(s*N**q + S) + exp(B*N**b + Q) * D**(-exp(A*N**a + E))"
    columns: {N: params, D: tokens}     # optional: symbol -> run-table column
    define: {x: "N/1e9"}                # optional: named sub-expressions, in order
    params:                             # every parameter: bounds required
      E: {bounds: [-5, 5], start: [-1, 0, 1]}
      A: {bounds: [1e-3, 1e4], start: [1, 100], log: true}

``load_law(path_or_dict) -> Law`` is the one entry point (``dw fit``, and code that builds a
law from a dict: a future ``dw suggest``, the ScaleBench benchmark).  The law it returns goes
through the same engine, bootstrap, hold-out, pins and checks as the built-in laws.

Design, and why:

* **The formula is one term** of the engine's log-sum-exp (laws.py): its log value is
  ``log f`` and its partials ``(d f / d theta) / f``.  Every law the engine fits is "the log of
  a positive loss"; a user's formula is a sum of pieces the engine cannot see inside, so it is
  handed over whole.  Where ``f <= 0`` (or overflows) the log is NaN or infinite, and the
  engine reads that as an infinite objective: a bad start or a rejected step, never a crash.
* **objective: raw** makes the term ``f`` itself and its partials ``d f / d theta`` (the
  log-sum-exp of one term is that term, exactly): the engine then fits L, of any sign, and
  ``Law.fitted`` / ``Law.to_loss`` (laws.py) carry the table's losses and the predictions between
  the two scales wherever the engine, the bootstrap, the hold-out and predictions meet them.
* **Safe evaluator** (expr.py): Python's ``ast`` parses, a whitelist checks every node, a small
  tree walker evaluates with numpy; nothing is ``eval``-ed.
* **Exact derivatives** by forward-mode differentiation of the tree (expr.py): exact in the
  engine's float32 search as in its float64 polish, with no step size to pick for parameters
  whose scales differ by orders of magnitude.
* **Parameters in natural units with linear bounds.**  ``log: true`` fits a positive
  parameter through its logarithm (as the built-in laws fit coefficients), which helps when
  its plausible values span decades; bounds and starts are still written in natural units.
* **Indexed parameters**: a ``params:`` key ``a[1..5]`` declares ``a[1]`` ... ``a[5]`` with one
  spec (laws of 15-40 parameters are written with a few such keys); each element is an ordinary
  parameter named as the formula reads it (``a[3]``, expr.element_name), so nothing downstream
  knows about indexing, and the normalised form keeps the key as written.
* **Several outputs** (``outputs: {code: ..., math: ...}`` instead of ``formula:``) are one
  formula too: ``where`` over an indicator column per output (``output=code``), so the engine, the
  bootstrap and the hold-out see one law; ``long_table`` melts a wide run table (a run's losses in
  a column per output) into one row per run and output, a run's rows sharing its ``run``, so the
  bootstrap resamples runs with all their outputs.
* **Starts are a list of values** (natural units), the form the built-in laws' grids take;
  the engine multi-starts from their Cartesian product (a fixed-seed subset of
  ``--max-starts`` when larger).  Without ``start``: the quartiles of the bounds (geometric
  for ``log: true``).
* **Symbols**: a name in the formula is a parameter, a definition, a symbol mapped under
  ``columns:``, or else the run-table column of that name (checked against the table before
  the fit: an unknown one is bad input naming it).  ``columns: {X: shape=x}`` maps a symbol to
  an indicator (1 where the column equals the value, else 0): how a law reads a text column
  such as the width shape (Law.data).
* **Names** must differ from the built-in laws' (chinchilla …): code downstream (derived
  numbers, verdicts, calibration) keys built-in behaviour on the name.
* **Reproducible**: ``Law.options["user"]`` holds the normalised law (so a fit.json's law can
  be rebuilt, as built-in laws are from their options), and ``record`` what ``fit.json``'s
  provenance keeps: the file, its sha256 and its text.

Derived numbers that belong to built-in laws (D_crit, the compute-optimal allocation) and the
claim-carrying parameter of the verdicts do not exist for a user law; those sections are empty.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from depthwidth.core.errors import BadInput, bad, did_you_mean
from depthwidth.fit import expr
from depthwidth.fit.laws import LAW_NAMES, Law, Param, builtin_of_label, is_user

KEYS = ("name", "formula", "outputs", "columns", "define", "params", "objective")
OUTPUT = "output"  # a multi-output law's long table: the column naming each row's output
OBJECTIVES = ("log", "raw")  # objective: the scale the law is fitted on (log L, or L itself)
PARAM_KEYS = ("bounds", "start", "log")
LOG_SPAN = 1e3
"""Without ``log:``, a parameter whose bounds are positive and span this factor or more (three
decades) is fitted through its logarithm: a scale whose magnitude the bounds leave open by decades,
where linear quartile starts would all sit in the top decade (on [1e-3, 1e9]: 2.5e8, 5e8, 7.5e8)
and geometric ones cover every part of the range alike.  ``log: false`` keeps it linear."""
SUFFIXES = (".yaml", ".yml")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
QUARTILES = (0.25, 0.5, 0.75)  # default starts: these fractions of the bounds
TARGET = "loss"  # what every law predicts: no formula reads it


def is_law_file(value) -> bool:
    """Whether a ``--law`` value names a law file rather than a built-in law."""
    return isinstance(value, (str, os.PathLike)) and str(value).lower().endswith(SUFFIXES)


@dataclass(frozen=True)
class UserLaw(Law):
    """A law from a file or dict; ``source``: where it came from (``record``)."""

    source: Mapping = field(default_factory=dict)

    @property
    def objective(self) -> str:
        return str(self.options["user"].get("objective", "log"))


@dataclass(frozen=True, eq=False)
class Formula:
    """The whole user formula as one term of a law (laws.py): its log value and partials.

    ``tree``: the formula; ``parameters``: (name, fitted through its log) pairs; ``symbols``:
    formula symbol -> table column; ``define``: (name, tree) in order.
    """

    tree: tuple
    parameters: tuple[tuple[str, bool], ...]
    symbols: tuple[tuple[str, str], ...]
    define: tuple[tuple[str, tuple], ...] = ()
    raw: bool = False  # objective: raw -- the term is f itself, not log f (one term: the law's value is f)

    def params(self):
        return tuple(p for p, _ in self.parameters)

    def columns(self):
        out: list[str] = []
        for _, c in self.symbols:
            if c not in out:
                out.append(c)
        return tuple(out)

    def _f(self, th, X, diff: bool):
        """f (S, n) and, with ``diff``, {param: d f / d internal value}."""
        env = {}
        for name, log in self.parameters:
            u = th[name]
            v = np.exp(u) if log else u
            env[name] = (v, ({name: v} if log else {name: 1.0}) if diff else {})
        for sym, col in self.symbols:
            env[sym] = (X[col], {})
        for name, tree in self.define:
            env[name] = expr.evaluate(tree, env)
        f, g = expr.evaluate(self.tree, env)
        shape = (len(next(iter(th.values()))), len(X["_zero"]))
        return np.broadcast_to(f, shape), g, shape

    def value(self, th, X, smooth):
        with np.errstate(all="ignore"):
            f, _, shape = self._f(th, X, False)
            if self.raw:  # a fresh array: the engine works on it in place
                return np.array(np.broadcast_to(f, shape))
            return np.log(f)

    def grads(self, th, X, smooth):
        with np.errstate(all="ignore"):
            f, g, shape = self._f(th, X, True)
            if self.raw:
                return {k: np.broadcast_to(d, shape) for k, d in g.items()}
            return {k: np.broadcast_to(d / f, shape) for k, d in g.items()}


def law_of_label(lab: str, options: dict | None = None) -> Law:
    """The law a fit.json or a compare row names, rebuilt to be evaluated: ``chinchilla``,
    ``width-depth``, ``depth-delusion[log+E]`` … with its options (a user-defined law from the
    normalised law its options hold).  The one place a stored law becomes a ``Law`` again: ``dw
    fit``'s verdicts, predictions and designs, and the report's fitted curves."""
    if options and "user" in options:
        return load_law(options["user"])
    return builtin_of_label(lab, options)


def load_law(spec) -> Law:
    """A user-defined law from a YAML file's path or from a dict of the same keys (bad input: one line)."""
    if isinstance(spec, Mapping):
        doc = dict(spec)
        where = f"law {doc['name']}" if isinstance(doc.get("name"), str) else "law"
        text = json.dumps(doc, sort_keys=True, default=str)
        source = {"file": None, "sha256": hashlib.sha256(text.encode()).hexdigest()}
        return _build(doc, where, "user-law", source)
    path = Path(spec)
    try:
        raw = path.read_bytes()
    except OSError:
        raise bad(
            "--law", str(spec), "chinchilla | depth-delusion | width-depth | an existing law file FILE.yaml"
        ) from None
    import yaml

    try:
        text = raw.decode("utf-8")
        doc = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise BadInput(f"law file {path} is not valid YAML: {' '.join(str(e).split())[:300]}") from None
    if not isinstance(doc, dict):
        raise bad(f"law file {path}", doc, "a mapping with keys " + ", ".join(KEYS))
    source = {"file": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "text": text}
    return _build(doc, path.name, path.stem, source)


def _build(doc: dict, where: str, default_name: str, source: dict) -> Law:
    unknown = [k for k in doc if k not in KEYS]
    if unknown:
        k = str(unknown[0])
        raise BadInput(f"{where}: unknown key {k!r}: {did_you_mean(k, KEYS)}(allowed: {', '.join(KEYS)})")
    name = doc.get("name", default_name)
    if not (isinstance(name, str) and NAME.match(name)) or name in LAW_NAMES:
        raise bad(
            f"{where} name",
            name,
            "letters, digits, _ . - (starting with a letter), not a built-in law's name ("
            + " | ".join(LAW_NAMES)
            + ")",
        )
    if ("formula" in doc) == ("outputs" in doc):
        raise bad(
            f"{where} formula",
            None if "formula" not in doc else "formula and outputs",
            'an expression, e.g. "E + A*N**(-alpha)", or outputs: {NAME: EXPRESSION, ...} for a law of '
            "several outputs (one of the two)",
        )
    if "formula" in doc:
        formula = doc["formula"]
        parts = [("formula", expr.parse(formula, f"{where} formula"))]
        outs: dict[str, str] = {}
    else:
        outs = _outputs(doc["outputs"], where)
        formula = "; ".join(f"{k}: {v}" for k, v in outs.items())
        parts = [(f"outputs.{k}", expr.parse(v, f"{where} outputs.{k}")) for k, v in outs.items()]
    params, natural = _params(doc.get("params"), where)
    names = [p.name for p in params]
    columns = _columns(doc.get("columns"), where, names)
    define = _define(doc.get("define"), where, names, columns)
    known = set(names) | {d for d, _ in define}
    used_params: set[str] = set()
    symbols: dict[str, str] = {}
    for part, t in [(f"define {d}", dt) for d, dt in define] + parts:
        for s in expr.symbols(t):
            if s in names:
                used_params.add(s)
            elif "[" in s:  # an element no params: key declares
                declared = [k for k in natural if INDEXED.match(k)] or ["none"]
                raise bad(f"{where} {part} symbol", s, "an element of an indexed parameter: " + ", ".join(declared))
            elif s not in known:  # a column: mapped under columns:, else the column of that name
                col = columns.get(s, s)
                if col == TARGET or col in outs or col == OUTPUT and outs:
                    raise bad(
                        f"{where} {part} symbol",
                        s,
                        f"a parameter or a column other than {', '.join([TARGET, *outs])} (the law predicts it)",
                    )
                symbols[s] = col
    unused = [n for n in names if n not in used_params]
    if unused:
        raise bad(f"{where} params", unused[0], "parameters the formula or a definition reads")
    objective = doc.get("objective", "log")
    if objective not in OBJECTIVES:
        raise bad(
            f"{where} objective", objective, "log (fit log L: the loss must be > 0) | raw (fit L itself: any sign)"
        )
    tree = parts[-1][1]
    if outs:  # one formula: each row takes its output's expression (an indicator column per output)
        for k, (_, t) in reversed(list(zip(outs, parts))[:-1]):
            tree = ("f", "where", (("cmp", ">", ("s", _indicator(k)), ("n", 0.5)), t, tree))
        symbols.update({_indicator(k): f"{OUTPUT}={k}" for k in outs})
    spec = {
        "name": name,
        **({"outputs": dict(outs)} if outs else {"formula": formula}),
        "columns": dict(columns),
        "define": {d: str(src) for d, src in (doc.get("define") or {}).items()},  # a mapping: _define checked it
        "params": natural,
    }
    if objective != "log":  # the default is left out: a law file written before objective: reads as it did
        spec["objective"] = objective
    shown = formula + "".join(f", {d} = {src}" for d, src in spec["define"].items())
    term = Formula(tree, tuple((p.name, p.log) for p in params), tuple(symbols.items()), define, objective == "raw")
    return UserLaw(name, shown, tuple(params), (term,), {"user": spec}, source=source)


def _indicator(output: str) -> str:
    """The formula's symbol for 'this row is output ``output``' (a name no law file can write)."""
    return f"_{OUTPUT}_{output}"


def _outputs(spec, where: str) -> dict[str, str]:
    """A multi-output law's ``outputs: {NAME: EXPRESSION}``: two or more, each NAME the output's
    value in the long table's ``output`` column, or its loss column in a wide table."""
    if not isinstance(spec, dict) or len(spec) < 2:
        raise bad(f"{where} outputs", spec, 'a mapping of two or more NAME: EXPRESSION, e.g. {code: "E1 + A*N**-a"}')
    for k, v in spec.items():
        if not (isinstance(k, str) and k.isidentifier() and not k.startswith("_")) or k in (TARGET, OUTPUT):
            raise bad(
                f"{where} outputs", k, f"names that are identifiers not starting with _, nor {TARGET} or {OUTPUT}"
            )
    return {k: v for k, v in spec.items()}


def outputs(law: Law) -> list[str]:
    """A multi-output law's outputs, in order; [] for a law of one output."""
    return list(law.options.get("user", {}).get("outputs", {})) if is_user(law) else []


def long_table(df, law: Law):
    """A multi-output law's run table in its long form, one row per run and output: a wide table
    (a run's outputs in the columns the law's outputs name, as one run of one cost reveals them)
    is melted, each run's outputs keeping its ``run`` (row{i} without one), so a bootstrap that
    resamples runs draws a run's outputs together; a long table (an ``output`` column and ``loss``)
    is checked.  Any other law's table is returned as it is."""
    outs = outputs(law)
    if not outs:
        return df
    import pandas as pd

    cols = [str(c) for c in df.columns]
    if OUTPUT in cols:
        names = df[OUTPUT].astype(str)
        other = ~names.isin(outs)
        if other.any():
            i = int(np.flatnonzero(other.to_numpy())[0])
            raise bad(
                f"{OUTPUT} in row {i}", str(names.iloc[i]), f"one of the outputs of {law.name}: {' | '.join(outs)}"
            )
        return df
    missing = [k for k in outs if k not in cols]
    if missing:
        raise bad(
            f"the run table of {law.name}",
            missing[0],
            f"a column per output ({', '.join(outs)}: a run's losses side by side), or the long form: "
            f"an {OUTPUT} column naming each row's output and its {TARGET}",
        )
    df = df.reset_index(drop=True)
    run = df["run"].astype(str) if "run" in cols else pd.Series([f"row{i}" for i in range(len(df))])
    keep = [c for c in cols if c not in outs and c not in (TARGET, "run")]
    parts = [df[keep].assign(run=run, **{OUTPUT: k, TARGET: df[k].to_numpy()}) for k in outs]
    order = np.argsort(np.concatenate([np.arange(len(df))] * len(outs)), kind="stable")  # a run's outputs together
    return pd.concat(parts, ignore_index=True).iloc[order].reset_index(drop=True)


def _number(what: str, v) -> float:
    """A finite number; a string that reads as one too (YAML reads ``1e6``, without the exponent's
    sign, as a string)."""
    try:
        x = float(v) if isinstance(v, (int, float, str)) and not isinstance(v, bool) else math.nan
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise bad(what, v, "a finite number")
    return x


def _params(spec, where: str) -> tuple[list[Param], dict]:
    """The parameters, and their spec in natural units as written (defaults filled in).  A key
    ``NAME[LO..HI]`` declares the indexed parameters NAME[LO] ... NAME[HI], one spec for all."""
    if not isinstance(spec, dict) or not spec:
        raise bad(f"{where} params", spec, "a mapping NAME: {bounds: [lo, hi], start: [values], log: true|false}")
    out, natural = [], {}
    seen: set[str] = set()
    for key, p in spec.items():
        what = f"{where} params.{key}"
        names = _declared(key, where)
        if not isinstance(p, dict) or "bounds" not in p:
            raise bad(what, p, "a mapping with bounds: [lo, hi] (required), start: [values] and log: true|false")
        bad_keys = [k for k in p if k not in PARAM_KEYS]
        if bad_keys:
            k = str(bad_keys[0])
            raise BadInput(
                f"{what}: unknown key {k!r}: {did_you_mean(k, PARAM_KEYS)}(allowed: {', '.join(PARAM_KEYS)})"
            )
        log = p.get("log")
        if log is not None and not isinstance(log, bool):
            raise bad(f"{what}.log", log, "true | false")
        b = p["bounds"]
        if not (isinstance(b, (list, tuple)) and len(b) == 2):
            raise bad(f"{what}.bounds", b, "[lo, hi]: two finite numbers, lo < hi")
        lo, hi = (_number(f"{what}.bounds", x) for x in b)
        if not lo < hi:
            raise bad(f"{what}.bounds", b, "[lo, hi] with lo < hi")
        if log is None:
            log = lo > 0 and hi >= LOG_SPAN * lo
        if log and not lo > 0:
            raise bad(f"{what}.bounds", b, "bounds > 0 with log: true (fitted through its logarithm)")
        start = p.get("start")
        if start is None:
            start = [_between(lo, hi, q, log) for q in QUARTILES]
        elif not isinstance(start, (list, tuple)):
            start = [start]
        if not start:
            raise bad(f"{what}.start", start, "a non-empty list of start values")
        values = []
        for s in start:
            x = _number(f"{what}.start", s)
            if not lo <= x <= hi:
                raise bad(f"{what}.start", s, f"values within its bounds [{lo:g}, {hi:g}]")
            values.append(x)
        to = math.log if log else float
        grid = tuple(dict.fromkeys(to(x) for x in values))  # duplicates add nothing to the grid
        for name in names:
            if name in seen:
                raise bad(f"{where} params", key, f"parameters declared once ({name} is declared twice)")
            seen.add(name)
            out.append(Param(name, to(lo), to(hi), grid, log=log, doc=f"user law: {lo:g} <= {name} <= {hi:g}"))
        natural[key] = {"bounds": [lo, hi], "start": list(dict.fromkeys(values)), "log": log}
    return out, natural


INDEXED = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\[(-?[0-9]+)\.\.(-?[0-9]+)\]$")
MAX_INDEXED = 1000  # elements of one indexed parameter


def _declared(key, where: str) -> list[str]:
    """The parameter names a ``params:`` key declares: NAME, or NAME[LO..HI] (LO <= HI)."""
    m = INDEXED.match(key) if isinstance(key, str) else None
    if m:
        base, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
        if base not in expr.FUNCTIONS and lo <= hi and hi - lo < MAX_INDEXED:
            return [expr.element_name(base, i) for i in range(lo, hi + 1)]
        allowed = f"NAME[LO..HI] with LO <= HI, at most {MAX_INDEXED} elements, NAME not a function's name"
        raise bad(f"{where} params", key, allowed)
    if not (isinstance(key, str) and key.isidentifier() and not key.startswith("_")):
        raise bad(f"{where} params", key, "parameter names that are identifiers not starting with _, or NAME[LO..HI]")
    if key in expr.FUNCTIONS:
        raise bad(f"{where} params", key, "a name other than the functions' (" + " ".join(expr.FUNCTIONS) + ")")
    return [key]


def _between(lo: float, hi: float, q: float, log: bool) -> float:
    return math.exp(math.log(lo) + q * (math.log(hi) - math.log(lo))) if log else lo + q * (hi - lo)


def _columns(spec, where: str, names: list[str]) -> dict[str, str]:
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise bad(f"{where} columns", spec, "a mapping SYMBOL: COLUMN, e.g. {N: params, D: tokens}")
    out = {}
    for sym, col in spec.items():
        if not (isinstance(sym, str) and sym.isidentifier() and not sym.startswith("_")) or sym in expr.FUNCTIONS:
            raise bad(f"{where} columns", sym, "symbols that are identifiers not starting with _ nor a function's name")
        if sym in names:
            raise bad(f"{where} columns", sym, "symbols other than the parameters' names")
        if not isinstance(col, str) or not col or col == TARGET:
            raise bad(f"{where} columns.{sym}", col, f"the name of a column of the run table other than {TARGET}")
        out[sym] = col
    return out


def _define(spec, where: str, names: list[str], columns: dict) -> list[tuple[str, tuple]]:
    """Named sub-expressions, each reading parameters, columns and the definitions above it."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise bad(f"{where} define", spec, 'a mapping NAME: EXPRESSION, e.g. {x: "N/1e9"}, evaluated in order')
    out: list[tuple[str, tuple]] = []
    later = set(spec)
    for d, text in spec.items():
        later.discard(d)
        if not (isinstance(d, str) and d.isidentifier() and not d.startswith("_")) or d in expr.FUNCTIONS:
            raise bad(f"{where} define", d, "names that are identifiers not starting with _ nor a function's name")
        if d in names or d in columns:
            raise bad(f"{where} define", d, "names other than the parameters' and the columns' symbols")
        tree = expr.parse(text, f"{where} define {d}")
        ahead = [s for s in expr.symbols(tree) if s in later or s == d]
        if ahead:
            raise bad(f"{where} define {d}", ahead[0], "names defined above this one (definitions are read in order)")
        out.append((d, tree))
    return out


def check_columns(law: Law, table_columns, convention: str = "total") -> None:
    """Every symbol of a user law that is a column must be one of the table's (or one ``dw fit``
    makes: ``tokens`` from flops and params, ``params`` in another ``--n-convention``): bad
    input naming it."""
    if not is_user(law):
        return
    have = [str(c) for c in table_columns]
    derivable = {"tokens"} if {"flops", "params"} <= set(have) else set()  # fit/table.py derives it
    if convention != "total":
        derivable.add("params")  # fit/derived.py's count model makes it, or says what it misses
    file = law.source.get("file") if isinstance(law, UserLaw) else None
    where = Path(file).name if file else f"law {law.name}"
    for sym, col in law.terms[0].symbols:
        if sym.startswith(f"_{OUTPUT}_"):  # a multi-output law's indicator: long_table checks the table's form
            continue
        if col.partition("=")[0] not in have and col not in derivable:  # shape=x reads the shape column
            what = f"{where} formula symbol" + (f" {sym} (columns: {sym}: {col})" if col != sym else "")
            raise bad(
                what,
                col if col != sym else sym,
                f"a parameter ({', '.join(law.names)}) or a column of the table ({', '.join(have[:30])}); "
                "map a symbol to a column under columns: in the law file",
            )


def record(law: Law) -> dict:
    """What fit.json's provenance keeps of a user law: its file, sha256, text and normalised form."""
    src = dict(law.source) if isinstance(law, UserLaw) else {}
    return {
        "file": src.get("file"),
        "sha256": src.get("sha256"),
        "text": src.get("text"),
        "spec": law.options["user"],
    }
