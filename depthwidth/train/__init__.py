"""One training run: ``train(cfg)`` trains (or resumes) the run a composed config describes.

    from depthwidth.config.compose import compose
    from depthwidth.train import train
    summary = train(compose(["model.depth=4", "model.width=128", "train.steps=200", "run.dir=runs/try1"]))

Modules: plan.py (the gate every run passes: ``check``, torch-free and shared
with ``dw sweep``, and ``prepare``, what ``dw train`` resolves before it writes),
trainer.py (the trainer: its state, set-up, the loop, WSD decay branches, how a
run ends), schedule.py (when to log, evaluate, checkpoint, probe), signals.py
(preemption), meter.py (NaN watch, tokens/s, MFU), state.py (what a checkpoint
holds), summary.py (summary.json and how a run ended), memory.py (the memory
plan), parallel.py (DDP/FSDP, activation checkpointing), optim.py (AdamW,
schedules, token budgets), checkpoint.py (checksummed files), dist.py (data
parallelism), probes.py (per-layer gradient norms), analysis.py (``dw
analyze``).  torch is imported only when a run starts.
"""

from depthwidth.train.plan import check, prepare
from depthwidth.train.trainer import EXIT_PREEMPTED, Preempted, train

__all__ = ["EXIT_PREEMPTED", "Preempted", "check", "prepare", "train"]
