"""The one composer: conf/ presets + overrides -> the resolved, typed run config (``RunConfig``).

``compose(overrides)`` gives what ``dw train OVERRIDES`` trains, ``dw config show`` prints
and a launcher's worker trains; ``compose_parts(groups, keys)``, the same from overrides
parsed already (config/overrides.py), is what ``dw sweep`` calls once per run, so a sweep
run is an override list a user replays by hand and gets the very config the sweep planned.

How: conf/config.yaml's flat defaults list with the group choices, each option's preset
chain followed down to the schema's defaults (``load_group``), is merged once per distinct
set of choices (OmegaConf, cached); each run's key overrides apply to a copy in plain dicts,
plain ``${a.b}`` interpolations resolved here, anything fancier by OmegaConf.

Why not Hydra's compose (#35 item 3): dw's conf/ is one flat defaults list of one-level
preset chains, all dw needs of Hydra's composition, and a dry run of 10,000 runs cannot
afford a Hydra compose per run; two composers kept equal by a test was the price.  Hydra's
override *parser* stays (the grammar is Hydra's), and its compose is the oracle in the
tests (tests/hydra_oracle.py: every preset and shipped sweep run, every override form).
As Hydra, ``GROUP={k: v}`` (``model={depth: 3}``, ``train={steps: 5}``) sets the mapping's keys
(``model.depth=3``; ``+``/``++`` add them), ``+KEY=VALUE`` is refused where KEY holds a value,
``++GROUP=OPTION`` and a package (``model@x=vwt``) are refused, all in dw's one-line words.
Unlike Hydra, ``GROUP=null`` is refused in dw's words, ``+GROUP=OPTION`` is a choice,
``hydra.*`` keys are unknown, a key without a dot that is no group (``+x=1``, ``++x=1``,
``train=5``) is refused, ``~train``/``~GROUP`` and ``~GROUP.SETTING`` of the schema are refused,
and a mapping merges into an empty mapping setting (``launcher.additional={exclude: n1}``,
which Hydra's struct mode refused).
No Hydra or torch import here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

from depthwidth.config.node import Node, RunConfig, nodes, plain
from depthwidth.config.overrides import ANY, DELETE, fmt_value, groups_and_keys, mapping_keys
from depthwidth.config.schema import ALL_GROUPS, ROOT, base_nodes, field_map, schema_of
from depthwidth.core.errors import BadInput, bad, did_you_mean

_BESIDE = Path(__file__).resolve().parents[2] / "conf"


def conf_dir() -> Path:
    """``$DW_CONF``, else the checkout's ``conf/`` next to the package, else ``./conf``
    (a non-editable install: run dw from a folder holding conf/ and sweeps/)."""
    env = os.environ.get("DW_CONF")
    if env:
        return Path(env)
    return _BESIDE if _BESIDE.is_dir() else Path("conf")


def unknown_key(key: str, tree) -> BadInput:
    """An override's key the config does not have: the closest existing key under the same
    parent (or anywhere, when the parent is the typo), else the parent's keys.  ``tree``: the
    composed config as nested mappings."""
    leaves = list(_dotted(tree))
    parent = key.rpartition(".")[0]
    siblings = [k for k in leaves if k.rpartition(".")[0] == parent] if parent else []
    hint = did_you_mean(key, siblings or (leaves if parent else list(tree)))
    if hint:
        return BadInput(f"unknown config key {key!r}: {hint.strip()}")
    if siblings:
        return BadInput(
            f"unknown config key {key!r} (keys of {parent}: {', '.join(k.rpartition('.')[2] for k in siblings)})"
        )
    return BadInput(f"unknown config key {key!r} (groups: {', '.join(sorted({k.split('.')[0] for k in leaves}))})")


def _dotted(tree, prefix: str = ""):
    for k, v in tree.items():
        if hasattr(v, "items"):
            yield from _dotted(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}"


def group_options(group: str) -> list[str]:
    d = conf_dir() / group
    return sorted(p.stem for p in d.glob("*.yaml") if not p.stem.startswith("_")) if d.is_dir() else []


def load_group(group: str, name: str) -> Any:
    """One option of a config group as an OmegaConf node, its preset chain followed: each
    ``defaults`` entry is another preset of the same group or the schema's base (``_base``,
    ``_NAME``), merged under the file's own keys as Hydra does."""
    from omegaconf import OmegaConf

    path = conf_dir() / group / f"{name}.yaml"
    if not path.is_file():
        opts = group_options(group)
        raise BadInput(f"unknown {group} {name!r}: {did_you_mean(name, opts)}(available: {', '.join(opts)})")
    node = OmegaConf.load(path)
    chain = list(node.pop("defaults", None) or ["_self_"])
    if "_self_" not in chain:
        chain.append("_self_")
    out, bases = OmegaConf.create(), base_nodes()
    for entry in chain:
        if entry == "_self_":
            out = OmegaConf.merge(out, node)
        elif isinstance(entry, str) and (group, entry) in bases:
            out = OmegaConf.merge(out, bases[(group, entry)])
        elif isinstance(entry, str) and entry != name:
            out = OmegaConf.merge(out, load_group(group, entry))
        else:  # a group choice inside a group, or a preset naming itself: beyond dw's flat presets
            raise BadInput(
                f"conf/{group}/{name}.yaml: defaults entry {entry!r} is not a preset of {group} or its schema base"
            )
    return out


