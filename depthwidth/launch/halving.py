"""Successive halving of a tuning group (sweep file ``tune: {..., halving: true}``).

A group's runs (the same configuration at each tuned value) are compared at their first
token budget (``train.budgets``; with WSD, its decay branch) and the worse half stops there
(status ``pruned``, its record kept); the others train on.  As ASHA prunes, but

- deterministic: the decision depends only on the members' held-out losses at that budget
  (ties broken by run id; a member that diverged before it reports +inf) and is taken once,
  when the last member reports, by that member, under ``runs/NAME/halving/GROUP.lock``;
- resumable: it is kept in ``runs/NAME/halving/GROUP.json``; a requeued, resubmitted or
  retried run reads it back and never decides again;
- without a waiting process: a run that reaches the budget before its group has decided
  checkpoints and *parks* (summary ``waiting``), which frees its GPU or worker, and the
  deciding member releases every parked one:

  (each launcher's ``hold`` and ``release``, launch/backend.py)
  slurm   the parked array task requeues itself held (``scontrol requeuehold``) while it
          holds the group's lock; the decider ``scontrol release``s it under the same lock,
          so a release never comes before the hold
  local   the parked task goes back to the workers (its claim file removed; a worker slot
          whose process has exited is started again)
  debug   the parked task is queued again; the in-process loop runs it after the others

  A released run resumes from its checkpoint and asks again: ``go`` (trains on) or
  ``prune`` (ends ``pruned``, what it did not train recorded as ``flops_saved``).

A member that failed before the budget leaves the group undecided (its parked members
``waiting``) until ``dw sweep NAME --retry-failed`` gets it to the budget.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.launch.backend import backend

EXIT_PARKED = 4  # a task whose run parked (local/debug; under SLURM the task exits as preempted)


def group_file(sweep: str, group: str, root=None) -> Path:
    return store.sweep_dir(sweep, root) / "halving" / f"{group}.json"


def decide(members: list[str], reports: dict) -> dict:
    """Rank the members by their loss at the first budget (+inf: diverged or non-finite; ties by
    run id) and prune the worse half (floor(n / 2): of 5, the 2 worst)."""
    ranked = sorted(members, key=lambda r: (_loss(reports[r]), r))
    n_prune = len(ranked) // 2
    return {"ranked": ranked, "keep": ranked[: len(ranked) - n_prune], "prune": ranked[len(ranked) - n_prune :]}


def _loss(report: dict) -> float:
    x = report.get("val_loss")
    return float(x) if x is not None and math.isfinite(float(x)) else math.inf


class Gate:
    """Successive halving's say on one run (train()'s ``gate``): ``gate(first_result)`` reports the
    run's first budget and answers go | park | prune; after a ``park``, ``park()`` parks the task."""

    def __init__(self, sweep: str, spec: dict, run_id: str, where: dict):
        # spec: {"group": id, "members": [run ids]} (the submission's item); where: {launcher,
        # job_id, tasks_file, index}: how a decider releases this run's task
        self.sweep, self.group, self.members = sweep, spec["group"], list(spec["members"])
        self.run_id = run_id
        self.where = {k: where[k] for k in ("launcher", "job_id", "tasks_file", "index") if k in where}
        self.path = group_file(sweep, self.group)

    def __call__(self, result: dict) -> str:
        with store.FileLock(self.path.with_suffix(".lock")):
            doc = self._report(result)
            dec = doc.get("decision")
        if dec is None:
            return "park"
        return "prune" if self.run_id in dec["prune"] else "go"  # not a member when decided: go on

    def diverged(self) -> None:
        """The run diverged before its first budget: it counts as the worst of its group."""
        with store.FileLock(self.path.with_suffix(".lock")):
            self._report({"val_loss": None, "diverged": True})

    def rerun(self) -> None:
        """Start this run's task again now (a run of several ranks whose group decided while it
        parked: its other ranks have left), as a release would."""
        backend(self.where.get("launcher")).requeue(self.where, who="halving")

    def park(self) -> bool:
        """Park this run's task until the decision (False: the group decided meanwhile; train on now)."""
        with store.FileLock(self.path.with_suffix(".lock")):
            doc = store.read_json(self.path) or {}
            if doc.get("decision") is not None:
                return False
            doc.setdefault("parked", {})[self.run_id] = {**self.where, "at": round(time.time(), 3)}
            write_json(self.path, doc)
            _hold(self.where)  # under the lock: the decider's release comes after it
        return True

    def _report(self, result: dict) -> dict:
        """Record this run's first-budget result; the last member's report decides and releases
        the parked members (under the caller's lock)."""
        doc = store.read_json(self.path) or {"group": self.group, "members": self.members, "reports": {}}
        rep = {k: result.get(k) for k in ("tokens", "step", "val_loss")}
        doc["reports"].setdefault(self.run_id, {**rep, **({"diverged": True} if result.get("diverged") else {})})
        members = doc["members"]
        if doc.get("decision") is None:
            _settled(self.sweep, members, doc["reports"])
        if doc.get("decision") is None and all(m in doc["reports"] for m in members):
            dec = decide(members, doc["reports"])
            doc["decision"] = {**dec, "by": self.run_id, "at": round(time.time(), 3)}
        if doc.get("decision") is not None:  # release the parked; one whose release fails stays listed
            doc["parked"] = {r: w for r, w in (doc.get("parked") or {}).items() if r != self.run_id and not _release(w)}
        write_json(self.path, doc)
        return doc


