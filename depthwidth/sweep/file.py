"""Named sweeps: ``sweeps/NAME.yaml`` -> a list of runs, each an override list.

A sweep file (every key optional except one of runs/axes/zip/blocks)::

    description: one line
    groups: {model: vwt, data: slimpajama}      # config-group choices (model=vwt ...)
    fixed: {train.seq_len: 1024}                # key overrides shared by every run
    axes:                                       # cartesian product of the axes
      model.width: [32, 64, 96]
      model.depth: {start: 1, stop: 7, step: 2} # inclusive range -> 1, 3, 5, 7
    zip:                                        # zipped axes: lists of equal length, taken together
      - {model.depth: [2, 4], model.width: [64, 32]}
    seeds: [1, 2, 3]                            # shorthand for the axis run.seed
    tune: {optim.lr: {log: [1e-4, 3e-3], n: 4}}  # a tuning group per point: runs that differ only here
    # tune: {..., halving: true}: each group's worse half stops at its first train.budgets (launch/halving.py)
    runs:                                       # explicit points; each may carry reference data
      - {model.depth: 16, model.width: 512, ref: {loss: 3.435, source: published}}
    tokens: {per_param: 20, max: 1.4e11}        # train.tokens = k x params | {value: 6.4e9}
    launcher: {slurm: {gpus_per_node: 8}}       # launcher defaults per launcher (the command line wins)
    blocks: [ {label: small, runs: [...], tokens: {...}, launcher: {...}}, ... ]   # sub-sweeps, concatenated
    isoflop: {budgets: [1e18, 1e19], axis: shape, depths: [4, 8, 16]}   # one block per budget (isoflop.py)
    store: depth_delusion                       # the runs live in (and are counted with) that sweep's store

Points are ``runs`` (or one empty point) x product(axes) x each zip group x
seeds x tune; a block inherits the file's groups/fixed/tokens/launcher/tune
and may add its own.  ``tune`` expands every configuration into a *tuning group*:
runs that differ only in the tuned settings (a list, an inclusive range, or
``{log: [lo, hi], n: k}``, k log-spaced values); each point records which keys
were tuned, and the run's group id (config/identity.group_id) is the hash of its
config without them: stable across resubmission, whatever the tuned values.
Runs whose launcher settings differ are submitted as separate arrays.
Keys with a dot are config keys (``model.depth``), keys without one are
config groups (``model: vwt``).  ``ref`` (reference data, e.g. a published
loss; ``source: published | reconstructed``), ``label`` and ``tokens`` are
not overrides.  Overrides given on the ``dw sweep`` command line apply to
every run and win over the file.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Any

from depthwidth.core.errors import BadInput, bad, did_you_mean
from depthwidth.core.store import is_name

TOP_KEYS = (
    "description",
    "groups",
    "fixed",
    "axes",
    "zip",
    "seeds",
    "runs",
    "tokens",
    "launcher",
    "blocks",
    "isoflop",
    "store",
    "tune",
    "then",
)


BLOCK_KEYS = ("label", "groups", "fixed", "axes", "zip", "seeds", "runs", "tokens", "launcher", "tune")
TUNE_OPTIONS = ("halving",)  # tune: keys that are options, not tuned settings (halving: true|false)


POINT_META = ("ref", "label", "tokens")


# Every key above: (what it means, an example); the sweep-file reference (docs/reference/sweep-file.md,
# scripts/gen_docs.py) is made from it, and stops when a key has no entry here.
KEY_DOCS = {
    "description": ("one line, shown by `dw sweep --dry-run --json`", "description: my corpus, 6 shapes"),
    "groups": ("config-group choices for every run", "groups: {model: vwt, data: memmap}"),
    "fixed": ("config keys shared by every run", "fixed: {train.seq_len: 256, data.path: data/mydocs}"),
    "axes": (
        "a cartesian product: each key a list, a scalar, or an inclusive range",
        "axes: {model.width: [64, 128], model.depth: {start: 2, stop: 8, step: 2}}",
    ),
    "zip": (
        "axes taken together (lists of equal length); a list of such groups multiplies",
        "zip: [{model.depth: [2, 4], model.width: [128, 64]}]",
    ),
    "seeds": ("shorthand for the axis `run.seed` (W&B names then carry `-sSEED`)", "seeds: [1, 2, 3]"),
    "then": (
        "the arguments of `--then`'s actions (`dw fit`, `report`, `analyze`, `eval` once every run has ended)",
        'then: {fit: "--law depth-delusion", eval: "--tasks dw_heldout_cloze"}',
    ),
    "tune": (
        "a tuning group per configuration: its runs differ only in the tuned settings (lists, ranges, or "
        "`{log: [lo, hi], n: k}`); each run's `group` id is the hash of its config without the tuned keys; "
        "`halving: true` stops each group's worse half at its first `train.budgets` (`pruned`)",
        "tune: {optim.lr: {log: [1e-4, 3e-3], n: 4}, halving: true}",
    ),
    "runs": (
        "explicit points, each an override mapping plus optional `ref`, `label`, `tokens`",
        "runs: [{model.depth: 16, model.width: 512, ref: {source: published, loss: 3.435}}]",
    ),
    "ref": (
        "reference data the report sets beside the run: `source: published | reconstructed`, `loss`, `params`, `note`",
        "ref: {source: published, loss: 2.821, note: shallow-wide}",
    ),
    "label": ("a name for a block's or a run's points (`dw status`, `--only`)", "label: small"),
    "tokens": (
        "the token budget rule: a number, `{value: N}`, or `{per_param: k, min, max, count: total | non_embedding}`",
        "tokens: {per_param: 20, max: 1.4e11}",
    ),
    "launcher": (
        "launcher defaults per launcher; the command line wins",
        'launcher: {slurm: {gpus_per_node: 8, time: "24:00:00"}}',
    ),
    "blocks": (
        "sub-sweeps, concatenated; each inherits the file's `groups`, `fixed`, `tokens`, `launcher`, `seeds`, "
        "`tune` and may set its own (and `label`, `runs`, `axes`, `zip`)",
        "blocks: [{label: small, tokens: {value: 6.4e9}, runs: [...]}, {label: large, ...}]",
    ),
    "isoflop": (
        "isoFLOP budgets: one block per budget (sweep/isoflop.py; the fitting guide's isoFLOP section)",
        "isoflop: {budgets: [1e19, 1e20], axis: shape, depths: [4, 8, 16], tokens_per_param: 20}",
    ),
    "store": (
        "the runs live in (and are counted with) that sweep's store: what `dw suggest` writes into `NAME_next.yaml`",
        "store: depth_delusion",
    ),
}


# Keys a sweep never sets: where and how a run executes is the launcher's business.
RESERVED = ("run.dir", "run.sweep")


def sweeps_dir() -> Path:
    """``$DW_SWEEPS``, else the checkout's ``sweeps/``, else ``./sweeps``."""
    env = os.environ.get("DW_SWEEPS")
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parents[2] / "sweeps"
    return beside if beside.is_dir() else Path("sweeps")


