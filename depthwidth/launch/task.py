"""Inside a job: train every run of one task, and say how the task ended.

``run_task(tasks.json, i)`` trains each run of task ``i`` with
``train(compose(overrides))``; the exit code is 0 (all done), 1 (a run
failed or diverged) or ``EXIT_PREEMPTED`` (3: checkpointed on a signal).

Preemption: train() checkpoints on SIGUSR2/SIGTERM/SIGINT and raises Preempted.  On
SIGUSR2 (the time limit's warning ``--signal=USR2@signal_delay_s``, or
``scancel --signal=USR2 JOB``; both reach the python processes under srun) the
task requeues only itself with ``scontrol requeue ARRAY_i``; on SIGTERM the
scheduler is already requeueing (preemption, ``scontrol requeue``) or
cancelling the job, so the task only exits.  A requeued task reruns the same
call and each run resumes from its checkpoint in the same run directory.
SIGINT (Ctrl-C, ``kill -INT``) is a stop, not a requeue: the run ends
``preempted`` with its checkpoint and the task says, in its log, how to resume it
(``dw sweep NAME --retry-failed``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from depthwidth.config.compose import compose
from depthwidth.core import store
from depthwidth.core.atomic import never_world_writable
from depthwidth.core.errors import BadInput
from depthwidth.evals import run as evals
from depthwidth.launch import retry, slurm
from depthwidth.launch.backend import backend
from depthwidth.launch.halving import EXIT_PARKED, gate_for
from depthwidth.launch.scheduler import set_state
from depthwidth.train.signals import interrupted_line
from depthwidth.train.trainer import EXIT_PREEMPTED, Parked, Preempted, train


def _current_job_id(tasks: dict, index: int) -> str:
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if os.environ.get("SLURM_JOB_ID"):
        return os.environ["SLURM_JOB_ID"]
    return f"{tasks['launcher']}-{tasks['submission']}_{index}"


def _distributed_env() -> None:
    """torch.distributed's variables from SLURM's, for multi-task (multi-GPU) runs."""
    e = os.environ
    if int(e.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in e:
        e.setdefault("RANK", e["SLURM_PROCID"])
        e.setdefault("WORLD_SIZE", e["SLURM_NTASKS"])
        e.setdefault("LOCAL_RANK", e.get("SLURM_LOCALID", "0"))


def run_task(tasks_file: str | os.PathLike, index: int, *, log=print, in_process: bool = False, **kw) -> int:
    """Train every run of task ``index``; returns an exit code (0 ok, 1 a run failed, 3 preempted)."""
    doc = json.loads(Path(tasks_file).read_text())
    if doc.get("kind", "train") == "eval":
        return run_evals(doc["tasks"][index], doc.get("args") or {}, log=log)
    job = _current_job_id(doc, index)
    where = {
        "launcher": doc["launcher"],
        "job_id": job,
        "tasks_file": str(Path(tasks_file).absolute()),
        "index": index,
        "retry": retry.policy(doc),
    }
    rc = run_items(doc["sweep"], doc["tasks"][index], job, log=log, in_process=in_process, where=where, **kw)
    # a parked SLURM task is requeued held: it exits as a preempted one does (no result, requeued)
    return EXIT_PREEMPTED if rc == EXIT_PARKED and backend(doc["launcher"]).requeues else rc


def array_task(tasks_file: str | os.PathLike, index: int) -> dict:
    """SLURM array task ``index`` of a submission (what launch/slurm.py's ``SweepTask`` calls in the
    job): every run of ``tasks.json``'s task ``index``; a preempted task exits without a result."""
    rc = run_task(tasks_file, index, log=lambda m: print(m, flush=True))
    if rc == EXIT_PREEMPTED:  # checkpointed; requeued (by us on USR2, by SLURM on TERM) or cancelled
        print(f"task {index}: preempted, exiting without a result", flush=True)
        sys.exit(EXIT_PREEMPTED)
    if rc:
        raise RuntimeError(f"task {index} of {tasks_file}: a run failed (see its summary.json)")
    return {"task": index, "rc": rc}