def compose(overrides: Sequence[str] = ()) -> RunConfig:
    """conf/config.yaml with ``overrides`` (Hydra's override grammar: ``model=vwt``,
    ``model.depth=4``, ``+KEY=VALUE`` adds, ``~KEY`` deletes what the schema lacks) -> the resolved ``RunConfig``;
    bad overrides -> BadInput."""
    return compose_parts(*groups_and_keys(overrides))


# ---------------------------------------------------------------------------
# the composition
# ---------------------------------------------------------------------------

_BASE: dict = {}


def _base(groups: tuple) -> Any:
    """conf/config.yaml with these group choices (unresolved, struct): its flat defaults list,
    each option's preset chain followed; cached per distinct choice."""
    from omegaconf import OmegaConf

    key = (str(conf_dir()), groups)
    try:
        if key in _BASE:
            return _BASE[key]
    except TypeError:  # an option that is a list or mapping: refused below
        pass
    root = OmegaConf.load(conf_dir() / "config.yaml")
    defaults = list(root.pop("defaults", []) or [])
    if "_self_" not in defaults:
        defaults.append("_self_")
    chosen = dict(groups)
    in_defaults = set()
    cfg = OmegaConf.create()
    for entry in defaults:
        if entry == "_self_":
            cfg = OmegaConf.merge(cfg, root)
            continue
        if isinstance(entry, str):  # a root-level node: the schema's defaults of train, probe, run
            cfg = OmegaConf.merge(cfg, base_nodes()[(None, entry)])
            continue
        ((g, opt),) = dict(entry).items()
        in_defaults.add(g)
        if g in chosen:
            opt = chosen.pop(g)
            if not isinstance(opt, str):  # GROUP=null, GROUP=[a]: an option is a preset's name
                raise bad(f"config group {g}", opt, ", ".join(group_options(g)))
        if opt is None:  # conf/config.yaml's own "GROUP: null": no such group
            continue
        cfg = OmegaConf.merge(cfg, OmegaConf.create({g: load_group(g, opt)}))
    for g, opt in chosen.items():
        if g in ROOT:  # train=5: a section of settings, chosen as if it were a group
            raise bad(f"config section {g}", opt, f"{g}.KEY=VALUE or {g}={{KEY: VALUE}}; a section has no options")
        how = f"config keys need a dot, e.g. {g}.key=value" if g.isidentifier() else "e.g. model=vwt, model.depth=4"
        names = ", ".join(sorted(in_defaults))
        raise BadInput(f"unknown config group {g!r} ({did_you_mean(g, in_defaults)}groups: {names}; {how})")
    OmegaConf.set_struct(cfg, True)
    _BASE[key] = cfg
    return cfg


