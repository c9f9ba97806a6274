"""Validation of a composed config against the typed schema (config/schema.py).

``check(cfg)`` validates a composed config (config/compose.py's ``RunConfig``,
or any plain mapping of the same) and raises one ``BadInput`` line
naming the first bad setting:

    bad value for train.log_every: 0 (allowed: an integer >= 1)

``dw train``, ``dw sweep`` (dry run and real), the launchers and the tests all
validate through ``check`` / ``check_group``, so they cannot drift apart.
``model`` and ``data`` are validated where they are interpreted
(``model.resolve.from_config``, ``data.source.make_source``), whose messages
name the layer or file at fault.  No Hydra, OmegaConf or torch here.
"""

from __future__ import annotations

import math
import re
import typing
from typing import Any, Literal, Mapping

from depthwidth.config.node import fingerprint
from depthwidth.config.schema import Interpolation, IntOrAuto, NumberOrAuto, Range, Time, field_map, schema_of
from depthwidth.config.schema import hints as schema_hints
from depthwidth.core.errors import BadInput, bad, did_you_mean

CHECKED = ("train", "optim", "probe", "run", "launcher", "tracker")


def check(cfg: Mapping, groups=CHECKED, texts: Mapping | None = None) -> None:
    """Validate every schema group present in ``cfg`` (a composed config: config/node.py);
    BadInput on the first bad setting.  ``texts``: {group: ``node.fingerprint`` of that very node}
    where the caller has them already (a sweep's expansion shares its runs' groups by them)."""
    for g in groups:
        node = _get(cfg, g)
        if node is not None:
            check_group(g, node, None if texts is None else texts.get(g))
    t, o = _get(cfg, "train"), _get(cfg, "optim")
    if t is not None and o is not None:
        _cross(t, o)


# Groups and settings that passed, by value (``_key``): the runs of a sweep share most groups whole
# and most settings of the rest (10,000 runs had checked optim, probe, run, launcher and tracker
# 10,000 times each, setting by setting).
_PASSED: set = set()
_PASSED_MAX = 4096
_SCALARS = frozenset({int, float, str, bool, type(None)})
_NO_RANGE = Range()  # a field without one (built once: a Range costs 1.5 us, 28 times a run of a sweep)


def _key(x: Any) -> Any:
    """A hashable value that equals another only where the checks cannot tell them apart: a scalar
    with its type (1, 1.0 and True differ), anything else its JSON text (``node.fingerprint``: a
    group's text costs a tenth of walking it in Python); None (never remembered) for a value JSON
    cannot hold."""
    t = x.__class__
    if t in _SCALARS:
        return (t, x)
    return fingerprint(x)


def _passed(key: Any) -> bool:
    return key is not None and key in _PASSED


def _remember(key: Any) -> None:
    if key is None:  # a value JSON cannot hold: checked every time
        return
    if len(_PASSED) >= _PASSED_MAX:
        _PASSED.clear()
    _PASSED.add(key)


def check_group(group: str, node: Mapping, text: str | None = None) -> None:
    """``group``'s settings (``node``) against the schema, once per value: ``text`` is the node's
    fingerprint where the caller holds it (computed here otherwise)."""
    if not hasattr(node, "keys"):
        raise bad(group, node, "a mapping of settings")
    if not isinstance(node, dict):  # an OmegaConf node or another mapping: checked as it is, every time
        _check_group(group, node)
        return
    text = fingerprint(node) if text is None else text
    key = None if text is None else ("group", group, text)
    if _passed(key):
        return
    _check_group(group, node)
    _remember(key)


def _check_group(group: str, node: Mapping) -> None:
    cls = schema_of(group, node)
    hints = schema_hints(cls)
    fields = field_map(cls)
    for key in node.keys():
        if key not in fields:
            names = [f"{group}.{k}" for k in fields]
            raise BadInput(
                f"unknown setting {group}.{key}: {did_you_mean(f'{group}.{key}', names)}(allowed: {', '.join(names)})"
            )
    for name, f in fields.items():
        if name not in node.keys():
            raise BadInput(f"missing setting {group}.{name}")
        _check_known(cls, f"{group}.{name}", node[name], hints[name], f.metadata.get("range", _NO_RANGE))


def check_setting(group: str, key: str, value: Any, node: Mapping | None = None) -> None:
    """One setting of ``group`` against its type and range in the schema (BadInput naming
    ``group.key``, the value and what is allowed): for code that interprets a group itself
    (``model.resolve.from_config``) and must bound its integers before it loops over them."""
    cls = schema_of(group, node)
    f = field_map(cls)[key]
    _check_known(cls, f"{group}.{key}", value, schema_hints(cls)[key], f.metadata.get("range", _NO_RANGE))


