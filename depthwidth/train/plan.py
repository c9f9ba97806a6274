"""The gate every run passes before anything is written: ``check(cfg)``.

``dw train`` calls it through ``trainer.prepare`` (which then also opens the
data and looks at the run directory); ``dw sweep`` calls it for every run of
a sweep, dry run or not, so a sweep rejects exactly what ``dw train`` would,
with the same message, before it submits anything.  No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from depthwidth.config import schema
from depthwidth.core.errors import BadInput, bad
from depthwidth.model.resolve import from_config
from depthwidth.model.spec import ModelSpec
from depthwidth.train import optim

PRECISIONS = ("fp32", "bf16")


@dataclass
class RunPlan:
    spec: ModelSpec
    steps: int  # optimiser steps of the whole run
    tokens_per_step: int
    budgets: list  # optim.Budget, the full run last


def check(cfg: Any, processes: int = 1) -> RunPlan:
    """Everything about ``cfg`` run on ``processes`` processes that can be checked without
    data or a device (BadInput)."""
    schema.check(cfg)
    t = cfg["train"]
    if t["batch_size"] % processes:
        raise bad("train.batch_size", t["batch_size"], f"a multiple of the {processes} data-parallel processes")
    if t["parallel"] == "single" and processes > 1:
        raise bad("train.parallel", "single", f"auto|ddp|fsdp for a run of {processes} processes (single: one process)")
    mb, per = t["micro_batch_size"], t["batch_size"] // processes
    if isinstance(mb, int) and per % mb:
        raise bad("train.micro_batch_size", mb, f"a divisor of the {per} sequences per process")
    steps, per_step = optim.plan_steps(t)
    spec = from_config(cfg["model"])
    dv = cfg["data"].get("vocab_size")
    if spec.vocab_size != dv:
        raise BadInput(f"vocabulary mismatch: model.vocab_size={spec.vocab_size} but data has {dv}")
    budgets = optim.plan_budgets(t["budgets"], steps, per_step, cfg["optim"])
    return RunPlan(spec, steps, per_step, budgets)


def precision_for(requested: str, device_type: str) -> str:
    """``train.precision=auto`` -> bf16 on CUDA, fp32 elsewhere; explicit values stay."""
    if requested == "auto":
        return "bf16" if device_type == "cuda" else "fp32"
    return requested
