"""One training run: ``train(cfg)`` trains (or resumes) the run a composed config describes.

    from depthwidth.config.compose import compose
    from depthwidth.train import train
    summary = train(compose(["model.depth=4", "model.width=128", "train.steps=200", "run.dir=runs/try1"]))

Modules: plan.py (the torch-free gate every run passes, shared with ``dw
sweep``), trainer.py (set-up and the loop), schedule.py (when to log,
evaluate, checkpoint, probe), signals.py (preemption), branch.py (WSD decay
branches), meter.py (NaN watch, tokens/s, MFU), state.py (what a checkpoint
holds), summary.py (summary.json), optim.py (AdamW, schedules, token
budgets), checkpoint.py (checksummed files), dist.py (data parallelism),
probes.py (per-layer gradient norms).  torch is imported only when a run starts.
"""

from depthwidth.train.plan import check
from depthwidth.train.trainer import EXIT_PREEMPTED, Preempted, prepare, train

__all__ = ["EXIT_PREEMPTED", "Preempted", "check", "prepare", "train"]