_PLAIN_BASE: dict = {}
_SCALARS = frozenset({int, float, str, bool, type(None)})
_INTERP = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


def compose_parts(groups: dict, keys: dict) -> RunConfig:
    """Resolved config for group choices + key overrides (``groups_and_keys``' parts; raises BadInput).

    Works on plain dicts (a deep copy of an OmegaConf node costs more than the whole rest of a
    run's dry-run), copied from the cached base's Nodes (``_copy``); plain ``${a.b}``
    interpolations are resolved here (where the base holds one, and in the overridden values:
    nothing else can hold one), anything fancier goes through OmegaConf.  Keys apply in order:
    ``+KEY`` adds (refused where KEY holds a value, as Hydra), ``++KEY`` adds or sets, ``~KEY``
    deletes (value ANY, or the value it must hold).  A mapping as a group's option (a sweep file's
    ``model: {depth: 3}``) sets its keys, as ``model={depth: 3}`` on a command line does."""
    from omegaconf import OmegaConf

    if any(v.__class__ is not str for v in groups.values()):
        groups, keys = _mapping_groups(groups, keys)

    try:
        bkey = (os.environ.get("DW_CONF"), tuple(sorted(groups.items())))  # conf_dir() without its Path
        cached = _PLAIN_BASE.get(bkey)
    except TypeError:  # a list or mapping as a group's option: _base names it
        bkey, cached = None, None
    if cached is None:
        text = json.dumps(OmegaConf.to_container(_base(bkey[1] if bkey else tuple(groups.items())), resolve=False))
        cached = _PLAIN_BASE[bkey] = (text, _interpolated(json.loads(text)), json.loads(text, object_pairs_hook=Node))
    text, interpolated, tree = cached
    cfg = _copy(tree, RunConfig)
    overridden = []
    for k, v in keys.items():
        if k.startswith(DELETE):
            _delete(cfg, k[len(DELETE) :], v)
            continue
        k0, add = k, k.startswith("+")
        k = k.lstrip("+")
        *parents, leaf = k.split(".")
        node = cfg
        for p in parents:
            if not isinstance(node, dict) or (p not in node and not add):
                raise unknown_key(k, json.loads(text))
            node = node.setdefault(p, Node())
        if not isinstance(node, dict) or (leaf not in node and not add):
            raise unknown_key(k, json.loads(text))
        if add and node.get(leaf) is not None and not k0.startswith("++") and not isinstance(v, (dict, list)):
            said = fmt_value(v)  # Hydra's "Could not append to config. An item is already at ..."
            raise bad("override", f"{k0}={said}", f"{k} exists: {k}={said} sets it, ++{k}={said} adds or sets it")
        scalar = v.__class__ in _SCALARS
        if not scalar:  # a copy in JSON's types (a scalar is immutable and stays itself)
            v = json.loads(json.dumps(v), object_pairs_hook=Node)
        if isinstance(v, dict) and isinstance(node.get(leaf), dict):
            node[leaf] = _merge(node[leaf], v)
        else:
            node[leaf] = v
        if not scalar or (isinstance(v, str) and "${" in v):  # a number or plain string resolves to itself
            overridden.append((*parents, leaf))
    return _resolve(cfg, interpolated + overridden)


def _delete(cfg: dict, key: str, value: Any) -> None:
    """``~key`` (value ANY) or ``~key=value``: Hydra's deletion, with its words, of a key the schema
    does not hold (one a ``+KEY`` added, an entry of a mapping setting): a group or a setting of the
    schema deleted was a traceback deep in the trainer, so it is refused here."""
    *parents, leaf = key.split(".")
    node = cfg
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
    if not isinstance(node, dict) or leaf not in node:
        raise BadInput(f"bad override: Could not delete from config. '{key}' does not exist.")
    if value is not ANY and node[leaf] != value:
        raise BadInput(
            f"bad override: Could not delete from config. The value of '{key}' is {node[leaf]} and not {value}."
        )
    if not parents and leaf in ROOT:
        raise bad("override", f"~{key}", f"a run has every section; set its keys instead ({key}.KEY=VALUE)")
    if not parents and leaf in ALL_GROUPS:
        raise bad("override", f"~{key}", f"a run has every group; choose another option instead ({key}=OPTION)")
    if len(parents) == 1 and parents[0] in ALL_GROUPS and leaf in field_map(schema_of(parents[0], node)):
        raise bad("override", f"~{key}", f"{key} is a setting with a default; set it instead ({key}=VALUE)")
    del node[leaf]


