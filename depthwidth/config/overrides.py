"""Override strings: read in Hydra's override grammar, written back in it.

``parse_overrides`` is Hydra's override *parser* (its lexer and value types, not its
composition: config/compose.py composes); ``groups_and_keys`` turns the parsed
overrides into what the one composer takes (group choices, key overrides, ``+`` adds
and ``~`` deletions in order); ``fmt_value``/``override_list`` write a run's values
back as override strings (a test round-trips them through the parser), so every
sweep run is an override list ``dw train`` replays by hand.  No OmegaConf, no torch;
Hydra's parser only where command-line overrides are read.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from depthwidth.config.node import plain
from depthwidth.core.errors import bad

DELETE = "~"  # a key override's prefix for a deletion: {"~model.width": value or ANY}
ANY = object()  # ``~key`` deletes whatever the key holds; ``~key=value`` only that value

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


def parse_overrides(overrides: Sequence[str]) -> list:
    """Hydra's parse of ``key=value`` strings, one at a time, so that a bad one is named in one line
    with what is allowed (never Hydra's lexer exception, nor its "Config group override must be a
    string" for ``=3``)."""
    import unicodedata

    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out = []
    for o in overrides:
        if not isinstance(o, str) or ("=" not in o and not o.startswith("~")):  # ~KEY deletes
            raise bad("override", o, "KEY=VALUE, e.g. model.depth=4, or a group choice, e.g. model=vwt")
        try:
            (got,) = parser.parse_overrides([o])
        except Exception as e:
            odd = next((c for c in o if not c.isascii()), None)
            if odd is not None:
                name = unicodedata.name(odd, f"U+{ord(odd):04X}")
                raise bad(
                    "override",
                    o,
                    f"ASCII outside quotes: {odd!r} ({name}) is not; quote a value that needs it: run.dir='/tmp/ñ'",
                ) from None
            said = " ".join(str(e).split()).split(" See https://")[0]
            raise bad("override", o, f"KEY=VALUE in Hydra's override grammar ({said})") from None
        if not got.key_or_group:
            raise bad("override", o, "KEY=VALUE with a key before '=', e.g. model.depth=4 or model=vwt")
        out.append(got)
    return out


def groups_and_keys(overrides: Sequence[str], *, deletions: bool = True) -> tuple[dict, dict]:
    """``key=value`` strings -> (groups, keys) for config/compose.py, values parsed as Hydra parses
    them: a key without a dot chooses a group's option (``model=vwt``; ``+model=vwt`` too), a dotted
    key sets a value (``+KEY``: adds it, refused by the composer where it holds a value already, as
    Hydra; ``++KEY``: adds or sets it), ``~KEY`` or ``~KEY=VALUE`` deletes it (keys ``~KEY``, value
    ANY or VALUE; ``deletions=False``: refused).  A mapping for a key without a dot
    (``model={depth: 3}``, ``train={steps: 5}``) sets each of its keys, as Hydra merged it
    (``model.depth=3``; with ``+`` or ``++``: ``++model.depth=3``).  Refused in one line: a sweep
    (``a=1,2``, ``range(..)``: one command line is one run), a package (``model@x=vwt``: dw's groups
    have none) and ``++GROUP=OPTION`` (Hydra: force-add of config groups is not supported)."""
    groups, keys = {}, {}
    if not overrides:
        return groups, keys
    for o in parse_overrides(overrides):
        key = o.key_or_group
        if o.package is not None:
            raise bad("override", o.input_line, f"{key}=VALUE with no package (@{o.package}): dw's groups have none")
        if o.is_sweep_override():
            raise bad("override", o.input_line, "key=value (a sweep of values goes in a sweep file: dw sweep)")
        if o.is_delete():
            if not deletions:
                raise bad("override", o.input_line, "key=value (no deletions on a sweep's command line)")
            keys[DELETE + key] = ANY if o.value() is None and "=" not in o.input_line else plain(o.value())
            continue
        v = plain(o.value())
        add = "++" if o.is_force_add() else "+" if o.is_add() else ""
        if "." in key:
            keys[add + key] = v
        elif isinstance(v, dict):  # Hydra's merge of a mapping into a group or section: key by key
            keys.update(mapping_keys(key, v, force_add=bool(add)))
        elif add == "++":
            raise bad("override", o.input_line, f"{key}={fmt_value(v)}; force-add of config groups is not supported")
        else:
            groups[key] = v
    return groups, keys


def mapping_keys(name: str, mapping: dict, *, force_add: bool = False) -> dict:
    """``name={k: v, ...}`` as the key overrides it stands for: ``{name.k: v, ...}`` (``++name.k``
    with ``force_add``: Hydra's ``+name={..}`` and ``++name={..}`` merge keys in, new or not)."""
    add = "++" if force_add else ""
    return {f"{add}{name}.{k}": v for k, v in mapping.items()}


def parse_cli_overrides(overrides: Sequence[str]) -> tuple[dict, dict]:
    """A sweep's or a launcher's command-line overrides -> (groups, keys); no deletions."""
    return groups_and_keys(overrides, deletions=False)