def available() -> list[str]:
    """The sweeps ``dw sweep NAME`` accepts: sweeps/NAME.yaml whose NAME is a sweep name (a file named
    "my sweep.yaml" or "-x.yaml" is no sweep dw could run: core.store.check_name)."""
    d = sweeps_dir()
    return sorted(p.stem for p in d.glob("*.yaml") if is_name(p.stem)) if d.is_dir() else []


# Bounded input: what a sweep file may hold, checked before anything is expanded (a sweep file is a few
# KiB; the shipped ones hold at most 30 runs).  Each is refused in one line, exit 2, within a second.
MAX_FILE_BYTES = 64 << 10  # a sweep file's size: 64 KiB (the shipped ones 1-5 KiB), read within a second whatever
# it holds (libyaml: 0.4 s of CPU for 32,768 numbers in one list; 1 MiB of them took 7-13 s)
MAX_YAML_NODES = 1_000_000  # YAML nodes once every alias is expanded (a "billion laughs" file: 10^9)
MAX_NESTING = 64  # lists and mappings inside one another (a sweep file needs 4)
MAX_RUNS = 100_000  # runs per sweep, counted from the file before any run is built
# the values a sweep file holds: mappings, lists, strings, numbers, booleans, null (and << merge keys);
# !!binary, !!set, !!omap, !!python/... build objects no override can carry
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("map", "seq", "str", "int", "float", "bool", "null", "merge")
)


