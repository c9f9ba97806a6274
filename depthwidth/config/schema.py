"""The typed schema of a run's settings: one source of types and ranges.

Every group that says *how* a run trains and where it goes — ``train``,
``optim``, ``probe``, ``run``, ``launcher`` and ``tracker`` — is a dataclass
below; each field's annotation is its type and its ``setting(...)`` metadata
its range or choices.  ``check(cfg)`` validates a composed config (Hydra's or
the sweep's fast composer's: both are plain mappings by then) against them
and raises one ``BadInput`` line naming the first bad setting:

    bad value for train.log_every: 0 (allowed: an integer >= 1)

``dw train``, ``dw sweep`` (dry run and real), the launchers and the tests
all validate through ``check`` / ``check_group``, so they cannot drift apart.
The defaults stay in ``conf/GROUP/*.yaml`` (with their comments); a test
checks that every YAML key has a field here, every field a YAML key, and that
the shipped defaults pass.  ``model`` and ``data`` are validated where they
are interpreted (``model.spec.from_config``, ``data.source.make_source``).

No Hydra, OmegaConf or torch here.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from depthwidth.core.errors import BadInput, bad, did_you_mean

Time = typing.NewType("Time", str)  # SLURM time: minutes (int) or [D-]HH:MM:SS
IntOrAuto = typing.NewType("IntOrAuto", str)  # an integer >= 1, or "auto"
NumberOrAuto = typing.NewType("NumberOrAuto", str)  # a finite number in the field's range, or "auto"


@dataclass(frozen=True)
class Range:
    """What one setting allows, beyond its type."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple = ()
    allowed: str | None = None  # the message's "allowed:" text, when the generated one would be unclear
    pattern: str | None = None  # a string must match it whole (re.fullmatch)


def setting(ge=None, gt=None, le=None, lt=None, choices=(), allowed=None, pattern=None):
    return field(metadata={"range": Range(ge, gt, le, lt, tuple(choices), allowed, pattern)})


# W&B refuses these characters in project and entity names, and names over 128 characters
WANDB_NAME = r"[^/\\#?%:]{1,128}"
WANDB_NAME_ALLOWED = "1-128 characters, none of / \\ # ? % :"
WANDB_ENTITY = r"[^/\\#?%:\s]{1,128}"  # a user or team name: no spaces either
WANDB_ENTITY_ALLOWED = "1-128 characters, no spaces, none of / \\ # ? % :"


# ---------------------------------------------------------------------------
# the groups
# ---------------------------------------------------------------------------


@dataclass
class Train:
    steps: int = setting(ge=1)
    tokens: Optional[float] = setting(gt=0, allowed="a token count or null")
    batch_size: int = setting(ge=1)
    seq_len: int = setting(ge=1)
    log_every: int = setting(ge=1)
    eval_every: int = setting(ge=0)
    eval_batches: int = setting(ge=1)
    ckpt_every: int = setting(ge=0)
    keep_ckpts: int = setting(ge=0)
    budgets: list[float] = setting(gt=0, allowed="a list of token counts, e.g. [1e6,4e6]")
    micro_batch_size: Optional[IntOrAuto] = setting(
        allowed="sequences per process per micro-batch: an integer >= 1, auto (the largest that fits) or null (no accumulation)")
    parallel: str = setting(choices=("auto", "single", "ddp", "fsdp"))
    activation_checkpointing: str = setting(choices=("none", "block", "auto"))
    compile: bool = setting()
    device: str = setting(choices=("auto", "cpu", "cuda"))
    precision: str = setting(choices=("auto", "fp32", "bf16"))
    threads: int = setting(ge=0)
    analyze_at_end: bool = setting()


