"""launcher=slurm through submitit: one job array per submission.

``submit_array`` builds a ``submitit.SlurmExecutor`` whose folder is
``runs/NAME/jobs/SUB/submitit`` and calls ``map_array(SweepTask(tasks.json),
range(n_tasks))`` once: submitit pickles one call per task there, writes one
sbatch file (``ARRAY_submission.sh``) and returns the ids once sbatch has
answered (``ARRAY_i``; a submission of a single task is a plain job, id
``N``).  Each task runs ``python -m submitit.core._submit FOLDER`` under
``srun`` (one process per task: ``tasks_per_node`` of them, each with
SLURM_PROCID/SLURM_LOCALID, from which run_items sets RANK/WORLD_SIZE/LOCAL_RANK).

Signals (see docs/slurm.md):
- ``--signal=USR2@signal_delay_s`` (the time limit's warning) and ``scancel
  --signal=USR2 JOB`` go to the job's steps, i.e. to every python under srun.
  The batch shell ignores USR2 (``trap '' USR2``), so ``scancel --full`` also
  works and ``--batch`` cannot kill the job (it reaches no python, though).
- While a run trains, train()'s own handler takes USR2/SIGTERM: it checkpoints
  and raises Preempted; on USR2 the task requeues only itself (``scontrol
  requeue ARRAY_i``); on SIGTERM the scheduler is already requeueing or
  cancelling.  Either way the task then exits (code 3, no result pickle, as
  submitit does after its own requeue) and the requeued task reruns the same
  pickled call: each run resumes from its checkpoint.
- Outside train() (between packed runs) submitit's handler is active: on USR2
  it calls ``SweepTask.checkpoint`` (the same call), requeues the task and exits.
  ``max_num_timeout`` is huge so repeated time-limit requeues never run out.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import submitit

from depthwidth.core import store
from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.launch.task import EXIT_PREEMPTED, run_task

MAX_NUM_TIMEOUT = 1_000_000  # submitit's budget of time-limit requeues (default 3)


class SweepTask(submitit.helpers.Checkpointable):
    """Array task ``index`` of a submission: every run of ``tasks.json``'s task ``index``.
    The inherited ``checkpoint(index)`` resubmits this same call."""

    def __init__(self, tasks_file: str | os.PathLike):
        self.tasks_file = str(tasks_file)

    def __call__(self, index: int) -> dict:
        rc = run_task(self.tasks_file, index, log=lambda m: print(m, flush=True))
        if rc == EXIT_PREEMPTED:  # checkpointed; requeued (by us on USR2, by SLURM on TERM) or cancelled
            print(f"task {index}: preempted, exiting without a result", flush=True)
            sys.exit(EXIT_PREEMPTED)
        if rc:
            raise RuntimeError(f"task {index} of {self.tasks_file}: a run failed (see its summary.json)")
        return {"task": index, "rc": rc}


def minutes(t) -> int:
    """SLURM time (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S) -> whole minutes, rounded up."""
    from depthwidth.launch.config import time_minutes  # the one home of the rule (light for the dry run)

    return time_minutes(t)


def parameters(name: str, cfg: dict) -> dict:
    """SlurmExecutor.update_parameters(**this) from the launcher config."""
    gpn = int(cfg["gpus_per_node"])
    tpn = int(cfg["tasks_per_node"] or max(1, gpn))
    nodes = int(cfg["nodes"])
    setup = [
        "trap '' USR2  # USR2 is for the steps (python under srun); scancel --full/--batch must not kill this shell",
        f"cd {shlex.quote(os.getcwd())}",
        f"export PYTHONPATH={shlex.quote(str(Path(__file__).resolve().parents[2]))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export DW_RUNS={shlex.quote(str(store.runs_root().absolute()))}",
    ]
    if nodes * tpn > 1:  # torch.distributed's rendezvous: the allocation's first host
        # the first node's address (NodeAddr: node names need not resolve), else its name
        setup += [
            '_dw_first="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            'export MASTER_ADDR="$(scontrol show node "$_dw_first" -o | sed -n \'s/.* NodeAddr=\\([^ ]*\\).*/\\1/p\')"',
            'export MASTER_ADDR="${MASTER_ADDR:-$_dw_first}"',
            "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))",
        ]
    setup += [str(s) for s in cfg["setup"]]
    extra = {"requeue": True}
    for k, v in cfg["additional"].items():
        extra[str(k).replace("_", "-")] = True if v in (None, True) else v
    p = dict(
        job_name=cfg["job_name"] or f"dw-{name}",
        time=minutes(cfg["time"]),
        nodes=nodes,
        ntasks_per_node=tpn,
        cpus_per_task=int(cfg["cpus_per_task"]),
        array_parallelism=int(cfg["array_parallelism"]),
        signal_delay_s=int(cfg["signal_delay_s"]),
        stderr_to_stdout=True,
        setup=setup,
        additional_parameters=extra,
    )
    if gpn:
        p["gpus_per_node"] = gpn
    for k in ("partition", "account", "qos", "constraint", "mem"):
        if cfg.get(k) not in (None, ""):
            p[k] = str(cfg[k])
    return p


def executor(name: str, folder: Path, cfg: dict) -> submitit.SlurmExecutor:
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise BadInput("launcher=slurm but there is no sbatch/srun on PATH (use launcher=local or launcher=debug here)")
    ex = submitit.SlurmExecutor(
        folder=folder, max_num_timeout=MAX_NUM_TIMEOUT, python=shlex.quote(cfg["python"] or sys.executable)
    )
    try:
        ex.update_parameters(**parameters(name, cfg))
    except ValueError as e:
        raise BadInput(f"launcher=slurm: {' '.join(str(e).split())[:300]}") from None
    return ex


def max_array_size(cfg: dict) -> int | None:
    """Tasks one job array may hold: ``launcher.max_array_size``, else the cluster's MaxArraySize
    (indices 0..MaxArraySize-1), else None (no limit known)."""
    if cfg.get("max_array_size"):
        return int(cfg["max_array_size"])
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def submit_array(name: str, d: Path, tasks_file: Path, n_tasks: int, cfg: dict) -> list[str]:
    """``map_array`` for the submission's ``n_tasks`` tasks -> their job ids, in task order (no
    waiting).  Clusters cap an array's size (MaxArraySize) and submitit does not split: more tasks
    than that go in as several arrays, task i of the submission in chunk i // size.  One manifest
    records them all, so ``dw status`` and ``--retry-failed`` see one sweep."""
    ex = executor(name, d / "submitit", cfg)
    size = max_array_size(cfg) or n_tasks
    said = io.StringIO()  # submitit prints sbatch's stderr before raising: keep it for our one line
    ids: list[str] = []
    try:
        for a in range(0, n_tasks, size):
            with contextlib.redirect_stderr(said):
                jobs = ex.map_array(SweepTask(tasks_file.absolute()), list(range(a, min(n_tasks, a + size))))
            ids += [j.job_id for j in jobs]
    except submitit.core.utils.FailedJobError as e:
        if ids:  # earlier arrays are queued: cancel them, so that nothing runs unrecorded
            subprocess.run(["scancel", *sorted({i.split("_")[0] for i in ids})], capture_output=True, timeout=60)
        raise WorkFailed(f"sbatch failed: {' '.join((str(e) or said.getvalue()).split())[:400]}") from None
    except FileNotFoundError:
        raise BadInput("launcher=slurm but there is no sbatch on PATH") from None
    return ids
