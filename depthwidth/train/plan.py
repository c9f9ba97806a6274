"""The gate every run passes before anything is written.

``check(cfg) -> CheckedRun``: everything that can be checked without data or a
device.  ``dw sweep`` calls it for every run of a sweep, dry run or not, so a
sweep rejects exactly what ``dw train`` would, with the same message, before it
submits anything.  No torch here.

``prepare(cfg) -> PreparedRun``: what ``dw train`` calls before it trains:
``check``, then the data opened, the device and precision resolved, the run id
and the run directory (bad input exits 2 with nothing on disk).  torch is
imported only to look for a CUDA device when ``train.device`` is not ``cpu``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.config import check as config_check
from depthwidth.config.identity import run_id as config_run_id
from depthwidth.config.node import RunConfig, run_config
from depthwidth.config.schema import MAX_CPUS
from depthwidth.core.atomic import check_creatable
from depthwidth.core.errors import BadInput, bad
from depthwidth.core.store import runs_root
from depthwidth.data.synthetic import UNBOUNDED
from depthwidth.model.accounting import account
from depthwidth.model.resolve import from_config
from depthwidth.model.spec import ModelSpec
from depthwidth.train import dist, optim


@dataclass
class CheckedRun:
    """What ``check`` found: the model and the run's length."""

    spec: ModelSpec
    steps: int  # optimiser steps of the whole run
    tokens_per_step: int
    budgets: list  # optim.Budget, the full run last


def check(cfg: Any, processes: int = 1, spec: ModelSpec | None = None, texts: dict | None = None) -> CheckedRun:
    """Everything about ``cfg`` run on ``processes`` processes that can be checked without
    data or a device (BadInput).  ``spec``: ``cfg.model`` resolved already, ``texts``: its groups'
    fingerprints (``config.check.check``), where a sweep's expansion holds them."""
    config_check.check(cfg, texts=texts)
    t = cfg["train"]
    if int(t["threads"]) > MAX_CPUS:
        raise bad("train.threads", t["threads"], f"an integer in [0, {MAX_CPUS:,}] (0: torch's default)")
    if t["batch_size"] % processes:
        raise bad("train.batch_size", t["batch_size"], f"a multiple of the {processes} data-parallel processes")
    if t["parallel"] == "single" and processes > 1:
        raise bad("train.parallel", "single", f"auto|ddp|fsdp for a run of {processes} processes (single: one process)")
    mb, per = t["micro_batch_size"], t["batch_size"] // processes
    if isinstance(mb, int) and per % mb:
        raise bad("train.micro_batch_size", mb, f"a divisor of the {per} sequences per process")
    steps, per_step = optim.plan_steps(t)
    spec = from_config(cfg["model"]) if spec is None else spec
    dv = cfg["data"].get("vocab_size")
    if spec.vocab_size != dv:
        raise BadInput(f"vocabulary mismatch: model.vocab_size={spec.vocab_size} but data has {dv}")
    budgets = optim.plan_budgets(t["budgets"], steps, per_step, cfg["optim"])
    return CheckedRun(spec, steps, per_step, budgets)


def epochs(tokens: float, train_tokens: int) -> float | None:
    """How many times a run of ``tokens`` training tokens passes over a train split of ``train_tokens``
    (a decay branch reads the trunk's own stream, so the main run's tokens are the data it reads);
    None for a split that never runs out."""
    return None if train_tokens >= UNBOUNDED else tokens / max(1, train_tokens)


def data_warning(tokens: float, source: Any) -> str | None:
    """One line when a run's planned tokens exceed its data's train split (``dw train`` and the dry run)."""
    n = source.n_tokens("train")
    e = epochs(tokens, n)
    if e is None or e <= 1:
        return None
    return (
        f"the run plans {int(tokens):,} training tokens, {e:.2f} epochs of the {n:,}-token train split of "
        f"data {_data_name(source)}: tokens repeat (a confound for a scaling law's data term)"
    )


def _data_name(source: Any) -> str:
    path = (source.meta or {}).get("path")
    return f"{source.name} ({path})" if path else source.name


def precision_for(requested: str, device_type: str) -> str:
    """``train.precision=auto`` -> bf16 on CUDA, fp32 elsewhere; explicit values stay."""
    if requested == "auto":
        return "bf16" if device_type == "cuda" else "fp32"
    return requested


@dataclass
class PreparedRun:
    """What ``prepare`` resolved: a checked run with its data, identity, directory and device type."""

    cfg: RunConfig
    spec: ModelSpec
    source: Any  # data.base.TokenSource
    run_id: str
    run_dir: Path
    steps: int
    tokens_per_step: int
    budgets: list
    device_type: str = "cpu"
    precision: str = "fp32"
    accounting: dict = field(default_factory=dict)


def prepare(cfg: RunConfig) -> PreparedRun:
    """Validate the whole config (the composer's ``RunConfig``; a mapping of the same is
    typed by ``node.run_config``) and resolve what the run needs; write nothing.
    ``train.precision=auto`` is resolved here (bf16 on CUDA, else fp32): the
    precision is part of the run's identity, the device is not."""
    from depthwidth.data.source import make_source

    cfg = run_config(cfg)

    rp = check(cfg, processes=dist.world_from_env().size)
    if cfg.run.dir:  # /proc/x, a file's child: bad input, before the data are opened or anything is written
        check_creatable("run.dir", cfg.run.dir)
    t = cfg.train
    source = make_source(cfg.data, t.seq_len)
    if rp.spec.vocab_size != source.vocab_size:
        raise BadInput(
            f"vocabulary mismatch: model.vocab_size={rp.spec.vocab_size} but data {source.name!r} has "
            f"{source.vocab_size} tokens"
        )
    device_type = _device_type(t.device)
    precision = precision_for(t.precision, device_type)
    if t.precision != precision:
        cfg.train.precision = precision
    rid = config_run_id(cfg)
    run_dir = Path(cfg.run.dir) if cfg.run.dir else runs_root() / "adhoc" / rid
    existing = _existing_run_id(run_dir)
    if existing is not None and existing != rid:
        raise BadInput(
            f"run.dir {str(run_dir)!r} holds run {existing} trained with a different config (this one is "
            f"{rid}); choose another run.dir"
        )
    return PreparedRun(
        cfg,
        rp.spec,
        source,
        rid,
        run_dir,
        rp.steps,
        rp.tokens_per_step,
        rp.budgets,
        device_type,
        precision,
        account(rp.spec, t.seq_len),
    )


def _device_type(name: str) -> str:
    if name == "cpu":
        return "cpu"
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise bad("train.device", name, "auto|cpu (no CUDA device is visible)")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _existing_run_id(run_dir: Path) -> str | None:
    p = run_dir / "config.yaml"
    if not p.exists():
        return None
    from omegaconf import OmegaConf

    try:
        rid = OmegaConf.load(p).get("run_id")
        return None if rid is None else str(rid)
    except Exception:
        return None
