"""WSD decay branches: one run, several properly decayed (tokens, loss) points.

At step (1 − f)·S_b of the main run (``optim.Budget.branch_at``) the model,
optimiser and data stream are copied, the copy decays to S_b steps and is
evaluated, and the main run continues in its stable phase from the copy's
starting point, as if the branch had never been taken.
"""

from __future__ import annotations

import copy

from depthwidth.train import optim


def decay_branch(trainer, budget) -> float:
    """Train the branch for ``budget`` from ``trainer``'s current step; return its held-out loss."""

    model_state = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    opt_state = copy.deepcopy(trainer.opt.state_dict())
    sampler_state = copy.deepcopy(trainer.sampler.state_dict())
    try:
        for s in range(trainer.state.step, budget.steps):
            trainer.train_step(optim.lr_at(s, budget.steps, trainer.cfg.optim), probe=False)
        return trainer.evaluate()
    finally:
        trainer.model.load_state_dict(model_state)
        trainer.opt.load_state_dict(opt_state)
        trainer.sampler.load_state_dict(sampler_state)
