"""Automatic retries of failed runs, with a cap and a reason (``launcher.max_retries``,
``launcher.retry_delay_s``).

Who retries: the cluster, never a process on the login node.

- A run whose training raised (a CUDA or NCCL error, a full disk, a flaky file system) is
  retried by its own task: under SLURM the task requeues itself (``scontrol requeue``, then
  a begin time: launch/slurm.py ``requeue_later`` ``retry_delay_s · 2^(k-1)`` seconds ahead), so the retry
  may land on another node and frees the allocation meanwhile; a local worker waits that long
  and trains it again; the debug launcher at once.
- A task that died without ending its run (NODE_FAIL, BOOT_FAIL, a preemption) is requeued by
  SLURM itself (dw submits with ``--requeue``); the restarted task finds the run's summary
  still ``running``, asks sacct how the previous attempt ended, records it as a failure and
  resumes the run from its checkpoint, unless the cap is reached.
- Jobs SLURM does not requeue (OUT_OF_MEMORY, TIMEOUT without the USR2 warning, a cancelling
  preemption) are resubmitted, under the same cap, by the follow-up job of ``--then``
  (followup.py; ``--then none`` for that alone); else ``dw sweep NAME --retry-failed``.

Every failed attempt is a line of ``RUN_DIR/failures.jsonl`` (written by the run's own job):
``{attempt, time, job, host, kind: exception|died, error}``.  A run is not retried again when
its last two failures are the same exception line ("deterministic failure: ..."), or when it
has failed ``max_retries + 1`` times ("gave up after N attempts: ..."); diverged runs are never
retried (the same run diverges again: ``--retry-diverged``).  ``dw status`` shows the reason.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from depthwidth.core.atomic import append_jsonl, read_jsonl

FAILURES = "failures.jsonl"
DIED = "ended without a summary"  # the error line of an attempt that died (no exception to read)


@dataclass(frozen=True)
class Policy:
    max_retries: int = 2  # retries after the first failure (so at most max_retries + 1 attempts)
    delay_s: float = 60.0  # before the first retry; doubled for each further one


@dataclass(frozen=True)
class Verdict:
    retry: bool
    delay_s: float
    reason: str  # what dw status says: "retrying (2 of 3) in 60 s: ..." or why not


def policy(doc: dict) -> Policy:
    """The policy a submission recorded in its tasks.json (``retry``); none recorded: no retries."""
    r = doc.get("retry") or {}
    return Policy(int(r.get("max_retries", 0)), float(r.get("delay_s", 0.0)))


def failures(run_dir) -> list[dict]:
    return read_jsonl(Path(run_dir) / FAILURES)


def record(run_dir, kind: str, error: str, job: str) -> list[dict]:
    """Append one failed attempt to the run's record; the whole record."""
    past = failures(run_dir)
    row = {
        "attempt": len(past) + 1,
        "time": round(time.time(), 3),
        "job": job,
        "host": os.uname().nodename,
        "kind": kind,
        "error": " ".join(str(error).split())[:500],
    }
    append_jsonl(Path(run_dir) / FAILURES, [row])
    return [*past, row]


ATTEMPTS = ".attempts.jsonl"  # rank 0's word on each attempt (may it train?), for the other ranks
WAIT_ATTEMPT_S = 120.0


def attempt_key(job: str) -> str:
    """This attempt of the run's job (SLURM restarts of a task share its id)."""
    return f"{job}#{os.environ.get('SLURM_RESTART_COUNT', '0')}"


def note_attempt(run_dir, key: str, train: bool) -> None:
    """Rank 0: whether this attempt trains (every rank must do as it does)."""
    append_jsonl(Path(run_dir) / ATTEMPTS, [{"key": key, "train": bool(train)}])


def wait_attempt(run_dir, key: str) -> bool:
    """The other ranks: rank 0's word on this attempt (it writes it before it trains); True if it
    never comes (rank 0 gone: the process group's set-up then fails on every rank alike)."""
    t_end = time.monotonic() + WAIT_ATTEMPT_S
    while time.monotonic() < t_end:
        for row in reversed(read_jsonl(Path(run_dir) / ATTEMPTS)):
            if row.get("key") == key:
                return bool(row.get("train"))
        time.sleep(0.2)
    return True


def verdict(past: list[dict], p: Policy) -> Verdict:
    """Whether the run that just failed (the last of ``past``) is retried, after how long, and why."""
    last = past[-1]
    n = len(past)
    if (
        n >= 2
        and last["kind"] == "exception"
        and past[-2]["kind"] == "exception"
        and past[-2]["error"] == last["error"]
    ):
        return Verdict(False, 0.0, f"deterministic failure: {last['error']} (the same error twice)")
    if n > p.max_retries:
        how = f"after {n} attempt{'s' * (n != 1)}" if p.max_retries else "(launcher.max_retries=0)"
        return Verdict(False, 0.0, f"gave up {how}: {last['error']}")
    delay = p.delay_s * 2 ** (n - 1)
    return Verdict(True, delay, f"retrying ({n + 1} of {p.max_retries + 1}) in {delay:g} s: {last['error']}")


def mark_failed(run_dir, reason: str) -> None:
    """The run's summary.json says ``failed`` with ``reason`` (written by its own job, after train()
    wrote it, or in place of the ``running`` one an attempt that died left behind)."""
    from depthwidth.core.atomic import write_json

    p = Path(run_dir) / "summary.json"
    try:
        s = json.loads(p.read_text())
    except (OSError, ValueError):
        return
    write_json(p, {**s, "status": "failed", "reason": reason, "failures": len(failures(run_dir))})
