"""What the scheduler says about a sweep's jobs (``dw status``'s scheduler side).

local/debug: the task state files under ``runs/NAME/jobs/`` and whether their worker processes
live.  SLURM: ONE ``sacct`` call for every job of the sweep (launch/slurm.py ``slurm_states``).
"""

from __future__ import annotations

import os
from pathlib import Path

from depthwidth.core.atomic import write_json
from depthwidth.core.store import jobs_dir, read_json


def pid_alive(pid) -> bool:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def set_state(d: Path, index: int, **kw) -> None:
    """Update local/debug task ``index``'s state file in submission folder ``d`` (the file task_states reads)."""
    p = d / f"task-{index}.json"
    write_json(p, {**(read_json(p) or {}), **kw})


def task_states(name: str, root=None, running: dict | None = None) -> dict[str, str | None]:
    """Local/debug launchers' task state files of sweep ``name`` under the run store ``root``
    -> job id -> normalised state (None: unknown).  ``running``: filled with job id -> {slot, pid}
    of each running task (the worker that trains it: ``dw status``, ``dw stop``)."""
    out: dict[str, str | None] = {}
    d = jobs_dir(name, root)
    if not d.is_dir():
        return out
    for sub in d.iterdir():
        if not sub.is_dir():
            continue
        workers = [read_json(p) or {} for p in sub.glob("worker-*.json")]
        alive = any(w.get("state") == "running" and pid_alive(w.get("pid")) for w in workers)
        for p in sub.glob("task-*.json"):
            t = read_json(p)
            if not t or "job_id" not in t:
                continue
            st = t.get("state")
            if st == "queued":
                st = "pending" if alive else None
            elif st == "running":
                st = "running" if pid_alive(t.get("pid")) else None
                if st and running is not None:
                    running[t["job_id"]] = {"slot": t.get("slot"), "pid": t.get("pid")}
            out[t["job_id"]] = st  # completed | failed | preempted | cancelled
    return out