def _loader_class():
    """OmegaConf's YAML loader (YAML 1.2 floats, no timestamps, duplicate keys refused) on libyaml's C
    parser where PyYAML has it: linear in how deeply lists nest (PyYAML's own scanner is quadratic in
    it: 60 KB of lists 300 deep took 8 s) and several times faster.  Without libyaml, PyYAML's parser
    with the nesting bounded as it is read."""
    import yaml
    from omegaconf._utils import get_yaml_loader

    base = get_yaml_loader()
    if getattr(yaml, "__with_libyaml__", False):
        from yaml.cyaml import CParser

        class Loader(CParser, base):
            def __init__(self, stream):
                CParser.__init__(self, stream)
                yaml.constructor.SafeConstructor.__init__(self)
                yaml.resolver.Resolver.__init__(self)

        return Loader

    class Bounded(base):
        def fetch_flow_collection_start(self, token):
            if self.flow_level >= MAX_NESTING:
                raise _TooDeep(f"more than {MAX_NESTING} levels (line {self.line + 1}, column {self.column + 1})")
            super().fetch_flow_collection_start(token)

    return Bounded


class _TooDeep(Exception):
    pass


def read_yaml(path: Path, what: str):
    """The YAML document in ``path`` (``_loader_class``), refused in one line when the file is over
    MAX_FILE_BYTES, nests lists or mappings more than MAX_NESTING deep, holds a value that is not
    plain YAML (``_PLAIN_TAGS``) or its aliases expand it past MAX_YAML_NODES nodes (or into a loop),
    before anything is built from it."""
    import yaml

    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise bad(what, f"{size:,} bytes", f"a file of at most {MAX_FILE_BYTES:,} bytes")
    deep = f"at most {MAX_NESTING} levels of lists and mappings inside one another"
    try:
        loader = _loader_class()(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            n = _expanded_nodes(node, what)
            if n > MAX_YAML_NODES:
                raise bad(
                    what,
                    f"{n:,} YAML nodes once its aliases are expanded",
                    f"at most {MAX_YAML_NODES:,} (YAML aliases (*name) repeat what they point to)",
                )
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except BadInput:
        raise
    except _TooDeep as e:
        raise bad(what, f"lists or mappings nested {e}", deep) from None
    except RecursionError:
        raise bad(what, "lists or mappings nested too deeply to read", deep) from None
    except yaml.YAMLError as e:
        if "nesting depth" in str(getattr(e, "problem", "")):  # libyaml's own limit (1,000 levels)
            m = e.problem_mark
            raise bad(what, f"lists or mappings nested more than 1,000 levels (line {m.line + 1})", deep) from None
        raise BadInput(f"bad value for {what}: not valid YAML ({' '.join(str(e).split())[:300]})") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"bad value for {what}: not valid YAML ({' '.join(str(e).split())[:300]})") from None