def run_items(
    name: str,
    runs: list[dict],
    job_id: str,
    *,
    log=print,
    in_process: bool = False,
    stopped=None,
    on_preempt=None,
    where: dict | None = None,
) -> int:
    """Train ``runs`` one after another as job ``job_id``; the task's exit code.
    ``stopped()``: a stop signal reached the caller between runs (the next one is not started:
    EXIT_PREEMPTED); ``on_preempt(run, Preempted)``: told which run stopped, where, on which signal.
    ``where`` ({launcher, job_id, tasks_file, index}): the task, for successive halving's release of
    a run that parked (the task then ends EXIT_PARKED; halving.py)."""
    never_world_writable()  # a job is not started through the CLI: the same rule for what it writes
    _distributed_env()
    prev = os.environ.get("DW_JOB_ID")
    os.environ["DW_JOB_ID"] = job_id  # provenance: the job that trained the run
    try:
        return _train_each(name, runs, job_id, log, in_process, stopped or (lambda: False), on_preempt, where)
    finally:
        if prev is None:
            os.environ.pop("DW_JOB_ID", None)
        else:
            os.environ["DW_JOB_ID"] = prev


def _train_each(name: str, runs: list[dict], job_id: str, log, in_process: bool, stopped, on_preempt, where) -> int:
    rank0 = os.environ.get("RANK", "0") == "0"
    rc = 0
    where = where or {"launcher": "debug", "job_id": job_id}
    pol = where.get("retry") or retry.Policy(0, 0.0)
    for it in runs:
        gate = gate_for(name, it, where) if it.get("halving") else None
        if stopped():
            return EXIT_PREEMPTED
        if rank0:
            store.append_events(
                name,
                [
                    {
                        "event": "start",
                        "run_id": it["run_id"],
                        "job_id": job_id,
                        "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
                        "host": os.uname().nodename,
                        "pid": os.getpid(),
                    }
                ],
            )
        say = lambda m, r=it["run_id"]: log(f"[{r}] {m}")  # noqa: E731
        if it.get("run_dir") and not _survived(it["run_dir"], job_id, where, pol, say, rank0, gate):
            rc = 1
            continue
        while True:  # a failure retried here: local and debug (SLURM requeues the task instead)
            try:
                cfg = compose(it["overrides"])
                s = _train_gated(cfg, say, gate)
                if s is None:  # parked until its tuning group decides (halving.py): the task ends so
                    return EXIT_PARKED
                evals.at_end(cfg, s, say)  # train.eval_tasks: a failed eval is a warning, the run stays done
                if s.get("status") == "diverged" and gate is not None and rank0:
                    gate.diverged()  # before its first budget or after: the group counts it the worst
                if s.get("status") not in ("done", "pruned"):
                    rc = 1
                break
            except Preempted as e:
                if e.signal == "SIGUSR2" and rank0 and not in_process:
                    slurm.requeue_self(log)
                if e.signal == "SIGINT":
                    log(
                        interrupted_line(
                            e.step, e.where, f"dw sweep {name} --retry-failed resumes it", run=it["run_id"]
                        )
                    )
                if on_preempt:
                    on_preempt(it, e)
                return EXIT_PREEMPTED
            except BadInput as e:  # validated at submission; a changed conf/ can still break it
                say(f"bad input: {e}")
                rc = 1
                break
            except Exception as e:  # train() has written summary status=failed (a failed set-up too)
                say(f"failed: {type(e).__name__}: {e}")
                err = f"{type(e).__name__}: {e}"
                try:
                    again = (
                        _retry(it["run_dir"], err, job_id, where, pol, say, rank0, stopped, gate)
                        if it.get("run_dir")
                        else "no"
                    )
                except OSError as w:  # the record itself cannot be written (a disk still full): said, not raised
                    say(f"its failure could not be recorded in {it['run_dir']}: {w.strerror or w}")
                    again = "no"
                if again == "requeued":
                    return EXIT_PREEMPTED  # the task runs again later, from the run's checkpoint
                if again != "now":
                    rc = 1
                    break
    return rc