@dataclass
class Optim:
    lr: float = setting(gt=0)
    betas: list[float] = setting(ge=0, lt=1, allowed="two numbers in [0, 1), e.g. [0.9,0.95]")
    eps: float = setting(gt=0)
    weight_decay: float = setting(ge=0)
    grad_clip: float = setting(ge=0, allowed="a number >= 0 (0: no clipping)")
    schedule: str = setting(choices=("constant", "cosine", "wsd", "power"))
    warmup: float = setting(ge=0, allowed="a fraction in [0, 1) or a step count >= 1")
    min_lr_ratio: float = setting(ge=0, le=1)
    decay_fraction: float = setting(ge=0, le=1)
    power_a: NumberOrAuto = setting(gt=0, allowed="a number > 0, or auto (tokens per step / 1024)")
    power_exponent: float = setting(lt=0)


@dataclass
class Probe:
    every: int = setting(ge=0, allowed="an integer >= 0 (0: off)")
    at: list[int] = setting(ge=1, allowed="a list of steps >= 1")
    entropy_every: int = setting(ge=0, allowed="an integer >= 0 (0: off)")


@dataclass
class Run:
    dir: Optional[str] = setting()
    seed: int = setting()
    sweep: Optional[str] = setting()


@dataclass
class DebugLauncher:
    name: str = setting(choices=("debug",))
    pack: int = setting(ge=1)
    gpu_memory: float = setting(gt=0, allowed="GiB per GPU for the memory plan, a number > 0")


@dataclass
class LocalLauncher:
    name: str = setting(choices=("local",))
    workers: int = setting(ge=1)
    gpus: str = setting(choices=("auto", "none"))
    gpus_per_run: int = setting(ge=1)
    gpu_memory: float = setting(gt=0, allowed="GiB per GPU for the memory plan, a number > 0")
    pack: int = setting(ge=1)
    python: Optional[str] = setting(allowed="a path to a Python interpreter or null")


@dataclass
class SlurmLauncher:
    name: str = setting(choices=("slurm",))
    partition: Optional[str] = setting()
    account: Optional[str] = setting()
    qos: Optional[str] = setting()
    constraint: Optional[str] = setting()
    nodes: int = setting(ge=1)
    gpus_per_node: int = setting(ge=0)
    tasks_per_node: Optional[int] = setting(ge=1, allowed="an integer >= 1 or null")
    gpu_memory: float = setting(gt=0, allowed="GiB per GPU for the memory plan, a number > 0")
    cpus_per_task: int = setting(ge=1)
    mem: Optional[str] = setting()
    time: Time = setting(allowed="minutes (int) or [D-]HH:MM:SS")
    array_parallelism: int = setting(ge=1)
    max_array_size: Optional[int] = setting(ge=1, allowed="an integer >= 1, or null (the cluster's MaxArraySize)")
    pack: int = setting(ge=1)
    signal_delay_s: int = setting(ge=0)
    job_name: Optional[str] = setting()
    setup: list[str] = setting(allowed="a list of shell lines")
    additional: dict = setting(allowed="a mapping of sbatch option -> value")
    python: Optional[str] = setting(allowed="a path to a Python interpreter or null")


@dataclass
class NoTracker:
    name: str = setting(choices=("none",))
    seed_in_name: bool = setting()


@dataclass
class WandbTracker:
    name: str = setting(choices=("wandb",))
    project: str = setting(pattern=WANDB_NAME, allowed=f"a W&B project name: {WANDB_NAME_ALLOWED} "
                                                     "(the entity goes in tracker.entity)")
    entity: Optional[str] = setting(pattern=WANDB_ENTITY, allowed=f"a W&B entity: {WANDB_ENTITY_ALLOWED}, or null")
    mode: str = setting(choices=("auto", "online", "offline"))
    init_timeout: float = setting(gt=0, allowed="seconds > 0")
    finish_timeout: float = setting(gt=0, allowed="seconds > 0")
    seed_in_name: bool = setting()
    tags: list[str] = setting()
    probes: str = setting(choices=("table", "histogram", "both"))


GROUPS: dict[str, Any] = {"train": Train, "optim": Optim, "probe": Probe, "run": Run}
VARIANTS: dict[str, dict[str, Any]] = {  # groups whose fields depend on their ``name``
    "launcher": {"debug": DebugLauncher, "local": LocalLauncher, "slurm": SlurmLauncher},
    "tracker": {"none": NoTracker, "wandb": WandbTracker},
}
LAUNCHERS = tuple(VARIANTS["launcher"])
TRACKERS = tuple(VARIANTS["tracker"])