def _expanded_nodes(root, what: str) -> int:
    """How many YAML nodes ``root`` (a composed node graph, where an alias is the node it names) holds
    with every alias expanded: each node's count (and height) made once, from its children's, so
    nothing is expanded; BadInput when an alias contains itself (a loop), when lists and mappings nest
    more than MAX_NESTING deep, aliases expanded (a list of 1,000 aliases, each inside the one after:
    a short line nested 1,000 deep), or when a node is not plain YAML (``_PLAIN_TAGS``)."""
    import yaml

    def kids(n):
        if isinstance(n, yaml.SequenceNode):
            return n.value
        if isinstance(n, yaml.MappingNode):
            return [x for kv in n.value for x in kv]
        return []

    def at(n):
        return f"line {n.start_mark.line + 1}, column {n.start_mark.column + 1}"

    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_: set[int] = set()  # the nodes being counted: the ancestors of the one popped
    stack = [(root, False)]
    while stack:
        n, done = stack.pop()
        k = id(n)
        if done:
            open_.discard(k)
            below = kids(n)
            size[k] = 1 + sum(size[id(c)] for c in below)  # exact, each node counted once
            height[k] = 1 + max((height[id(c)] for c in below), default=-1)
            if height[k] > MAX_NESTING:
                raise bad(
                    what,
                    f"lists or mappings nested more than {MAX_NESTING} levels ({at(n)}, aliases expanded)",
                    f"at most {MAX_NESTING} levels of lists and mappings inside one another",
                )
            continue
        if k in size:
            continue
        if k in open_:
            raise bad(what, f"an anchor that contains its own alias ({at(n)})", "aliases to nodes outside them")
        if n.tag not in _PLAIN_TAGS:
            raise bad(
                what,
                f"a value tagged {n.tag.replace('tag:yaml.org,2002:', '!!')} ({at(n)})",
                "plain YAML: mappings, lists, strings, numbers, booleans and null",
            )
        open_.add(k)
        stack.append((n, True))
        stack.extend((c, False) for c in kids(n) if id(c) not in size)
    return size[id(root)]


def store_of(name: str, doc: dict) -> str:
    """The sweep whose run store ``name``'s runs join: its ``store`` key (a file ``dw suggest`` wrote:
    the next runs of NAME share NAME's run ids, status, fit and retries), else ``name`` itself."""
    st = doc.get("store", name)
    if not isinstance(st, str) or not st or "/" in st or st.startswith("."):
        raise bad(f"sweep {name}: store", st, "the name of a sweep (its run store is ROOT/NAME)")
    return st


def load_file(name: str) -> dict:
    if not name or "/" in name or name.startswith("."):
        raise bad("sweep name", name, ", ".join(available()) or "a file in sweeps/")
    path = sweeps_dir() / f"{name}.yaml"
    if not path.is_file():
        raise BadInput(
            f"unknown sweep {name!r}: {did_you_mean(name, available())}(available: {', '.join(available()) or 'none'})"
        )
    doc = read_yaml(path, f"sweep file {path}")
    if not isinstance(doc, dict):
        raise bad(f"sweep file {path}", doc, f"a YAML mapping with the keys {', '.join(TOP_KEYS)}")
    if doc.get("then") is not None:
        then_args(name, doc)  # what --then would run, checked whether or not --then is given
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise BadInput(
            f"sweep {name}: unknown key {unknown[0]!r}: {did_you_mean(unknown[0], TOP_KEYS)}"
            f"(allowed: {', '.join(TOP_KEYS)})"
        )
    _mappings(f"sweep {name}", doc)
    return doc


_MAPPINGS = {  # the parts of a sweep file (and of a block) that are mappings, and what they hold
    "groups": "a mapping GROUP: CHOICE, e.g. {model: vwt, data: pydoc}",
    "fixed": "a mapping KEY: VALUE, e.g. {model.width: 64}",
}


def _mappings(where: str, part: dict) -> None:
    """BadInput naming ``groups:`` or ``fixed:`` of ``part`` (the file, or one block) when it is not a
    mapping (``groups: [vwt]`` had been a TypeError)."""
    for key, allowed in _MAPPINGS.items():
        v = part.get(key)
        if v is not None and not isinstance(v, dict):
            raise bad(f"{where}: {key}", v, allowed)


def then_args(name: str, doc: dict) -> dict[str, list[str]]:
    """``then:`` -> {action: its dw arguments}: what ``--then`` runs after the sweep
    (launch/followup.py), e.g. ``then: {fit: "--law depth-delusion", eval: "--tasks dw_heldout_cloze"}``."""
    import shlex

    from depthwidth.launch.followup import ACTIONS

    spec = doc.get("then") or {}
    if not isinstance(spec, dict):
        raise bad(f"sweep {name}: then", spec, f"a mapping of {'|'.join(ACTIONS)} -> its dw arguments")
    out = {}
    for k, v in spec.items():
        if k not in ACTIONS:
            raise bad(f"sweep {name}: then key", k, "|".join(ACTIONS))
        if isinstance(v, str):
            out[k] = shlex.split(v)
        elif isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
            out[k] = [str(x) for x in v]
        else:
            raise bad(f"sweep {name}: then.{k}", v, 'its dw arguments, e.g. "--law depth-delusion"')
    return out


