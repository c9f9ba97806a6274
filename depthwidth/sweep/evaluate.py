"""``dw eval SWEEP --tasks ... launcher=local|slurm``: a sweep's evaluations as one submission.

Every finished run that lacks one of the tasks (at that checkpoint and limit: evals/run.py
``pending``) becomes one array task (``pack=N`` puts N runs in one), submitted through the same
launcher code as ``dw sweep`` (launch/submit.py, ``kind="eval"``); each task runs
``evaluate_run`` on its runs (launch/task.py ``run_evals``), which writes their eval.json.

Idempotent as ``dw sweep`` is: a run whose last eval submission is still pending or running (the
manifest's ``eval_submit`` events joined with the scheduler's view) is not submitted again, and a
run whose eval.json holds the tasks is not pending at all; so a second ``dw eval SWEEP ...
launcher=slurm`` submits only what neither covers.  A scheduler that cannot answer counts as
"still in flight" (never a duplicate).  The submission holds the sweep's lock (store.SweepLock),
as ``dw sweep`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from depthwidth.core import store
from depthwidth.core.errors import bad
from depthwidth.launch.config import launcher_config, split_overrides
from depthwidth.launch.backend import backend
from depthwidth.launch.slurm import SchedulerUnknown
from depthwidth.launch.submit import submit


def in_flight(name: str, root=None) -> set[str]:
    """Run ids whose latest ``eval_submit`` job is queued or running (or whose scheduler cannot say)."""
    latest: dict[str, tuple[str, str]] = {}
    for e in store.read_manifest(name, root=root):
        if e.get("event") == "eval_submit" and e.get("run_id"):
            latest[e["run_id"]] = (e["job_id"], e.get("launcher", ""))
    if not latest:
        return set()
    by: dict[str, dict[str, str]] = {}  # launcher -> {run id: job id}
    for r, (j, launcher) in latest.items():
        by.setdefault(launcher, {})[r] = j
    busy: set[str] = set()
    for launcher, jobs in by.items():
        try:
            flying = backend(launcher).in_flight(name, list(jobs.values()), root)
        except SchedulerUnknown:  # the scheduler cannot say: counted in flight, never submitted twice
            busy |= set(jobs)
            continue
        busy |= {r for r, j in jobs.items() if j in flying}
    return busy


def submit_evals(
    name: str,
    tasks: Sequence[str],
    overrides: Sequence[str],
    *,
    checkpoint: str | int = "final",
    limit: int | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    include_path=None,
    bootstrap_iters: int = 100000,
    root=None,
) -> dict:
    """Submit the evaluations sweep ``name`` still needs; {submitted: [{run_id, job_id}], in_flight,
    unfinished, launcher}.  ``overrides``: ``launcher=slurm``, ``launcher.KEY=V``, ``pack=N`` only."""
    from depthwidth.evals.run import pending

    runs, launch = split_overrides(overrides)
    if runs:
        raise bad("override", runs[0], "launcher=NAME, launcher.KEY=VALUE or pack=N (dw eval trains nothing)")
    lcfg = launcher_config(launch, defaults=_file_defaults(name))
    if include_path is not None:
        include_path = str(Path(include_path).absolute())  # the task runs elsewhere: an absolute path
    todo, unfinished = pending(name, tasks, root, checkpoint, limit)
    with store.SweepLock(name):
        busy = in_flight(name, root)
        items = [{"run_id": d.name, "overrides": [], "run_dir": str(d.absolute())} for d in todo if d.name not in busy]
        args = {
            "tasks": list(tasks),
            "checkpoint": checkpoint,
            "limit": limit,
            "batch_size": batch_size,
            "device": device,
            "include_path": include_path,
            "bootstrap_iters": bootstrap_iters,
        }
        jobs = submit(name, items, lcfg, kind="eval", args=args)
    return {
        "sweep": name,
        "launcher": lcfg["name"],
        "submitted": jobs,
        "in_flight": sorted(d.name for d in todo if d.name in busy),
        "unfinished": unfinished,
        "tasks": list(tasks),
    }


def _file_defaults(name: str) -> dict | None:
    """The sweep file's ``launcher:`` defaults (GPUs per node ...), when there is a sweep file."""
    from depthwidth.core.errors import BadInput
    from depthwidth.sweep.file import load_file

    try:
        return load_file(name).get("launcher")
    except BadInput:
        return None