def _settled(sweep: str, members: list[str], reports: dict) -> None:
    """Members that will never report, read from their own summaries: a run done or pruned before
    (halving turned on later, a run finished before ``--extend-tuning``) reports its first budget; a
    run that diverged, or failed and will not be retried (``failures`` in its summary), +inf."""
    for m in members:
        if m in reports:
            continue
        s = store.read_json(store.sweep_dir(sweep) / m / "summary.json") or {}
        first = (s.get("budgets") or [None])[0]
        if s.get("status") in ("done", "pruned") and isinstance(first, dict):
            reports[m] = {k: first.get(k) for k in ("tokens", "step", "val_loss")} | {"read": "summary"}
        elif s.get("status") == "diverged" or (s.get("status") == "failed" and s.get("failures")):
            reports[m] = {"val_loss": None, "diverged": True, "read": "summary"}


def release_decided(sweep: str) -> int:
    """Release again every parked member of a decided group whose release failed (a follow-up job
    and every submission ask); the number released."""
    n = 0
    for gid, doc in groups(sweep).items():
        if doc.get("decision") and doc.get("parked"):
            path = group_file(sweep, gid)
            with store.FileLock(path.with_suffix(".lock")):
                doc = store.read_json(path) or {}
                left = {r: w for r, w in (doc.get("parked") or {}).items() if not _release(w)}
                n += len(doc.get("parked") or {}) - len(left)
                doc["parked"] = left
                write_json(path, doc)
    return n


# -- holding and releasing a parked task: its backend's (launch/backend.py) ---------------------


def _hold(where: dict) -> None:
    backend(where.get("launcher")).hold(where, who="halving")


def _release(where: dict) -> bool:
    """Let a parked task run again; False if SLURM refused (it stays listed, released later)."""
    return backend(where.get("launcher")).release(where, who="halving")


def gate_for(sweep: str, item: dict, where: dict) -> Gate | None:
    """The gate of a submission's item, if its tuning group halves."""
    spec = item.get("halving")
    return Gate(sweep, spec, item["run_id"], where) if spec else None


def groups(sweep: str, root=None) -> dict[str, dict]:
    """Every halving group's file of sweep ``sweep``: {group id: document}."""
    d = store.sweep_dir(sweep, root) / "halving"
    out = {}
    if d.is_dir():
        for p in sorted(d.glob("*.json")):
            doc = store.read_json(p)
            if doc:
                out[p.stem] = doc
    return out