def _values(name: str, key: str, spec: Any) -> list:
    """An axis: a list, a scalar, or an inclusive range {start, stop, step}."""
    if isinstance(spec, list):
        if not spec:
            raise BadInput(f"sweep {name}: axis {key} is an empty list")
        return spec
    if isinstance(spec, dict):
        if set(spec) - {"start", "stop", "step"} or not {"start", "stop"} <= set(spec):
            raise bad(f"axis {key}", spec, "a list or {start, stop[, step]} (inclusive)")
        a, b, s = spec["start"], spec["stop"], spec.get("step", 1)
        if not all(isinstance(v, (int, float)) for v in (a, b, s)) or s == 0 or (b - a) * s < 0:
            raise bad(f"axis {key}", spec, "numbers start, stop and a non-zero step towards stop")
        n = int(math.floor((b - a) / s + 1e-9)) + 1
        out = [a + i * s for i in range(n)]
        return [int(v) if all(isinstance(x, int) for x in (a, s)) else v for v in out]
    return [spec]


def _product(name: str, axes: dict) -> list[dict]:
    if not axes:
        return [{}]
    keys = list(axes)
    vals = [_values(name, k, axes[k]) for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*vals)]


def _zipped(name: str, groups: Any) -> list[dict]:
    if not groups:
        return [{}]
    if isinstance(groups, dict):
        groups = [groups]
    out = [{}]
    for g in groups:
        if not isinstance(g, dict) or not g:
            raise bad(f"sweep {name}: zip group", g, "a mapping of key -> list of equal lengths")
        lists = {k: _values(name, k, v) for k, v in g.items()}
        n = {len(v) for v in lists.values()}
        if len(n) != 1:
            raise BadInput(f"sweep {name}: zipped axes {', '.join(lists)} have different lengths {sorted(n)}")
        rows = [{k: lists[k][i] for k in lists} for i in range(n.pop())]
        out = [{**a, **b} for a in out for b in rows]
    return out


def _length(name: str, key: str, spec: Any) -> int:
    """How many values ``_values`` would give, without making them (a range of 10^9 values is counted,
    not built); the same BadInput for a malformed axis."""
    if isinstance(spec, list):
        return len(spec)
    if isinstance(spec, dict):
        if set(spec) - {"start", "stop", "step"} or not {"start", "stop"} <= set(spec):
            raise bad(f"axis {key}", spec, "a list or {start, stop[, step]} (inclusive)")
        a, b, st = spec["start"], spec["stop"], spec.get("step", 1)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b, st)):
            raise bad(f"axis {key}", spec, "numbers start, stop and a non-zero step towards stop")
        if st == 0 or (b - a) * st < 0 or not all(math.isfinite(v) for v in (a, b, st)):
            raise bad(f"axis {key}", spec, "numbers start, stop and a non-zero step towards stop")
        n = (b - a) / st + 1e-9
        return int(n) + 1 if n < 1e18 else 10**18
    return 1