def _mapping_groups(groups: dict, keys: dict) -> tuple[dict, dict]:
    """(groups, keys) with each mapping chosen as a group's option (``model: {depth: 3}``, ``+model``)
    moved to the keys it sets (``mapping_keys``), before the other keys, as Hydra merged it."""
    chosen, mapped = {}, {}
    for g, v in groups.items():
        if isinstance(v, dict):
            mapped.update(mapping_keys(g.lstrip("+"), v, force_add=g.startswith("+")))
        else:
            chosen[g] = v
    return chosen, {**mapped, **keys}


def _copy(x: Any, cls=Node) -> Any:
    """A fresh copy of the cached base (JSON's types only: Nodes, lists, scalars; a scalar is immutable
    and stays itself): each run owns its config, and copying costs a third of parsing the text again."""
    if x.__class__ is list:
        return [v if v.__class__ in _SCALARS else _copy(v) for v in x]
    out = cls(x)
    for k, v in x.items():
        if v.__class__ not in _SCALARS:
            out[k] = _copy(v)
    return out


def _interpolated(x: Any, path: tuple = ()) -> list:
    """The paths (keys and list indices) of every string holding ``${`` in ``x``."""
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _interpolated(v, (*path, k))]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _interpolated(v, (*path, i))]
    return [path] if isinstance(x, str) and "${" in x else []


def _merge(a: dict, b: dict) -> dict:
    out = Node(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _resolve(cfg: RunConfig, paths: list) -> RunConfig:
    """``cfg`` with the plain interpolations under ``paths`` resolved (every other value holds none)."""
    fancy = []

    def lookup(path: str, seen: tuple):
        node = cfg
        for p in path.split("."):
            if not isinstance(node, dict) or p not in node:
                raise BadInput(f"config does not resolve: ${{{path}}} names no key")
            node = node[p]
        if isinstance(node, str) and "${" in node:
            if path in seen:
                raise BadInput(f"config does not resolve: ${{{path}}} refers to itself")
            return value(node, seen + (path,))
        return node

    def value(v, seen=()):
        if isinstance(v, str) and "${" in v:
            m = _INTERP.fullmatch(v)
            if m:
                return lookup(m.group(1), seen)
            fancy.append(v)
        return v

    def walk(node):
        if isinstance(node, dict):
            for k in node:
                node[k] = walk(node[k])
            return node
        if isinstance(node, list):
            return [walk(x) for x in node]
        return value(node)

    for path in paths:
        parent = cfg
        for p in path[:-1]:
            parent = _child(parent, p)
        if _child(parent, path[-1]) is not _MISSING:  # an override may have replaced the base's node
            parent[path[-1]] = walk(parent[path[-1]])
    if fancy:  # string interpolation, resolvers ...: OmegaConf's job
        from omegaconf import OmegaConf

        try:
            c = OmegaConf.create(plain(cfg))  # OmegaConf takes plain dicts only
            OmegaConf.resolve(c)
        except Exception as e:
            raise BadInput(f"config does not resolve: {' '.join(str(e).split())}") from None
        return RunConfig(nodes(OmegaConf.to_container(c)))
    return cfg


_MISSING = object()


def _child(node: Any, key: Any) -> Any:
    """``node[key]`` where a dict holds that key or a list that index, else _MISSING."""
    if isinstance(node, dict):
        return node.get(key, _MISSING) if isinstance(key, str) else _MISSING
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return _MISSING
