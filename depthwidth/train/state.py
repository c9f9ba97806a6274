"""The run's own progress, as a checkpoint stores it (docs/CONTRACTS.md).

Model, optimiser, sampler and RNG state are the trainer's; ``TrainState``
holds what the loop itself has accumulated: the step, the budget results
recorded so far, the last finite training loss and the wall time of earlier
attempts.  ``checkpoint_dict``/``restore`` map all of it to and from the
checkpoint's keys (unchanged since the first checkpoint format)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field


@dataclass
class TrainState:
    step: int = 0
    results: list = field(default_factory=list)  # [{tokens, step, val_loss}] per budget reached
    last_finite: float | None = None
    wall_before: float = 0.0  # seconds of earlier attempts

    def record(self, budget, loss: float) -> None:
        self.results.append({"tokens": budget.tokens, "step": budget.steps,
                             "val_loss": loss if math.isfinite(loss) else None})

    @property
    def steps_recorded(self) -> set:
        return {r["step"] for r in self.results}


def checkpoint_dict(run_id: str, st: TrainState, model, opt, sampler, wall: float) -> dict:
    import torch

    return {
        "run_id": run_id,
        "step": st.step,
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "sampler": json.dumps(sampler.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "results": json.dumps(st.results),
        "last_finite_loss": st.last_finite,
        "wall_time_s": wall,
    }


def restore(saved: dict, model, opt, sampler) -> TrainState:
    import torch

    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optim"])
    sampler.load_state_dict(json.loads(saved["sampler"]))
    torch.set_rng_state(saved["torch_rng"])
    return TrainState(int(saved["step"]), json.loads(saved["results"]), saved.get("last_finite_loss"),
                      float(saved.get("wall_time_s", 0.0)))
