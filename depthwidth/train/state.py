"""The run's own progress, as a checkpoint stores it (docs/CONTRACTS.md).

Model and optimiser state are checkpoint.py's (sharded); ``TrainState``
holds what the loop itself has accumulated: the step, the budget results
recorded so far, the last finite training loss and the wall time of earlier
attempts.  ``extra_state``/``restore`` map it, with the sampler and RNG, to
and from the checkpoint's ``extra.pt``."""

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
        self.results.append(
            {"tokens": budget.tokens, "step": budget.steps, "val_loss": loss if math.isfinite(loss) else None}
        )

    @property
    def steps_recorded(self) -> set:
        return {r["step"] for r in self.results}


def extra_state(run_id: str, st: TrainState, sampler, wall: float) -> dict:
    """What a checkpoint holds beside the model and optimiser (checkpoint.py's extra.pt)."""
    import torch

    return {
        "run_id": run_id,
        "step": st.step,
        "sampler": json.dumps(sampler.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "results": json.dumps(st.results),
        "last_finite_loss": st.last_finite,
        "wall_time_s": wall,
    }


def restore(extra: dict, sampler) -> TrainState:
    import torch

    sampler.load_state_dict(json.loads(extra["sampler"]))
    torch.set_rng_state(extra["torch_rng"])
    return TrainState(
        int(extra["step"]),
        json.loads(extra["results"]),
        extra.get("last_finite_loss"),
        float(extra.get("wall_time_s", 0.0)),
    )
