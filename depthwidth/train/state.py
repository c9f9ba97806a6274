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
    resumed_differently: list = field(default_factory=list)  # why a resume may not reproduce the run (resume_notes)

    def record(self, budget, loss: float) -> None:
        self.results.append(
            {"tokens": budget.tokens, "step": budget.steps, "val_loss": loss if math.isfinite(loss) else None}
        )

    @property
    def steps_recorded(self) -> set:
        return {r["step"] for r in self.results}


def extra_state(run_id: str, st: TrainState, sampler, wall: float, setting: dict | None = None) -> dict:
    """What a checkpoint holds beside the model and optimiser (checkpoint.py's extra.pt).
    ``setting``: what a resume must match to reproduce the run exactly (``resume_notes``)."""
    import torch

    return {
        "run_id": run_id,
        "step": st.step,
        "sampler": json.dumps(sampler.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "results": json.dumps(st.results),
        "last_finite_loss": st.last_finite,
        "wall_time_s": wall,
        "setting": json.dumps(setting or {}),
        "resumed_differently": json.dumps(st.resumed_differently),
    }


def resume_notes(saved: dict, now: dict, step: str) -> list[str]:
    """Why resuming at ``step`` under the setting ``now`` may not reproduce what the checkpoint's writer
    (``saved``) would have trained: each setting that differs (world size, layout, device, threads,
    torch version), in one string; [] when they agree (or the checkpoint predates the record)."""
    diff = [f"{k} {saved[k]} -> {now.get(k)}" for k in sorted(saved) if saved[k] != now.get(k)]
    return (
        [f"resumed at step {step} with {', '.join(diff)}: the result may differ from an uninterrupted run"]
        if diff
        else []
    )


def restore(extra: dict, sampler) -> TrainState:
    import torch

    sampler.load_state_dict(json.loads(extra["sampler"]))
    torch.set_rng_state(extra["torch_rng"])
    return TrainState(
        int(extra["step"]),
        json.loads(extra["results"]),
        extra.get("last_finite_loss"),
        float(extra.get("wall_time_s", 0.0)),
        json.loads(extra.get("resumed_differently", "[]")),
    )
