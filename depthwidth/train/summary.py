"""summary.json: what a run is and how it ended (docs/CONTRACTS.md).

Written atomically at the start (status ``running``), and at every end:
``done``, ``diverged``, ``failed`` or ``preempted`` (a second Ctrl-C: ``abandoned``
writes preempted when that step's checkpoint is on disk, else failed).  Readers (``dw status``, the run table, ``dw report``) need nothing else
from the run directory."""

from __future__ import annotations

from pathlib import Path

from depthwidth.core.atomic import write_json


def summary_path(run_dir: Path) -> Path:
    return Path(run_dir) / "summary.json"


def write_summary(trainer, status: str, wall: float, reason: str | None = None, **extra) -> dict:
    """The summary of ``trainer``'s run now; rank 0 writes it."""
    p, st, cfg = trainer.p, trainer.state, trainer.cfg
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
        "device": str(trainer.device),
        "precision": p.precision,
        "provenance": trainer.provenance,
        "plan": trainer.layout.to_dict(),
        **extra,
    }
    if trainer.world.main:
        write_json(summary_path(p.run_dir), s)
    return s


def abandoned(trainer, wall: float | None, checkpoint_step: int | None) -> str:
    """A second Ctrl-C: the summary now (``preempted`` when this step's checkpoint is on disk,
    else ``failed``, naming the step a rerun resumes from) and the one line that says what was
    not saved.  ``wall`` None: the run has not started training (nothing to write)."""
    st = getattr(trainer, "state", None)
    if wall is None or st is None:
        return "dw: interrupted again: exiting before training started; nothing is lost"
    step = st.step
    if checkpoint_step == step:
        write_summary(trainer, "preempted", wall, reason=f"SIGINT at step {step}")
        return f"dw: interrupted again: exiting at once; the checkpoint at step {step} is saved, rerun to resume"
    since = "the start" if checkpoint_step is None else f"step {checkpoint_step}"
    write_summary(trainer, "failed", wall, reason=f"SIGINT twice at step {step}: exited without a checkpoint; "
                  f"a rerun resumes from {since}")
    return f"dw: interrupted again: exiting without a checkpoint; steps since {since.removeprefix('step ')} are lost"
