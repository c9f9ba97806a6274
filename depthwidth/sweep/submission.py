"""Launch a sweep from Python: ``plan(...)`` (the dry run) and ``submit(...)``.

    from depthwidth.sweep import plan, submit
    p = plan("depth_delusion", launcher="slurm")             # 30 runs, validated, nothing written
    s = submit("demo", ["train.steps=50"], launcher="local")  # returns once the jobs are queued
    s.jobs, s.submitted, s.skipped

``dw sweep`` is this module behind argument parsing and rendering.  A run is
submitted only when the manifest does not already show it done, running or
pending (``retry_failed``: also failed, cancelled or lost), under an
exclusive lock on ``runs/NAME/.lock`` (``core.store.SweepLock``), so two submissions at once never
submit one run twice.  A diverged run is never resubmitted as it was (the same
config, seed and data diverge again): ``retry_diverged=[overrides]`` that
change it (a lower ``optim.lr``) start it afresh under its new run id, linked
to the old one in the manifest (``retry_of``) and in ``dw status``.  Every run is
validated (``train.plan.check``, and the
data opened once per distinct source) before anything is written.  ``dw sweep --dry-run`` checks
exactly what the submission checks (``plan(..., data="refuse")`` and ``preflight``), except that
sbatch be on PATH: a cluster's sweep may be planned anywhere.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from depthwidth.config.overrides import fmt_value
from depthwidth.core import store
from depthwidth.core.errors import BadInput, bad
from depthwidth.launch.config import launcher_config, split_overrides, target_device
from depthwidth.launch import followup
from depthwidth.launch.backend import backend
from depthwidth.launch.halving import release_decided
from depthwidth.launch.status import RETRYABLE, status
from depthwidth.launch.submit import submit as launch_submit
from depthwidth.sweep.expand import (
    DEFAULT_MFU,
    DEFAULT_PEAK,
    Sweep,
    check,
    check_data,
    data_use,
    expand,
    select,
)
from depthwidth.sweep.plan_costs import DEFAULT_CPU_PEAK

NO_DATA_HINT = "to plan without the data: dw sweep NAME --dry-run --no-data-check"
DATA_MODES = ("auto", "refuse", "warn", "skip")


@dataclass
class SweepPlan:
    sweep: Sweep
    runs: list  # the selected (``only``) runs, all valid
    launcher: dict
    device: str
    warnings: list = field(default_factory=list)  # data problems a dry run with data="warn" let through
    data: list = field(default_factory=list)  # the data sources opened: tokens per split, disk size (data_use)


@dataclass
class Submission:
    sweep: str
    launcher: str
    submitted: list = field(default_factory=list)  # [{run_id, job_id}]
    jobs: list = field(default_factory=list)  # job ids, sorted
    skipped: dict = field(default_factory=dict)  # state -> count of runs not resubmitted
    seconds: float = 0.0
    notes: list = field(default_factory=list)  # why runs one asked to retry were not resubmitted
    waves: list = field(default_factory=list)  # SLURM submissions that go in as waves (launch/slurm.py waves_of)
    then: dict | None = None  # the follow-up armed or extended (launch/followup.py): {actions, job_id, launcher}

    def to_dict(self) -> dict:
        return {
            "sweep": self.sweep,
            "launcher": self.launcher,
            "submitted": self.submitted,
            "jobs": self.jobs,
            "skipped": self.skipped,
            "notes": self.notes,
            "waves": self.waves,
            "then": self.then,
            "seconds": self.seconds,
        }


def _launcher_overrides(launcher) -> list[str]:
    """``launcher=`` as a name ("local"), a list of overrides, or a mapping of launcher keys."""
    if launcher is None:
        return []
    if isinstance(launcher, str):
        return [f"launcher={launcher}"]
    if isinstance(launcher, dict):
        d = dict(launcher)
        out = [f"launcher={d.pop('name')}"] if "name" in d else []
        return out + [f"{'pack' if k == 'pack' else 'launcher.' + k}={fmt_value(v)}" for k, v in d.items()]
    return list(launcher)


def plan(
    name: str,
    overrides: Sequence[str] = (),
    *,
    launcher=None,
    only: str | None = None,
    mfu: float = DEFAULT_MFU,
    peak: float = DEFAULT_PEAK,
    cpu_peak: float = DEFAULT_CPU_PEAK,
    dry_run: bool = True,
    data: str = "auto",
    extend_tuning: bool = False,
) -> SweepPlan:
    """Expand and validate sweep ``name`` with ``overrides`` (BadInput naming every bad run).
    ``dry_run``: no scheduler (sbatch) is needed.  ``data``: refuse runs whose data cannot be
    opened (``refuse``, what the submission does), list them in ``SweepPlan.warnings`` (``warn``),
    or leave the data alone (``skip``); ``auto``: refuse unless ``dry_run``, else skip (``dw
    sweep --dry-run`` refuses; ``dw simulate`` plans without data)."""
    if not 0 < mfu <= 1:
        raise bad("--mfu", mfu, "a fraction in (0, 1]")
    if not peak > 0:
        raise bad("--peak", peak, "FLOP/s > 0")
    if not cpu_peak > 0:
        raise bad("--cpu-peak", cpu_peak, "FLOP/s > 0")
    if data not in DATA_MODES:
        raise bad("data", data, "|".join(DATA_MODES))
    mode = ("skip" if dry_run else "refuse") if data == "auto" else data
    run_ovr, launch_ovr = split_overrides([*_launcher_overrides(launcher), *(overrides or [])])
    # launcher=local's runs train here: its GPUs are checked in a dry run too
    lcfg = launcher_config(launch_ovr, need_scheduler=not dry_run, check_gpus=True)
    sw = expand(
        name,
        run_ovr,
        launcher_overrides=launch_ovr,
        need_scheduler=not dry_run,
        check_gpus=True,
        mfu=mfu,
        peak=peak,
        cpu_peak=cpu_peak,
        costs=dry_run,  # the dry run's figures: a submission records none of them
    )
    warnings = []
    if extend_tuning:  # one more value for each tuning group whose best is at an edge (sweep/tune.py)
        from depthwidth.sweep.tune import extensions

        more, notes = extensions(sw, mfu=mfu, peak=peak, cpu_peak=cpu_peak)
        have = {r.run_id for r in sw.runs}
        for r in more:
            if r.run_id not in have:
                r.index = len(sw.runs)
                sw.runs.append(r)
                have.add(r.run_id)
        warnings += notes
    runs = select(sw.runs, only)
    opened: dict = {}
    failed = check_data(sw, runs, mark=mode == "refuse", opened=opened) if mode != "skip" else {}
    data, said = data_use(opened)
    warnings += said
    try:
        check(sw, runs)
    except BadInput as e:
        if dry_run and failed:  # the submission's own line, and how to plan before the data exist
            raise BadInput(f"{e}; {NO_DATA_HINT.replace('NAME', name)}") from None
        raise
    for err, rs in failed.items():
        warnings.append(
            f"{len(rs)} of {len(runs)} runs would be refused by the submission (planned anyway: --no-data-check): {err}"
        )
    said_of: dict = {}
    for r in runs:  # what dw train would warn of each run, said before it trains
        if w := r.figures.get("model_warning"):
            said_of.setdefault(w, []).append(r.index)
    for w, idx in said_of.items():
        warnings.append(
            f"{len(idx)} of {len(runs)} runs (run {', '.join(map(str, idx[:6]))}{', …' if len(idx) > 6 else ''}): {w}"
        )
    if (other := store.checkout_store(sw.store)) is not None:  # a second store of the same sweep
        said = (
            f"sweep {name} has its store at {other}; submitting from here would start a second one in "
            f"{store.runs_root().absolute()} and train every run again: run dw from {other.parent.parent}, or "
            f"set DW_RUNS={other.parent} (or DW_RUNS={store.runs_root().absolute()} to start one here on purpose)"
        )
        if not dry_run:
            raise BadInput(said)
        warnings.append(said)
    return SweepPlan(sw, runs, lcfg, target_device(lcfg), warnings, data)


def submit(
    name: str,
    overrides: Sequence[str] = (),
    *,
    launcher=None,
    only: str | None = None,
    retry_failed: bool = False,
    retry_diverged: Sequence[str] = (),
    show: Callable | None = None,
) -> Submission:
    """Validate every run of sweep ``name``, then submit those not done or running; returns at once
    (``launcher=debug`` trains them here first).  Bad input: BadInput, nothing written."""
    t0 = time.perf_counter()
    p = plan(name, overrides, launcher=launcher, only=only, dry_run=False)
    again = plan_retry(name, overrides, retry_diverged, launcher=launcher, only=only)
    return submit_planned(p, retry_failed=retry_failed, retry=again, show=show, t0=t0)


@dataclass
class Retry:
    """``--retry-diverged OVERRIDES``: the sweep planned once more with them (diverged runs only use it)."""

    overrides: list
    planned: SweepPlan


def plan_retry(
    name: str,
    overrides: Sequence[str],
    retry_diverged: Sequence[str],
    *,
    launcher=None,
    only: str | None = None,
    dry_run: bool = False,
    data: str = "auto",
) -> Retry | None:
    if not retry_diverged:
        return None
    ovr = list(retry_diverged)
    return Retry(ovr, plan(name, [*(overrides or []), *ovr], launcher=launcher, only=only, dry_run=dry_run, data=data))


def submit_planned(
    p: SweepPlan,
    *,
    retry_failed: bool = False,
    retry: Retry | None = None,
    show: Callable | None = None,
    t0: float | None = None,
    then: tuple[list, dict] | None = None,
) -> Submission:
    """The second half of ``submit``: ``p`` from ``plan(..., dry_run=False)``.  ``then``: (actions,
    their arguments) of ``--then``: the follow-up armed now (launch/followup.py); without it a
    follow-up the sweep already has waits for this submission too."""
    t0 = time.perf_counter() if t0 is None else t0
    name = p.sweep.store  # a file dw suggest wrote joins the store of the sweep it extends
    with store.SweepLock(name):
        members: dict = {}  # a halving group's members: every run of the sweep in it, submitted now or not
        for r in p.sweep.runs:
            if r.halving and r.group and not r.error:
                members.setdefault(r.group, []).append(r.run_id)
        prev = followup.record(name) if store.manifest_path(name).exists() else None
        if backend(p.launcher["name"]).requeues:
            release_decided(name)  # a parked run whose release SLURM refused before: released now
        rec = followup.arm(name, *then, p.launcher) if then else None  # SLURM: its job held, before the arrays
        try:
            sub = _submit(name, p.runs, p.launcher, store.runs_root().absolute(), retry_failed, show, retry, members)
        except BaseException:
            if rec and rec.get("job_id"):
                followup.cancel(rec)
            raise
        if rec is None and prev is not None and sub.submitted and not followup.extend(prev, sub.jobs):
            rec = followup.arm(name, prev["actions"], prev.get("args") or {}, p.launcher)  # it has run: again
        if rec is not None:
            followup.attach(rec, sub.jobs)
            sub.then = {k: rec.get(k) for k in ("actions", "job_id", "launcher")}
        elif prev is not None and sub.submitted:
            sub.then = {k: prev.get(k) for k in ("actions", "job_id", "launcher")} | {"extended": True}
    if rec is not None and backend(p.launcher["name"]).runs_followup(bool(sub.submitted)):
        followup.run(name, log=lambda m: None)  # here, now: no job or worker will
    sub.seconds = round(time.perf_counter() - t0, 3)
    return sub


def _fresh(diverged: list, retry: Retry, prior: dict, skipped: dict) -> list:
    """(new run, old run id) for each diverged run ``retry`` changes; BadInput if it changes one not."""
    by_index = {r.index: r for r in retry.planned.runs}
    out = []
    for r in diverged:
        new = by_index[r.index]
        if new.run_id == r.run_id:
            raise bad(
                "--retry-diverged",
                " ".join(retry.overrides),
                f"overrides that change the run (e.g. a lower optim.lr): run {r.run_id} would be "
                "trained again exactly as it diverged",
            )
        if (prior.get(new.run_id) or {}).get("state") is None:
            out.append((new, r.run_id))
        else:  # retried already: the new run is in the manifest with its own state
            skipped["diverged"] = skipped.get("diverged", 0) + 1
    return out


@dataclass
class Preflight:
    """What a submission now would do with the planned runs (read-only: the manifest as it is)."""

    todo: list  # (run, old run id or None)
    skipped: dict  # state -> count
    prior: dict
    why: str | None  # why the scheduler's state is unknown, if it is

    def to_dict(self) -> dict:
        return {"would_submit": len(self.todo), "skipped": dict(sorted(self.skipped.items()))}


def preflight(p: SweepPlan, *, retry_failed: bool = False, retry: Retry | None = None) -> Preflight:
    """The submission's checks against the run store, and which runs it would submit or skip;
    BadInput as the submission raises it (a store of planted runs, a --retry-diverged that
    changes nothing).  ``dw sweep --dry-run`` and ``submit_planned`` both call it."""
    return _preflight(p.sweep.store, p.runs, retry_failed, retry)


def wave_plans(pre: Preflight) -> list[dict]:
    """The dry run's word on the queue limit (launch/slurm.py ``wave_plan``): one plan per SLURM
    submission the runs ``pre`` would submit make (one per distinct launcher settings)."""
    groups: dict = {}
    for r, _ in pre.todo:
        groups.setdefault(json.dumps(r.launcher, sort_keys=True, default=str), [r.launcher, 0])[1] += 1
    plans = [backend(cfg.get("name")).limits(cfg, -(-n // int(cfg["pack"]))) for cfg, n in groups.values()]
    return [w for w in plans if w is not None]  # debug and local have no queue


def _preflight(name, runs, retry_failed: bool, retry: Retry | None) -> Preflight:
    prior, why = {}, None
    if events := store.read_manifest(name):  # a manifest with no whole line (its first append failed): no runs yet
        # a manifest naming a run folder outside the store (edited, corrupt): refused before anything is written
        store.refuse_outside(store.sweep_dir(name), store.manifest_runs(events).values())
        st = status(name)
        if any(r.get("launcher") == "simulate" for r in st["runs"]):
            raise bad(
                "sweep",
                name,
                f"a run store of trained runs: {store.sweep_dir(name)} holds runs dw simulate "
                "planted, which would count as done (move it away or simulate under another --name)",
            )
        prior, why = {r["run_id"]: r for r in st["runs"]}, st.get("scheduler_unknown")
    todo, skipped, diverged = [], {}, []
    for r in runs:
        p = prior.get(r.run_id)
        state = p["state"] if p else None
        if state == "diverged" and retry is not None:
            diverged.append(r)
            continue
        again = retry_failed and (state in RETRYABLE or (state == "preempted" and not _requeued(p)))
        if state is None or again:
            todo.append((r, None))
        else:
            skipped[state] = skipped.get(state, 0) + 1
    if diverged:
        todo += _fresh(diverged, retry, prior, skipped)
    return Preflight(todo, skipped, prior, why)


def _requeued(row: dict) -> bool:
    """A preempted SLURM run whose job SLURM still holds (requeued, pending): it resumes on its own.  One
    whose job ended (stopped: dw stop, exit 3) and every local or debug one wait for --retry-failed."""
    b = backend(row.get("launcher"))
    return b.requeues and b.normal(row.get("scheduler_state")) not in (
        "completed",
        "failed",
    )


def _submit(
    name, runs, lcfg, root: Path, retry_failed: bool, show, retry: Retry | None = None, members: dict | None = None
) -> Submission:
    pf = _preflight(name, runs, retry_failed, retry)
    todo, skipped, why = pf.todo, pf.skipped, pf.why
    groups: dict = {}  # runs whose launcher settings differ go in separate submissions (arrays)
    for r, old in todo:
        key = json.dumps(r.launcher, sort_keys=True, default=str)
        groups.setdefault(key, (r.launcher, []))[1].append(
            {
                "run_id": r.run_id,
                "index": r.index,
                "label": r.label,
                "ref": r.ref,
                "run_dir": str(root / name / r.run_id),
                "overrides": r.full_overrides(name, root / name / r.run_id),
                "tokens_total": r.figures["tokens"],
                "params": r.figures["params"],
                "retry_of": old,
                "group": r.group,
                "tuned": r.tuned,
                **{k: r.figures.get(k) for k in ("depth", "width", "shape")},
                **({"halving": {"group": r.group, "members": members[r.group]}} if r.group in (members or {}) else {}),
            }
        )
    subs = []
    for cfg, items in groups.values():
        subs += launch_submit(name, items, cfg, show=show)
    notes = []
    if retry_failed and retry is None and skipped.get("diverged"):
        n = skipped["diverged"]
        notes.append(
            f"{n} diverged run{'s' * (n != 1)} not resubmitted: the same config, seed and data diverge "
            "again; --retry-diverged OVERRIDE (e.g. a lower optim.lr) starts them afresh under a new run id"
        )
    if retry_failed and skipped.get("unknown"):
        n = skipped["unknown"]
        notes.append(
            f"{n} run{'s' * (n != 1)} not resubmitted: the scheduler's state is unknown ({why}), "
            "so they may still be running and a second job would write the same run directory; "
            "retry once sacct answers (or after scancel)"
        )
    jobs = sorted({x["job_id"] for x in subs}, key=job_key)
    waves = []
    if subs:  # SLURM submissions that went in as waves (a waves.json; none for debug and local)
        waves = backend(lcfg["name"]).waves(name, jobs)
    return Submission(name, lcfg["name"], subs, jobs, skipped, notes=notes, waves=waves)


def job_key(j: str):
    head, _, tail = j.rpartition("_")
    return (head, int(tail)) if tail.isdigit() else (j, 0)


def compress(jobs: list[str]) -> str:
    """['12_0', '12_1', '12_2'] -> '12_[0-2]'."""
    groups: dict = {}
    for j in jobs:
        head, _, tail = j.rpartition("_")
        if head and tail.isdigit():
            groups.setdefault(head, []).append(int(tail))
        else:
            groups.setdefault(j, [])
    parts = []
    for head, idx in groups.items():
        if not idx:
            parts.append(head)
            continue
        idx.sort()
        spans, a = [], idx[0]
        for x, y in zip(idx, idx[1:] + [None]):
            if y != x + 1:
                spans.append(f"{a}" if a == x else f"{a}-{x}")
                a = y
        parts.append(f"{head}_[{','.join(spans)}]" if len(idx) > 1 else f"{head}_{idx[0]}")
    return " ".join(parts)
