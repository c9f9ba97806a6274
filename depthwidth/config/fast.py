"""Override strings and fast composition for ``dw sweep`` (used by sweep/expand.py).

``fmt_value``/``override_list`` write values in Hydra's override grammar (a
test round-trips them through Hydra's parser); ``compose_fast`` builds the
resolved config of group choices + key overrides from conf/ with plain dicts:
conf/ is composed once per distinct set of group choices and each run's key
overrides are applied on a copy.  A test checks every shipped sweep's runs
equal a full Hydra compose of their override lists.  No Hydra import unless
command-line overrides must be parsed; no torch.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Sequence

from depthwidth.config.compose import conf_dir, group_options, load_group, parse_overrides, unknown_key
from depthwidth.config.node import Node, nodes
from depthwidth.config.schema import base_nodes
from depthwidth.core.errors import BadInput, bad, did_you_mean

# ---------------------------------------------------------------------------
# override strings (round-trip through Hydra's override grammar)
# ---------------------------------------------------------------------------

_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:")


def fmt_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e16:
            return repr(float(v))  # 6.4e9 -> 6400000000.0, stays a float
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{fmt_value(x)}" for k, x in v.items()) + "}"
    s = str(v)
    if s and set(s) <= _PLAIN and s.lower() not in ("null", "true", "false", "nan", "inf", "-inf") and not _numeric(s):
        return s
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def override_list(groups: dict, keys: dict) -> list[str]:
    return [f"{g}={fmt_value(o)}" for g, o in groups.items()] + [f"{k}={fmt_value(v)}" for k, v in keys.items()]


def parse_cli_overrides(overrides: Sequence[str]) -> tuple[dict, dict]:
    """``key=value`` strings from the command line -> (groups, keys), values parsed as Hydra would."""
    groups, keys = {}, {}
    if not overrides:
        return groups, keys
    parsed = parse_overrides(overrides)
    for o in parsed:
        key = o.key_or_group
        if o.is_delete() or o.is_sweep_override():
            raise bad(
                "override", o.input_line, "key=value (no deletions or sweeps on the command line; use a sweep file)"
            )
        v = o.value()
        if "." in key:
            keys[("+" if o.is_add() else "") + key] = _plain(v)
        else:
            groups[key] = _plain(v)
    return groups, keys


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# ---------------------------------------------------------------------------
# fast composition
# ---------------------------------------------------------------------------

_BASE: dict = {}


def _base(groups: tuple) -> Any:
    """conf/config.yaml with these group choices (unresolved, struct) — what
    Hydra's compose gives for a flat defaults list; cached per distinct choice."""
    from omegaconf import OmegaConf

    key = (str(conf_dir()), groups)
    if key in _BASE:
        return _BASE[key]
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
        opt = chosen.pop(g, opt)
        if opt is None:
            continue
        if not isinstance(opt, str):
            raise bad(f"config group {g}", opt, ", ".join(group_options(g)))
        cfg = OmegaConf.merge(cfg, OmegaConf.create({g: load_group(g, opt)}))
    for g, opt in chosen.items():
        raise BadInput(
            f"unknown config group {g!r}: {did_you_mean(g, in_defaults)}(groups: "
            f"{', '.join(sorted(in_defaults))}; config keys need a dot, e.g. {g}.key=value)"
        )
    OmegaConf.set_struct(cfg, True)
    _BASE[key] = cfg
    return cfg


_PLAIN_BASE: dict = {}
_SCALARS = frozenset({int, float, str, bool, type(None)})
_INTERP = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


def compose_fast(groups: dict, keys: dict) -> Node:
    """Resolved config for group choices + key overrides (raises BadInput).

    Works on plain dicts (a deep copy of an OmegaConf node costs more than the
    whole rest of a run's dry-run), copied from the cached base's Nodes (``_copy``);
    plain ``${a.b}`` interpolations are resolved here (where the base holds one,
    and in the overridden values: nothing else can hold one), anything fancier
    goes through OmegaConf.  A test checks the result equals Hydra's compose of the
    run's override list."""

    from omegaconf import OmegaConf

    bkey = tuple(sorted(groups.items()))
    if bkey not in _PLAIN_BASE:
        text = json.dumps(OmegaConf.to_container(_base(bkey), resolve=False))
        _PLAIN_BASE[bkey] = (text, _interpolated(json.loads(text)), json.loads(text, object_pairs_hook=Node))
    text, interpolated, tree = _PLAIN_BASE[bkey]
    cfg = _copy(tree)
    overridden = []
    for k, v in keys.items():
        add = k.startswith("+")
        k = k.lstrip("+")
        *parents, leaf = k.split(".")
        node = cfg
        for i, p in enumerate(parents):
            if not isinstance(node, dict) or (p not in node and not add):
                raise unknown_key(k, json.loads(text))
            node = node.setdefault(p, Node())
        if not isinstance(node, dict) or (leaf not in node and not add):
            raise unknown_key(k, json.loads(text))
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


def _copy(x: Any) -> Any:
    """A fresh copy of the cached base (JSON's types only: Nodes, lists, scalars; a scalar is immutable
    and stays itself): each run owns its config, and copying costs a third of parsing the text again."""
    if x.__class__ is list:
        return [v if v.__class__ in _SCALARS else _copy(v) for v in x]
    out = Node(x)
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


def _resolve(cfg: dict, paths: list) -> Node:
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
            c = OmegaConf.create(cfg)
            OmegaConf.resolve(c)
        except Exception as e:
            raise BadInput(f"config does not resolve: {' '.join(str(e).split())}") from None
        return nodes(OmegaConf.to_container(c))
    return cfg


_MISSING = object()


def _child(node: Any, key: Any) -> Any:
    """``node[key]`` where a dict holds that key or a list that index, else _MISSING."""
    if isinstance(node, dict):
        return node.get(key, _MISSING) if isinstance(key, str) else _MISSING
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return _MISSING
