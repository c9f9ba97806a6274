"""What the scheduler says about a sweep's jobs (``dw status``'s scheduler side).

SLURM: ONE ``sacct`` call for every job of the sweep.  local/debug: the task
state files under ``runs/NAME/jobs/`` and whether their worker processes live.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Iterable

from depthwidth.core.atomic import write_json
from depthwidth.core.errors import WorkFailed
from depthwidth.core.store import jobs_dir, read_json

SLURM_STATES = {
    "PENDING": "pending",
    "RESV_DEL_HOLD": "pending",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "RESIZING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "REQUEUED": "preempted",
    "REQUEUE_HOLD": "preempted",
    "REQUEUE_FED": "preempted",
    "PREEMPTED": "preempted",
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "OUT_OF_MEMORY": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "failed",
    "SPECIAL_EXIT": "failed",
}


def expand_array(jobid: str) -> list[str]:
    """'12_[0-3,7%2]' -> ['12_0', '12_1', '12_2', '12_3', '12_7']; other ids unchanged."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", jobid)
    if not m:
        return [jobid]
    base, body = m.group(1), m.group(2).split("%")[0]
    out = []
    for part in body.split(","):
        if "-" in part:
            a, b = part.split("-")[:2]
            step = 1
            if ":" in b:
                b, step = b.split(":")
            out += [f"{base}_{i}" for i in range(int(a), int(b) + 1, int(step))]
        elif part:
            out.append(f"{base}_{part}")
    return out


class SchedulerUnknown(WorkFailed):
    """The scheduler's view cannot be had (no sacct here, sacct failing or not answering).
    Its runs are ``unknown``, never ``lost``: they may well still be running."""


def slurm_states(job_ids: Iterable[str]) -> dict[str, str]:
    """ONE ``sacct`` call for every job of the sweep -> job id -> raw SLURM state.
    A task requeued several times has one record per run; the newest wins.
    Raises ``SchedulerUnknown`` (with the reason) when sacct cannot answer."""
    arrays = sorted({j.split("_")[0] for j in job_ids if j})
    if not arrays:
        return {}
    cmd = ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(arrays)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SchedulerUnknown("no sacct on this machine (PATH)") from None
    except OSError as e:
        raise SchedulerUnknown(f"sacct could not run ({e})") from None
    except subprocess.TimeoutExpired:
        raise SchedulerUnknown("sacct did not answer within 60 s") from None
    if p.returncode != 0:
        raise SchedulerUnknown(f"sacct failed: {' '.join(p.stderr.split())[:300] or f'exit {p.returncode}'}")
    out = _parse(p.stdout)
    missing = sorted({j.split("_")[0] for j in job_ids if j and j not in out})
    if missing:  # accounting lags the controller: a job sbatch just accepted may not be in sacct yet
        out = {**_squeue(missing), **out}
    return out


def _parse(text: str) -> dict[str, str]:
    """'JOBID|STATE' lines (array ranges expanded) -> job id -> state; the last line of a job wins."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        state = parts[1].split()[0] if parts[1] else "UNKNOWN"
        for jid in expand_array(parts[0]):
            out[jid] = state
    return out


def _squeue(arrays: list[str]) -> dict[str, str]:
    """The controller's view of these jobs (queued or running ones only); {} if squeue cannot answer."""
    try:
        p = subprocess.run(
            ["squeue", "-h", "-o", "%i|%T", "-j", ",".join(arrays)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return _parse(p.stdout) if p.returncode == 0 else {}


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
