"""WSD decay branches: one run, several properly decayed (tokens, loss) points.

At step ``optim.Budget.branch_at`` of the main run — (1 − f)·S_b, or 0 when a
run of S_b steps alone would warm up differently — the model, optimiser, data
stream and RNG are copied, the copy decays to S_b steps and is evaluated, and
the main run continues from the copy's starting point, as if the branch had
never been taken.

A stop signal (SIGUSR2 / SIGTERM) is honoured inside a branch too: a branch
can be f·S_b steps long, longer than a scheduler's warning time.  The branch
is checkpointed under ``ckpt/branch_<S_b>/`` and the trainer is put back at
the fork, where the main run checkpoints and exits for requeue; the resumed
run reaches the fork again and the branch continues from its own checkpoint,
so the result is the one of an uninterrupted run.
"""

from __future__ import annotations

import copy
import shutil

from depthwidth.train import checkpoint, optim
from depthwidth.train.state import TrainState, extra_state, restore


def branch_dir(trainer, budget):
    return trainer.p.run_dir / "ckpt" / f"branch_{budget.steps:08d}"


def decay_branch(trainer, budget, stop) -> float | None:
    """Train the branch for ``budget`` from ``trainer``'s current step; return its held-out loss,
    or None when ``stop`` was requested (the branch is checkpointed, the trainer back at the fork)."""
    import torch

    model_state = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    opt_state = copy.deepcopy(trainer.opt.state_dict())
    sampler_state = copy.deepcopy(trainer.sampler.state_dict())
    rng = torch.get_rng_state()
    d, world = branch_dir(trainer, budget), trainer.world
    start = trainer.state.step
    path = checkpoint.latest(d, world, warn=lambda m: trainer.log(f"warning: {m}"))
    try:
        if path is not None:
            extra = checkpoint.load(path, trainer.model, trainer.opt)
            start = restore(extra, trainer.sampler).step
            trainer.log(f"resuming the decay branch to step {budget.steps} at step {start}")
        for s in range(start, budget.steps):
            trainer.train_step(optim.lr_at(s, budget.steps, trainer.cfg.optim, trainer.p.tokens_per_step), probe=False)
            if s + 1 < budget.steps and trainer.stop_agreed(stop):  # the last step: finish the branch
                extra = extra_state(trainer.p.run_id, TrainState(step=s + 1), trainer.sampler, 0.0)
                checkpoint.save(d, s + 1, world, trainer.model, trainer.opt, extra, keep=1)
                return None
        loss = trainer.evaluate()
    finally:
        trainer.model.load_state_dict(model_state)
        trainer.opt.load_state_dict(opt_state)
        trainer.sampler.load_state_dict(sampler_state)
        torch.set_rng_state(rng)
    if world.main:  # done: a later resume that reaches the fork again simply retrains it
        shutil.rmtree(d, ignore_errors=True)
    return loss