def count_runs(name: str, doc: dict) -> int:
    """The runs the sweep document expands to (before duplicates are merged), counted from its
    lists and ranges without building one; BadInput when it is over MAX_RUNS or a part is of the
    wrong kind (``runs: 5``)."""
    blocks = doc.get("blocks") or [{}]
    if not isinstance(blocks, list):
        raise bad(f"sweep {name}: blocks", blocks, "a list of mappings")
    total = 0
    parts = []
    for bi, blk in enumerate(blocks):
        if not isinstance(blk, dict):
            raise bad(f"sweep {name}: block {bi + 1}", blk, "a mapping")
        inherit = "blocks" not in doc

        def get(key):
            return blk.get(key, doc.get(key) if inherit else None)

        runs, axes, zips = get("runs"), get("axes"), get("zip")
        seeds, tune = blk.get("seeds", doc.get("seeds")), blk.get("tune", doc.get("tune"))
        if runs is not None and not isinstance(runs, list):
            raise bad(f"sweep {name}: runs", runs, "a list of mappings of overrides (+ ref, label, tokens)")
        if axes is not None and not isinstance(axes, dict):
            raise bad(f"sweep {name}: axes", axes, "a mapping KEY: values (a list or {start, stop[, step]})")
        if zips is not None and not isinstance(zips, (dict, list)):
            raise bad(f"sweep {name}: zip", zips, "a mapping (or list of mappings) KEY: list of equal lengths")
        n = max(len(runs or []), 1)
        for k, v in (axes or {}).items():
            n *= _length(name, k, v)
        for g in [zips] if isinstance(zips, dict) else zips or []:
            if isinstance(g, dict) and g:
                n *= max(_length(name, k, v) for k, v in g.items())
        if seeds is not None:
            n *= _length(name, "seeds", seeds)
        if isinstance(tune, dict):
            for k, v in tune.items():
                if k not in TUNE_OPTIONS:
                    n *= v.get("n", 1) if isinstance(v, dict) and isinstance(v.get("n"), int) else _length(name, k, v)
        total += n
        parts.append(n)
        if total > MAX_RUNS:
            break
    if total > MAX_RUNS:
        where = f"block {len(parts)} alone: {parts[-1]:,}" if len(parts) > 1 else "its axes multiplied out"
        raise bad(
            f"sweep {name}: runs",
            f"{total:,}" if total < 10**18 else "more than 10^18",
            f"at most {MAX_RUNS:,} runs per sweep ({where}); split it into sweeps of fewer runs",
        )
    return total


def points(name: str, doc: dict) -> list[dict]:
    """Expand a sweep document into points: {groups, keys, ref, label, tokens}; the runs are counted
    first (``count_runs``), so that a sweep over MAX_RUNS is refused before one is built."""
    count_runs(name, doc)
    blocks = doc.get("blocks") or [{}]
    out = []
    for bi, blk in enumerate(blocks):
        if not isinstance(blk, dict):
            raise bad(f"sweep {name}: block {bi + 1}", blk, "a mapping")
        unknown = [k for k in blk if k not in BLOCK_KEYS]
        if unknown:
            raise BadInput(
                f"sweep {name}: block {bi + 1}: unknown key {unknown[0]!r}: "
                f"{did_you_mean(unknown[0], BLOCK_KEYS)}(allowed: {', '.join(BLOCK_KEYS)})"
            )
        _mappings(f"sweep {name}: block {bi + 1}", blk)
        fixed = {**(doc.get("fixed") or {}), **(blk.get("fixed") or {})}
        groups = {**(doc.get("groups") or {}), **(blk.get("groups") or {})}
        tokens = blk.get("tokens", doc.get("tokens"))
        launcher = _launcher_defaults(name, doc.get("launcher"), blk.get("launcher"))
        runs = blk.get("runs", doc.get("runs") if "blocks" not in doc else None) or [{}]
        axes = blk.get("axes", doc.get("axes") if "blocks" not in doc else None)
        zips = blk.get("zip", doc.get("zip") if "blocks" not in doc else None)
        seeds = blk.get("seeds", doc.get("seeds"))
        seed_axis = [{"run.seed": s} for s in _values(name, "seeds", seeds)] if seeds is not None else [{}]
        if len(seed_axis) > 1:  # W&B names runs -s{seed} when seeds vary (not part of the run id)
            seed_axis = [{**s, "tracker.seed_in_name": True} for s in seed_axis]
        tune, halving = _tune(name, blk.get("tune", doc.get("tune")))
        listed = blk.get("runs", doc.get("runs") if "blocks" not in doc else None) is not None  # runs: [{}] is one run
        if not (listed or axes or zips or seeds is not None):
            raise BadInput(f"sweep {name}: block {bi + 1} has no runs, axes, zip or seeds")
        for p in runs:
            if not isinstance(p, dict):
                raise bad(f"sweep {name}: run", p, "a mapping of overrides (+ ref, label, tokens)")
            for combo in _product(name, axes or {}):
                for z in _zipped(name, zips):
                    for s, tv in itertools.product(seed_axis, _product(name, tune)):
                        own = {k: v for k, v in p.items() if k not in POINT_META}
                        merged = {**fixed, **own, **combo, **z, **s, **tv}
                        pt = {
                            "groups": dict(groups),
                            "keys": {},
                            "ref": p.get("ref"),
                            "launcher": launcher,
                            "label": p.get("label", blk.get("label")),
                            "tokens": p.get("tokens", tokens),
                            "tuned": sorted(tune),
                            "halving": halving,
                        }
                        for k, v in merged.items():
                            _place(name, pt, k, v)
                        out.append(pt)
    return out


