"""The one type a composed config has downstream: ``Node``, a plain, resolved mapping
with attribute access (``cfg.train.seq_len``).

Both composers (Hydra's ``compose.compose`` and the sweep's ``fast.compose_fast``)
and the run directory's ``config.yaml`` give a tree of Nodes, so no code below
``config/`` handles OmegaConf's DictConfig.  No Hydra, OmegaConf or torch here.
"""

from __future__ import annotations

import json
from typing import Any


class Node(dict):
    """A plain, resolved config mapping with attribute access (cfg.train.seq_len)."""

    __slots__ = ()

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        self[k] = v


def nodes(x: Any) -> Any:
    """Nested mappings and lists (plain or OmegaConf containers, resolved) -> Nodes and lists."""
    if hasattr(x, "items"):
        return Node((k, nodes(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)) or type(x).__name__ == "ListConfig":
        return [nodes(v) for v in x]
    return x


def plain(x: Any) -> Any:
    """A Node tree as plain dicts and lists (for YAML, JSON and W&B)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    return x


def fingerprint(x: Any) -> str | None:
    """A config value as JSON text, equal for two values only where no reader can tell them apart
    (JSON keeps 1, 1.0, true and "1" apart and mappings in order; a tuple reads as a list): the key
    of what a sweep computes once per distinct value of a group (config/check.py's passed checks,
    sweep/expand.py's shared groups), where JSON's C encoder costs a fraction of walking the value
    in Python.  None for a value JSON cannot hold (another type, a circular or too deep one)."""
    try:
        return json.dumps(x)
    except (TypeError, ValueError, RecursionError):
        return None