def schema_of(group: str, node: Mapping | None = None):
    """The dataclass that describes ``group`` (for launcher/tracker: of ``node['name']``)."""
    if group in GROUPS:
        return GROUPS[group]
    options = VARIANTS[group]
    name = (node or {}).get("name")
    if name not in options:
        raise bad(f"{group}.name" if group == "tracker" else group, name, "|".join(options))
    return options[name]


# ---------------------------------------------------------------------------
# checking
# ---------------------------------------------------------------------------


def check(cfg: Mapping, groups=("train", "optim", "probe", "run", "launcher", "tracker")) -> None:
    """Validate every schema group present in ``cfg``; BadInput on the first bad setting."""
    if type(cfg).__module__.startswith("omegaconf"):  # Hydra's DictConfig: check plain values
        from omegaconf import OmegaConf

        cfg = OmegaConf.to_container(cfg, resolve=True)
    for g in groups:
        node = _get(cfg, g)
        if node is not None:
            check_group(g, node)
    t, o = _get(cfg, "train"), _get(cfg, "optim")
    if t is not None and o is not None:
        _cross(t, o)


def check_group(group: str, node: Mapping) -> None:
    if not hasattr(node, "keys"):
        raise bad(group, node, "a mapping of settings")
    cls = schema_of(group, node)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in node.keys():
        if key not in fields:
            names = [f"{group}.{k}" for k in fields]
            raise BadInput(f"unknown setting {group}.{key}: {did_you_mean(f'{group}.{key}', names)}"
                           f"(allowed: {', '.join(names)})")
    for name, f in fields.items():
        if name not in node.keys():
            raise BadInput(f"missing setting {group}.{name}")
        _check_value(f"{group}.{name}", node[name], hints[name], f.metadata.get("range", Range()))


def _cross(t: Mapping, o: Mapping) -> None:
    """Rules that relate two settings."""
    mb = t["micro_batch_size"]
    if isinstance(mb, int) and t["batch_size"] % mb:
        raise bad("train.micro_batch_size", mb, f"a divisor of train.batch_size={t['batch_size']} (per process: "
                  "batch_size / processes must be a multiple of it)")
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
            raise bad(name, v, r.allowed or f"a list of {_describe(args[0], r)}")
        for x in v:
            if not _ok(x, args[0], r):
                raise bad(name, _plain(v), r.allowed or f"a list of {_describe(args[0], r)}")
        return
    if not _ok(v, tp, r):
        raise bad(name, v, r.allowed or _describe(tp, r))


def _ok(v: Any, tp: Any, r: Range) -> bool:
    if tp is bool:
        return isinstance(v, bool)
    if tp is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif tp is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    elif tp is str:
        ok = isinstance(v, str) and (not r.choices or v in r.choices) and (not r.allowed or v != "")
        return ok and (r.pattern is None or re.fullmatch(r.pattern, v) is not None)
    elif tp is Time:
        return (isinstance(v, int) and not isinstance(v, bool) and v > 0) or (
            isinstance(v, str) and v.replace(":", "").replace("-", "").isdigit())
    elif tp is dict:
        return hasattr(v, "keys")
    elif tp is IntOrAuto:
        return v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
    elif tp is NumberOrAuto:
        return v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                               and _in_range(float(v), r))
    else:  # pragma: no cover - a field of a type this checker does not know
        raise TypeError(f"schema type {tp!r} not supported")
    return ok and _in_range(float(v), r)


def _in_range(x: float, r: Range) -> bool:
    return not ((r.ge is not None and x < r.ge) or (r.gt is not None and x <= r.gt)
                or (r.le is not None and x > r.le) or (r.lt is not None and x >= r.lt))


def _describe(tp: Any, r: Range) -> str:
    if r.choices:
        return "|".join(r.choices)
    if tp is bool:
        return "true|false"
    if tp is str:
        return "a string"
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


def fields_of(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]
