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
import subprocess
import time
from pathlib import Path

from depthwidth.config.compose import compose
from depthwidth.core import store
from depthwidth.core.atomic import never_world_writable, write_json
from depthwidth.core.errors import BadInput
from depthwidth.evals import run as evals
from depthwidth.train.signals import interrupted_line
from depthwidth.train.trainer import EXIT_PREEMPTED, Preempted, train


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
    return run_items(
        doc["sweep"], doc["tasks"][index], _current_job_id(doc, index), log=log, in_process=in_process, **kw
    )


def run_items(
    name: str, runs: list[dict], job_id: str, *, log=print, in_process: bool = False, stopped=None, on_preempt=None
) -> int:
    """Train ``runs`` one after another as job ``job_id``; the task's exit code.
    ``stopped()``: a stop signal reached the caller between runs (the next one is not started:
    EXIT_PREEMPTED); ``on_preempt(run, Preempted)``: told which run stopped, where, on which signal."""
    never_world_writable()  # a job is not started through the CLI: the same rule for what it writes
    _distributed_env()
    prev = os.environ.get("DW_JOB_ID")
    os.environ["DW_JOB_ID"] = job_id  # provenance: the job that trained the run
    try:
        return _train_each(name, runs, job_id, log, in_process, stopped or (lambda: False), on_preempt)
    finally:
        if prev is None:
            os.environ.pop("DW_JOB_ID", None)
        else:
            os.environ["DW_JOB_ID"] = prev


def _train_each(name: str, runs: list[dict], job_id: str, log, in_process: bool, stopped, on_preempt) -> int:
    rank0 = os.environ.get("RANK", "0") == "0"
    rc = 0
    for it in runs:
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
        try:
            cfg, say = compose(it["overrides"]), lambda m, r=it["run_id"]: log(f"[{r}] {m}")
            s = train(cfg, log=say)
            evals.at_end(cfg, s, say)  # train.eval_tasks: a failed eval is a warning, the run stays done
            if s.get("status") != "done":
                rc = 1
        except Preempted as e:
            if e.signal == "SIGUSR2" and rank0 and not in_process:
                _requeue(log)
            if e.signal == "SIGINT":
                log(interrupted_line(e.step, e.where, f"dw sweep {name} --retry-failed resumes it", run=it["run_id"]))
            if on_preempt:
                on_preempt(it, e)
            return EXIT_PREEMPTED
        except BadInput as e:  # validated at submission; a changed conf/ can still break it
            log(f"[{it['run_id']}] bad input: {e}")
            rc = 1
        except Exception as e:  # train() has written summary status=failed (a failed set-up too)
            log(f"[{it['run_id']}] failed: {type(e).__name__}: {e}")
            rc = 1
    return rc


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


def _requeue(log) -> None:
    """Requeue this task only (SLURM_JOB_ID of an array task may name the whole array)."""
    e = os.environ
    jid = (
        f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}"
        if e.get("SLURM_ARRAY_JOB_ID")
        else e.get("SLURM_JOB_ID")
    )
    if not jid:
        return
    p = subprocess.run(["scontrol", "requeue", jid], capture_output=True, text=True)
    log(f"requeue {jid}: " + ("ok" if p.returncode == 0 else " ".join(p.stderr.split())))


def set_state(d: Path, index: int, **kw) -> None:
    p = d / f"task-{index}.json"
    prev = store.read_json(p) or {}
    write_json(p, {**prev, **kw})


def ended(d: Path, index: int, rc: int) -> None:
    """A task's final state from its exit code."""
    set_state(d, index, state={0: "completed", EXIT_PREEMPTED: "preempted"}.get(rc, "failed"), rc=rc, ended=time.time())
