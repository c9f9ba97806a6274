"""summary.json: what a run is and how it ended (docs/CONTRACTS.md).

Written atomically at the start (status ``running``), and at every end:
``done``, ``diverged``, ``failed`` (a failed set-up too), ``waiting`` / ``pruned``
(successive halving: launch/halving.py) or ``preempted`` (a
second Ctrl-C: ``RunSummary.abandoned`` writes preempted when that step's
checkpoint is on disk, else failed).  Readers (``dw status``, the run table,
``dw report``) need nothing else from the run directory.

The trainer owns one ``RunSummary`` and writes it with its progress (a
``TrainState``); every way a run ends is an ``Ending``, which the trainer
records in one place (``Trainer._end``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from depthwidth.core.atomic import write_json
from depthwidth.train.optim import planned_steps

if TYPE_CHECKING:
    from depthwidth.train.plan import PreparedRun
    from depthwidth.train.state import TrainState


def summary_path(run_dir: Path) -> Path:
    return Path(run_dir) / "summary.json"


@dataclass
class Ending:
    """How a run ended: the summary's ``status`` (done | diverged | preempted | failed), its
    ``reason`` and ``extra`` fields, and the ``error`` train() raises once the summary is written
    (``Preempted``; a failure's own exception)."""

    status: str
    reason: str | None = None
    extra: dict = field(default_factory=dict)
    error: BaseException | None = None


@dataclass
class RunSummary:
    """The summary of ``run``.  Set-up fills in what it learns (``device``, ``provenance``,
    ``memory_plan``); a set-up that failed before leaves them None in its ``failed`` summary."""

    run: PreparedRun
    writes: bool  # rank 0 writes the file; every rank computes the same summary
    device: str | None = None
    provenance: dict | None = None
    memory_plan: dict | None = None

    def write(self, status: str, st: TrainState, wall: float, reason: str | None = None, **extra) -> dict:
        """The summary now, with the run's progress ``st``."""
        p, cfg = self.run, self.run.cfg
        spec, acc = p.spec, p.accounting
        final = next((r["val_loss"] for r in reversed(st.results) if r["step"] == p.steps), None)
        s = {
            "run_id": p.run_id,
            "sweep": cfg.run.sweep,
            "status": status,
            "reason": reason,
            "final_val_loss": final,
            "tokens": st.step * p.tokens_per_step,
            "tokens_total": p.steps * p.tokens_per_step,
            "steps": st.step,
            "steps_total": p.steps,
            "params": acc["params"],
            "params_non_embedding": acc["params_non_embedding"],
            "params_active": acc["params_active"],
            "flops_per_token": acc["flops_per_token"],
            "flops_planned": planned_steps(p.steps, p.budgets) * p.tokens_per_step * float(acc["flops_per_token"]),
            "kv_bytes_per_token": acc["kv_bytes_per_token"],
            "depth": spec.depth,
            "width": int(cfg.model.width),
            "widths": list(spec.widths),
            "shape": str(cfg.model.shape) if not cfg.model.widths else "custom",
            "seed": int(cfg.run.seed),
            "budgets": st.results,
            "bayes_loss": p.source.bayes_loss,
            "last_loss": st.last_finite,
            "wall_time_s": round(wall, 3),
            "device": self.device,
            "precision": p.precision,
            "provenance": self.provenance,
            "plan": self.memory_plan,
            "resume_notes": list(st.resumed_differently),
            **extra,
        }
        if self.writes:
            write_json(summary_path(p.run_dir), s)
        return s

    def abandoned(self, st: TrainState, wall: float | None, checkpoint_step: int | None) -> str:
        """A second Ctrl-C: the summary now (``preempted`` when this step's checkpoint is on disk,
        else ``failed``, naming the step a rerun resumes from) and the one line that says what was
        not saved.  ``wall`` None: the run has not started training (nothing to write)."""
        if wall is None:
            return "dw: interrupted again: exiting before training started; nothing is lost"
        step = st.step
        if checkpoint_step == step:
            self.write("preempted", st, wall, reason=f"SIGINT at step {step}")
            return f"dw: interrupted again: exiting at once; the checkpoint at step {step} is saved, rerun to resume"
        since = "the start" if checkpoint_step is None else f"step {checkpoint_step}"
        self.write(
            "failed",
            st,
            wall,
            reason=f"SIGINT twice at step {step}: exited without a checkpoint; a rerun resumes from {since}",
        )
        lost = since.removeprefix("step ")
        return f"dw: interrupted again: exiting without a checkpoint; steps since {lost} are lost"
