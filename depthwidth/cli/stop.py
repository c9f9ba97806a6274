"""``dw stop``: checkpoint and stop chosen runs of a sweep (launch/stop.py)."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.report.render import console, emit_json


def stop_cmd(
    name: str = typer.Argument(..., help="sweep name (runs/NAME/manifest)"),
    run_ids: Optional[List[str]] = typer.Argument(None, help="run ids to stop (dw status NAME lists them)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document"),
) -> None:
    """Checkpoint and stop running runs of a sweep: each finishes its step, checkpoints and ends preempted.

    Example: dw stop demo 3f2a9c1b0d4e 77b0e1c2a9f3

    launcher=local: SIGINT to the worker that trains the run (dw status shows worker and pid); the
    worker goes on to its next task.

    launcher=slurm: scancel --signal=INT on the run's job.  launcher=debug: SIGINT to the dw sweep
    process.  dw sweep NAME --retry-failed resumes a stopped run.
    """
    from depthwidth.launch.stop import stop

    res = stop(name, run_ids or [])
    if as_json:
        emit_json({"sweep": name, "runs": res})
        return
    c = console()
    for r in res:
        c.print(f"{r['run_id']}: {r['how']}", highlight=False, soft_wrap=True)
    if any(r["stopped"] for r in res):
        c.print(
            f"each checkpoints at its next step and ends preempted; dw sweep {name} --retry-failed resumes it",
            highlight=False,
            soft_wrap=True,
        )