def _survived(run_dir: str, job_id: str, where: dict, pol: retry.Policy, say, rank0: bool, gate=None) -> bool:
    """Whether the run may train in this attempt: a previous attempt that died without ending it
    (its summary still ``running``: node failure, a kill) counts as a failure (retry.py).  Rank 0
    decides and writes its word under this attempt's key; the other ranks do as it says."""
    key = retry.attempt_key(job_id)
    if not rank0:
        return retry.wait_attempt(run_dir, key)
    s = store.read_json(Path(run_dir) / "summary.json")
    if not s or s.get("status") != "running":
        retry.note_attempt(run_dir, key, True)
        return True
    how = backend(where.get("launcher")).died_how(job_id)
    err = f"{retry.DIED} ({how or 'killed'}, job {job_id})"
    v = retry.verdict(retry.record(run_dir, "died", err, job_id), pol)
    retry.note_attempt(run_dir, key, v.retry)
    say(
        f"its previous attempt {err[len(retry.DIED) + 1 :] if how else 'died'}: "
        + ("resuming" if v.retry else v.reason)
    )
    if not v.retry:
        retry.mark_failed(run_dir, v.reason)
        if gate is not None:
            gate.diverged()  # it will not reach its first budget: its group counts it the worst
    return v.retry


def _retry(
    run_dir: str, error: str, job_id: str, where: dict, pol: retry.Policy, say, rank0: bool, stopped, gate=None
) -> str:
    """After a failed attempt: ``now`` (train it again in this process), ``requeued`` (SLURM starts
    this task again later) or ``no`` (the reason is in its summary)."""
    if not rank0 or int(os.environ.get("WORLD_SIZE", "1")) > 1 and not backend(where.get("launcher")).requeues:
        return "no"  # a torchrun of several processes: one rank cannot restart the others
    v = retry.verdict(retry.record(run_dir, "exception", error, job_id), pol)
    say(v.reason)
    if not v.retry:
        retry.mark_failed(run_dir, v.reason)
        if gate is not None:
            gate.diverged()  # it will not reach its first budget: its group counts it the worst
        return "no"
    # SLURM requeues the task (a begin time delay_s ahead); a local worker waits; debug: at once
    return backend(where.get("launcher")).retry_later(job_id, v.delay_s, say, stopped)


def _train_gated(cfg, say, gate) -> dict | None:
    """train(cfg) under successive halving's ``gate``: a run that parks is parked (None), unless
    its group decided meanwhile: then it resumes at once and trains on (or is pruned)."""
    while True:
        try:
            return train(cfg, log=say, gate=gate)
        except Parked:
            if os.environ.get("RANK", "0") != "0" or gate.park():  # rank 0 parks the task; the others exit
                return None
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # the other ranks have left: all start again
                say("its tuning group decided while it parked: its task starts again now")
                gate.rerun()
                return None
            say("its tuning group decided while it parked: resuming now")


def run_evals(runs: list[dict], args: dict, *, log=print) -> int:
    """``dw eval SWEEP launcher=...``'s task: evaluate each finished run (``args``: evals.run.evaluate_run's
    options); 0 ok, 1 if one failed (the others are still evaluated; dw eval SWEEP again redoes it)."""
    never_world_writable()
    rc = 0
    managers: dict = {}  # the harness's task index, built once for the task's runs (seconds each)
    for it in runs:
        try:
            doc = evals.evaluate_run(it["run_dir"], **args, managers=managers)
            log(f"[{it['run_id']}] evaluated: {', '.join(sorted(doc.get('tasks') or {}))}")
        except BadInput as e:
            log(f"[{it['run_id']}] bad input: {e}")
            rc = 1
        except Exception as e:
            log(f"[{it['run_id']}] eval failed: {type(e).__name__}: {e}")
            rc = 1
    return rc


def ended(d: Path, index: int, rc: int) -> None:
    """A task's final state from its exit code."""
    set_state(d, index, state={0: "completed", EXIT_PREEMPTED: "preempted"}.get(rc, "failed"), rc=rc, ended=time.time())