def _tune(name: str, spec: Any) -> tuple[dict, bool]:
    """``tune:`` -> ({config key: values}, halving): lists, inclusive ranges or {log: [lo, hi], n: k};
    ``halving: true`` prunes the worse half of each group at its first budget (launch/halving.py)."""
    if spec is None:
        return {}, False
    if not isinstance(spec, dict) or not spec:
        raise bad(f"sweep {name}: tune", spec, "a mapping KEY: values, e.g. {optim.lr: [1e-4, 3e-4, 1e-3]}")
    halving = spec.get("halving", False)
    if not isinstance(halving, bool):
        raise bad(f"sweep {name}: tune.halving", halving, "true or false")
    out = {}
    for key, v in spec.items():
        if key in TUNE_OPTIONS:
            continue
        if not isinstance(key, str) or "." not in key or key in RESERVED or key == "run.seed":
            raise bad(f"sweep {name}: tune key", key, "a config key like optim.lr (not run.seed: seeds are seeds:)")
        if isinstance(v, dict) and "log" in v:
            out[key] = _log_values(name, key, v)
        else:
            out[key] = _values(name, key, v)
        if len(out[key]) < 2:
            raise bad(f"sweep {name}: tune.{key}", v, "at least 2 values (a group of one tunes nothing)")
    if not out:
        raise bad(f"sweep {name}: tune", spec, "at least one tuned setting besides halving, e.g. optim.lr: [...]")
    return out, halving


def _log_values(name: str, key: str, v: dict) -> list[float]:
    """{log: [lo, hi], n: k}: k values evenly spaced in log between lo and hi, both included."""
    lohi, n = v.get("log"), v.get("n")
    ok = set(v) <= {"log", "n"} and isinstance(lohi, list) and len(lohi) == 2 and isinstance(n, int) and n >= 2
    try:
        lo, hi = (float(x) for x in lohi) if ok else (0.0, 0.0)
    except (TypeError, ValueError):
        ok = False
    if not ok or not 0 < lo < hi:
        raise bad(f"sweep {name}: tune.{key}", v, "{log: [lo, hi], n: k} with 0 < lo < hi and k >= 2")
    return [float(f"{lo * (hi / lo) ** (i / (n - 1)):.6g}") for i in range(n)]


def _place(name: str, pt: dict, key: str, value: Any) -> None:
    if not isinstance(key, str) or not key:
        raise bad(f"sweep {name}: key", key, "a config key like model.depth or a group like model")
    if key in RESERVED:
        raise BadInput(f"sweep {name}: {key} is set by dw sweep itself (runs/NAME/RUN_ID); remove it")
    if "." in key.lstrip("+"):
        pt["keys"][key] = value
    else:
        pt["groups"][key] = value


def _launcher_defaults(name: str, top, block) -> dict:
    """{launcher name: {key: value}}: the file's, then the block's (which win), per launcher."""
    out: dict = {}
    for where, d in (("launcher", top), ("block launcher", block)):
        if d is None:
            continue
        if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
            raise bad(f"sweep {name}: {where}", d, "a mapping {debug|local|slurm: {key: value}}")
        for lname, keys in d.items():
            out[lname] = {**out.get(lname, {}), **keys}
    return out
