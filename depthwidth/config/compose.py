"""Where the Hydra tree lives and how dw composes it.

``compose(overrides)`` gives the same resolved config that ``dw train
OVERRIDES`` trains and that ``dw sweep`` expands, so every sweep run is an
ordinary override list a user can replay by hand.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from depthwidth.config.node import Node, nodes
from depthwidth.config.schema import base_nodes
from depthwidth.core.errors import BadInput, bad, did_you_mean


def conf_dir() -> Path:
    """``$DW_CONF``, else the checkout's ``conf/`` next to the package, else ``./conf``
    (a non-editable install: run dw from a folder holding conf/ and sweeps/)."""
    env = os.environ.get("DW_CONF")
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parents[2] / "conf"
    return beside if beside.is_dir() else Path("conf")


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
    ``_NAME``), merged under the file's own keys as Hydra does (no Hydra composition here)."""
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


def compose(overrides: Sequence[str] = ()) -> Node:
    """Compose conf/config.yaml with Hydra overrides -> a resolved ``Node`` tree (the type
    the fast composer gives too); bad overrides -> BadInput."""
    from omegaconf import OmegaConf

    parse_overrides(overrides)  # a malformed one named in one line, before Hydra's own words
    try:
        cfg = _hydra(overrides)
    except Exception as e:  # hydra raises several types; all are the user's input
        raise _explain(" ".join(str(e).split()), overrides) from None
    try:
        OmegaConf.resolve(cfg)
    except Exception as e:
        raise BadInput(f"config does not resolve: {' '.join(str(e).split())}") from None
    return nodes(OmegaConf.to_container(cfg, resolve=True))


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


def _hydra(overrides: Sequence[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for (group, name), node in base_nodes().items():  # the schema's defaults: the bottom of every chain
        store.store(group=group, name=name, node=node)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            return hydra_compose(config_name="config", overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def _explain(msg: str, overrides: Sequence[str]) -> BadInput:
    """Hydra's message as dw's one line: an unknown key or group option with its closest
    spelling (the same words ``dw sweep``'s own composer uses), never Hydra's search path."""
    import re

    if m := re.search(r"Could not find '([\w-]+)/([^']+)'", msg):
        try:
            load_group(m.group(1), m.group(2))
        except BadInput as bad:
            return bad
    if m := re.search(r"Could not override '([^']+)'", msg):
        from omegaconf import OmegaConf

        groups = [o for o in overrides if "=" in o and "." not in o.split("=")[0]]  # the tree they choose
        try:
            tree = OmegaConf.to_container(_hydra(groups), resolve=False)
        except Exception:
            tree = OmegaConf.to_container(_hydra([]), resolve=False)
        return unknown_key(m.group(1).lstrip("+"), tree)
    return BadInput(f"bad override: {msg.split(' To append to your config')[0]}")
