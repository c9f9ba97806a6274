"""The one type a composed config has downstream: ``RunConfig``, a plain, resolved mapping
with attribute access (``cfg.train.seq_len``) whose groups hold their schema dataclass's
fields (config/schema.py; a golden test pins the presets') and any key a ``+KEY`` added:
config/check.py names such a key in train, optim, probe, run, launcher and tracker; model
and data are checked where they are read (``model.resolve.from_config``,
``data.source.make_source``), which do not look for keys they do not read, so
``+model.foo=1`` composes, prepares and has a run id.

The composer (``compose.compose``, ``compose.compose_parts``) gives a ``RunConfig`` of
``Node`` groups, and so does a run directory's ``config.yaml`` read back
(``run_config``), so code below ``config/`` takes plain mappings, not OmegaConf's DictConfig
(a few places still convert to and from OmegaConf: see docs/architecture.md).
Why a typed mapping and not the dataclasses themselves: a run's config is hashed
(run ids), written (config.yaml, W&B) and shared between a sweep's runs as the
mapping it is, byte for byte as before, and ``+KEY`` may add a key the schema lacks;
``RunConfig.typed(group)`` gives a group as its dataclass.  No Hydra, OmegaConf or torch here.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Union

from depthwidth.config import schema  # the annotations: what each group holds (get_type_hints reads them)


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


class RunConfig(Node):
    """A resolved run config: each group a ``Node`` holding its schema dataclass's fields (and any
    key a ``+KEY`` added: see the module's doc)."""

    __slots__ = ()

    train: schema.Train
    probe: schema.Probe
    run: schema.Run
    model: schema.Model
    optim: schema.Optim
    data: Union[schema.PydocData, schema.SyntheticData, schema.MemmapData]
    launcher: Union[schema.DebugLauncher, schema.LocalLauncher, schema.SlurmLauncher]
    tracker: Union[schema.NoTracker, schema.WandbTracker]

    def to_dict(self) -> dict:
        """Plain dicts and lists: what config.yaml, W&B and the run id see (``plain``)."""
        return plain(self)

    def typed(self, group: str):
        """``group`` as its schema dataclass (``cfg.typed("model").depth``): a copy.  A key the
        schema lacks is a TypeError here: config/check.py names it first in the groups it checks
        (``check.CHECKED``), not in model or data (a ``+model.foo`` passes check)."""
        node = self[group]
        return schema.schema_of(group, node)(**plain(node))


def run_config(x: Mapping) -> RunConfig:
    """A composed config in any mapping form as a ``RunConfig``: a ``RunConfig`` is itself, a
    ``Node`` tree becomes one in place (the caller sees what ``train.plan.prepare`` resolves in
    it, as before), plain or OmegaConf containers (a run's config.yaml) are copied."""
    if isinstance(x, RunConfig):
        return x
    if x.__class__ is Node:
        object.__setattr__(x, "__class__", RunConfig)  # the same slots: the same object, typed
        return x
    return RunConfig(nodes(x))


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