def _check_known(cls: type, name: str, v: Any, tp: Any, r: Range) -> None:
    """``_check_value``, once per value a setting of ``cls`` is given."""
    k = _key(v)
    key = None if k is None else (cls, name, k)
    if _passed(key):
        return
    _check_value(name, v, tp, r)
    _remember(key)


def _cross(t: Mapping, o: Mapping) -> None:
    """Rules that relate two settings."""
    mb = t["micro_batch_size"]
    if isinstance(mb, int) and t["batch_size"] % mb:
        raise bad(
            "train.micro_batch_size",
            mb,
            f"a divisor of train.batch_size={t['batch_size']} (per process: "
            "batch_size / processes must be a multiple of it)",
        )
    if len(o["betas"]) != 2:
        raise bad("optim.betas", list(o["betas"]), "two numbers in [0, 1), e.g. [0.9,0.95]")
    w = float(o["warmup"])
    if w >= 1 and w != int(w):
        raise bad("optim.warmup", o["warmup"], "a fraction in [0, 1) or a step count >= 1")


def _check_value(name: str, v: Any, tp: Any, r: Range) -> None:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union and type(None) in args:  # Optional[X]
        if v is None:
            return
        tp = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__") or hasattr(v, "keys"):
            raise bad(name, v, r.allowed or f"a list of {describe(args[0], r)}")
        for x in v:
            if not _ok(x, args[0], r):
                raise bad(name, _plain(v), r.allowed or f"a list of {describe(args[0], r)}")
        return
    if not _ok(v, tp, r):
        raise bad(name, v, r.allowed or describe(tp, r))


def _ok(v: Any, tp: Any, r: Range) -> bool:
    if typing.get_origin(tp) is Literal:
        return isinstance(v, str) and v in typing.get_args(tp)
    if tp is bool:
        return isinstance(v, bool)
    if tp is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif tp is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    elif tp is str:
        ok = isinstance(v, str) and (not r.allowed or v != "")
        return ok and (r.pattern is None or re.fullmatch(r.pattern, v) is not None)
    elif tp is Time:
        return (isinstance(v, int) and not isinstance(v, bool) and v > 0) or (
            isinstance(v, str) and v.replace(":", "").replace("-", "").isdigit()
        )
    elif tp is dict:
        return hasattr(v, "keys")
    elif tp is Interpolation:
        return (isinstance(v, int) and not isinstance(v, bool) and v >= 1) or (
            isinstance(v, str) and re.fullmatch(r"\$\{[\w.]+\}", v) is not None
        )
    elif tp is IntOrAuto:
        return v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
    elif tp is NumberOrAuto:
        return v == "auto" or (
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and _in_range(float(v), r)
        )
    else:  # pragma: no cover - a field of a type this checker does not know
        raise TypeError(f"schema type {tp!r} not supported")
    return ok and _in_range(float(v), r)


def _in_range(x: float, r: Range) -> bool:
    return not (
        (r.ge is not None and x < r.ge)
        or (r.gt is not None and x <= r.gt)
        or (r.le is not None and x > r.le)
        or (r.lt is not None and x >= r.lt)
    )


def describe(tp: Any, r: Range) -> str:
    """What a setting of type ``tp`` within ``r`` allows, in the words of the error messages."""
    if typing.get_origin(tp) is typing.Union and type(None) in typing.get_args(tp):
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return r.allowed or f"{describe(inner, r)} or null"
    if r.allowed:
        return r.allowed
    if typing.get_origin(tp) is Literal:
        return "|".join(typing.get_args(tp))
    if tp is Interpolation:
        return "an integer, or ${group.key} naming one"
    if typing.get_origin(tp) is list:
        return f"a list of {describe(typing.get_args(tp)[0], r)}"
    if tp is bool:
        return "true|false"
    if tp is str:
        return "a string"
    if tp is dict:
        return "a mapping"
    noun = "an integer" if tp is int else "a number"
    parts = [f"{op} {_n(x)}" for op, x in ((">=", r.ge), (">", r.gt), ("<=", r.le), ("<", r.lt)) if x is not None]
    return noun + (" " + " and ".join(parts) if parts else "")


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _plain(v):
    return list(v) if hasattr(v, "__iter__") and not isinstance(v, str) else v


def _get(cfg: Any, key: str):
    try:
        return cfg.get(key) if hasattr(cfg, "get") else getattr(cfg, key, None)
    except Exception:
        return None
