"""launcher=slurm: the one module that runs SLURM's commands (sbatch, scontrol, squeue, sacct,
scancel, sacctmgr: each with a timeout) and imports submitit (only where an array is submitted or
run: ``dw status`` and the dry run stay light).  launch/backend.py's ``Slurm`` is the backend
built on it; nothing else in dw asks SLURM anything.

Arrays: one job array per submission, through submitit.

``submit_array`` (launch/slurm_waves.py) builds a ``submitit.SlurmExecutor`` (``executor``) whose folder is
``runs/NAME/jobs/SUB/submitit`` and calls ``map_array(SweepTask(tasks.json, entry),
range(n_tasks))`` once (``entry``: launch/task.py's ``array_task``): submitit pickles one
call per task there, writes one sbatch file (``ARRAY_submission.sh``) and returns the ids once sbatch has
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

Waves (a submission larger than the scheduler's limit on queued jobs) are launch/slurm_waves.py's:
it submits through the commands here.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

from depthwidth.core import store
from depthwidth.core.atomic import write_text
from depthwidth.core.errors import BadInput, WorkFailed, bad
from depthwidth.launch.limits import (
    ASSOC_FORMAT,
    DRY_TIMEOUT_S,
    QOS_FORMAT,
    TIMEOUT_S,
    Limit,
    Limits,
    assoc_limits,
    check_room,
    enforced,
    job_qos,
    parse_assoc,
    parse_qos,
    parse_squeue,
    pick_row,
    qos_limits,
    user_name,
)

CALL_TIMEOUT_S = 60  # per scheduler command, unless said otherwise


# ---------------------------------------------------------------------------
# running a command: every call has a timeout
# ---------------------------------------------------------------------------


def _call(cmd: list[str], timeout: float = CALL_TIMEOUT_S, text: bool = True) -> subprocess.CompletedProcess:
    """``cmd`` with its output captured, killed after ``timeout`` s (TimeoutExpired); OSError if it
    cannot run."""
    return subprocess.run(cmd, capture_output=True, text=text, timeout=timeout)


def _run(cmd: list[str], timeout: float = TIMEOUT_S) -> tuple[str | None, str]:
    """(stdout, "") or (None, why the command gave no answer)."""
    try:
        p = _call(cmd, timeout)
    except FileNotFoundError:
        return None, f"no {cmd[0]} here"
    except OSError as e:
        return None, f"{cmd[0]} could not run ({e})"
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]} did not answer within {timeout:g} s"
    if p.returncode != 0:
        said = [ln.strip() for ln in p.stderr.splitlines() if ln.strip()]  # the last line says most
        return None, f"{cmd[0]} failed: {said[-1][:200] if said else f'exit {p.returncode}'}"
    return p.stdout, ""


def available(*commands: str) -> bool:
    """Whether every one of ``commands`` (default: sbatch) is on PATH."""
    return all(shutil.which(c) is not None for c in commands or ("sbatch",))


def time_minutes(t) -> int:
    """launcher.time (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S) -> the whole minutes submitit asks
    SLURM for, rounded up, here without importing submitit, so that the dry run stays light."""
    if isinstance(t, int) and not isinstance(t, bool):
        return t
    days, _, rest = str(t).rpartition("-")
    try:
        parts = [int(x) for x in rest.split(":")]
        if days:
            h, m, s = (parts + [0, 0])[:3]
        else:
            h, m, s = {1: (0, parts[0], 0), 2: (0, *parts), 3: tuple(parts)}[len(parts)]
        total = (int(days or 0) * 24 + h) * 60 + m + s / 60
    except (ValueError, KeyError, TypeError):
        raise bad("launcher.time", t, "minutes (int) or [D-]HH:MM:SS") from None
    return max(1, math.ceil(total))


# ---------------------------------------------------------------------------
# sbatch and scontrol: dw's own small jobs, requeues, holds and releases
# ---------------------------------------------------------------------------


def where_lines() -> list[str]:
    """Shell lines a job starts with: where dw ran, its code, its run store."""
    return [
        f"cd {shlex.quote(os.getcwd())}",
        f"export PYTHONPATH={shlex.quote(str(Path(__file__).resolve().parents[2]))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export DW_RUNS={shlex.quote(str(store.runs_root().absolute()))}",
    ]


def cpu_job(path: Path, cfg: dict, *, opts: list[str], comment: str, module: str, args: list[str]) -> Path:
    """Write the sbatch file of a one-CPU, one-node job (``opts``: its own #SBATCH options, the
    launcher's partition/account/QOS added: its slot counts against the same limits) running
    ``python -m module args`` after the launcher's setup lines; -> ``path``."""
    opts = [
        *opts,
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
        *(f"--{k}={cfg[k]}" for k in ("partition", "account", "qos") if cfg.get(k) not in (None, "")),
    ]
    python = shlex.quote(cfg.get("python") or sys.executable)
    lines = [
        "#!/bin/bash",
        *(f"#SBATCH {o}" for o in opts),
        f"# {comment}",
        *where_lines(),
        *(str(s) for s in cfg.get("setup") or []),
        f"exec {python} -m {module} {' '.join(shlex.quote(a) for a in args)}",
        "",
    ]
    write_text(path, "\n".join(lines))
    return path


def sbatch(script: Path, what: str, *opts: str) -> str:
    """``sbatch --parsable OPTS SCRIPT`` -> the job id; BadInput without sbatch, WorkFailed if refused."""
    try:
        p = _call(["sbatch", "--parsable", *opts, str(script)])
    except FileNotFoundError:
        raise BadInput("launcher=slurm but there is no sbatch on PATH") from None
    except subprocess.TimeoutExpired:
        raise WorkFailed(f"sbatch of {what} did not answer within 60 s") from None
    if p.returncode != 0 or not p.stdout.strip():
        raise WorkFailed(f"sbatch of {what} failed: {' '.join(p.stderr.split())[:400] or f'exit {p.returncode}'}")
    return p.stdout.strip().split(";")[0]


def scontrol(*args: str, tries: int = 1, who: str = "dw") -> bool:
    """``scontrol ARGS`` (``tries`` times, a growing pause between); whether it succeeded (the last
    refusal printed to stderr with ``who``)."""
    err = ""
    for k in range(tries):
        try:
            p = _call(["scontrol", *args])
            if p.returncode == 0:
                return True
            err = " ".join(p.stderr.split())
        except (OSError, subprocess.TimeoutExpired) as e:
            err = str(e)
        if k + 1 < tries:
            time.sleep(1.0 + k)
    print(f"{who}: scontrol {' '.join(args)}: {err}", file=sys.stderr, flush=True)
    return False


def requeue_self(log) -> None:
    """Requeue this task only (SLURM_JOB_ID of an array task may name the whole array)."""
    e = os.environ
    jid = (
        f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}"
        if e.get("SLURM_ARRAY_JOB_ID")
        else e.get("SLURM_JOB_ID")
    )
    if not jid:
        return
    try:
        p = _call(["scontrol", "requeue", jid])
    except (OSError, subprocess.TimeoutExpired) as e:  # the run is checkpointed: say why, exit preempted
        log(f"requeue {jid}: {type(e).__name__}: {e}")
        return
    log(f"requeue {jid}: " + ("ok" if p.returncode == 0 else " ".join(p.stderr.split())))


def requeue_later(job: str, delay_s: float, log) -> bool:
    """Requeue SLURM task ``job`` (it leaves its node now) to start no sooner than ``delay_s`` from
    now: ``scontrol requeue``, then a begin time on the pending job.  False if SLURM refused the
    requeue; a begin time it refuses (the job not yet pending after a few tries) only drops the
    delay, never the retry (a held job left held would wait for ever)."""
    try:
        p = _call(["scontrol", "requeue", job])
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"retry: scontrol requeue {job}: {type(e).__name__}: {e}")
        return False
    if p.returncode != 0:
        log(f"retry: scontrol requeue {job}: {' '.join(p.stderr.split())}")
        return False
    start = f"StartTime=now+{max(1, int(round(delay_s)))}"
    why = ""
    for _ in range(10):  # SLURM takes a moment to make the requeued job pending
        try:
            q = _call(["scontrol", "update", f"JobId={job}", start])
        except (OSError, subprocess.TimeoutExpired) as e:
            why = f"{type(e).__name__}: {e}"
            break
        if q.returncode == 0:
            return True
        why = " ".join(q.stderr.split())
        time.sleep(0.5)
    log(f"retry: scontrol update {job} {start}: {why} (retried without the delay)")
    return True


def died_how(job: str) -> str:
    """How the previous attempt of SLURM job ``job`` ended, from sacct's records of its restarts
    (``-D``): e.g. "NODE_FAIL"; "" when sacct cannot say."""
    try:
        p = _call(["sacct", "-n", "-P", "-X", "-D", "-o", "State", "-j", job])
    except (OSError, subprocess.TimeoutExpired):
        return ""
    states = [ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()]
    ended = [s for s in states if s not in ("RUNNING", "PENDING", "REQUEUED", "CONFIGURING", "COMPLETING")]
    return ended[-1] if ended else (states[-2] if len(states) >= 2 else "")


def cancel(ids: list[str]) -> None:
    """``scancel`` the jobs (whole arrays) of ``ids``; what it says is not read."""
    if ids:
        try:
            _call(["scancel", *sorted({i.split("_")[0] for i in ids})], text=False)
        except (OSError, subprocess.TimeoutExpired):
            pass  # called on error paths: the error being reported is the one that matters


def signal_job(job: str, sig: str) -> str | None:
    """``scancel --signal=SIG JOB`` (to the job's steps: every rank under srun); None, or why it failed."""
    try:
        p = _call(["scancel", f"--signal={sig}", str(job)])
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    return None if p.returncode == 0 else " ".join(p.stderr.split())


def known(job: str) -> bool:
    """Whether the controller still shows ``job`` (queued or running)."""
    p = _call(["squeue", "-h", "-j", job, "-o", "%i"])
    return p.returncode == 0 and bool(p.stdout.strip())


def pending(job: str) -> bool:
    p = _call(["squeue", "-h", "-j", job, "-o", "%T"])
    return p.returncode == 0 and p.stdout.strip() == "PENDING"


def dependencies(job: str) -> list[str]:
    """The job ids ``job`` depends on (``scontrol show job``)."""
    p = _call(["scontrol", "show", "job", job])
    m = re.search(r"Dependency=(\S+)", p.stdout)
    return re.findall(r"(\d+)", m.group(1)) if m and m.group(1) != "(null)" else []


def clean_env() -> None:
    """Forget this job's own SLURM_* variables (SLURM_CONF aside): the jobs it submits must not
    inherit its allocation (sbatch exports the submitting environment)."""
    for k in [k for k in os.environ if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        del os.environ[k]


# ---------------------------------------------------------------------------
# the scheduler's view of a sweep's jobs (dw status): ONE sacct call
# ---------------------------------------------------------------------------

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
        p = _call(cmd)
    except FileNotFoundError:
        raise SchedulerUnknown("no sacct on this machine (PATH)") from None
    except OSError as e:
        raise SchedulerUnknown(f"sacct could not run ({e})") from None
    except subprocess.TimeoutExpired:
        raise SchedulerUnknown("sacct did not answer within 60 s") from None
    if p.returncode != 0:
        raise SchedulerUnknown(f"sacct failed: {' '.join(p.stderr.split())[:300] or f'exit {p.returncode}'}")
    out = _parse(p.stdout)
    # Accounting lags the controller (slurmctld tells slurmdbd of a start or a requeue when it gets to
    # it): a job sbatch just accepted may not be in sacct yet, and one sacct still calls PENDING or
    # REQUEUED may be running.  The controller's view wins for the jobs it holds: one squeue call for
    # the arrays of those jobs (a finished job is no longer in squeue: sacct's record stands).
    ask = {j.split("_")[0] for j in job_ids if j and j not in out}
    ask |= {j.split("_")[0] for j, st in out.items() if SLURM_STATES.get(st) in ("pending", "preempted")}
    if ask:
        out.update(_squeue(sorted(ask)))
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
        p = _call(["squeue", "-h", "-o", "%i|%T", "-j", ",".join(arrays)])
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return _parse(p.stdout) if p.returncode == 0 else {}


# ---------------------------------------------------------------------------
# the limits on queued jobs that apply to a submission (launch/limits.py parses and plans)
# ---------------------------------------------------------------------------


def read_limits(cfg: dict, user: str | None = None, timeout: float = TIMEOUT_S) -> Limits:
    """The limits on queued jobs that apply to a submission with launcher settings ``cfg``."""
    user = user or user_name()
    found, read, why = _sacctmgr(cfg, user, lambda cmd: _run(cmd, timeout))
    if cfg.get("max_submit"):
        found.append(Limit(int(cfg["max_submit"]), "launcher.max_submit", user))
    return Limits(found, read, why, user, timeout)


def _sacctmgr(cfg: dict, user: str, run) -> tuple[list[Limit], str, str]:
    """(limits, what was read, why nothing was)."""
    conf, why = run(["scontrol", "show", "config"])
    if "did not answer" in why:  # sacctmgr would wait as long: say so at once
        return [], "", why
    if conf is not None and not enforced(conf):
        return [], "", "SLURM enforces none here (AccountingStorageEnforce without limits)"
    cluster = re.search(r"^ClusterName\s*=\s*(\S+)", conf or "", re.M)
    show = ["sacctmgr", "-n", "-P", "show"]
    where = [f"cluster={cluster.group(1)}"] if cluster else []
    text, why = run([*show, "assoc", "where", f"user={user}", *where, f"format={ASSOC_FORMAT}"])
    if text is None:
        return [], "", why
    rows = parse_assoc(text)
    account = cfg.get("account")
    if not account:
        accounts = sorted({r["account"] for r in rows if r["user"] == user})
        default, _ = run([*show, "user", user, "format=DefaultAccount"])
        account = (default or "").strip().split("\n")[0].strip() or (accounts[0] if len(accounts) == 1 else None)
    row = pick_row(rows, user, account, cfg.get("partition")) if account else None
    account_row = None
    if account:
        acct, _ = run([*show, "assoc", "where", f"account={account}", "user=", *where, f"format={ASSOC_FORMAT}"])
        account_row = next((r for r in parse_assoc(acct or "") if not r["user"] and not r["partition"]), None)
    qos = job_qos(cfg.get("qos"), row)
    qos_text, why = run([*show, "qos", "where", f"name={qos}", f"format={QOS_FORMAT}"])
    if qos_text is None:
        return [], "", why
    found = assoc_limits(row, account_row, user, account) + qos_limits(qos, parse_qos(qos_text).get(qos), user, account)
    said = f"association {account}/{user}" if row else f"no association of {user}"
    return found, f"{said}, qos {qos}", ""


def queued(limits: Limits) -> list | None:
    """The jobs queued now that may count against ``limits`` (None: squeue did not answer)."""
    cmd = ["squeue", "-h", "-r", "-o", "%u|%a|%q"]
    if not limits.everyone():
        cmd += ["-u", limits.user]
    text, _ = _run(cmd, limits.timeout)
    return None if text is None else parse_squeue(text)


def room(limits: Limits) -> tuple[int | None, Limit | None, int | None]:
    """(jobs that may be queued now, the limit that binds, jobs of its kind queued now; None if
    squeue did not answer); (None, None, None) when no limit applies."""
    if not limits.limits:
        return None, None, None
    q = queued(limits)
    free, lim = limits.tightest(q)
    return free, lim, None if q is None or lim is None else sum(1 for j in q if lim.counts(j))


def wave_plan(cfg: dict, n_tasks: int) -> dict:
    """What a submission of ``n_tasks`` array tasks with launcher settings ``cfg`` would do now,
    for the dry run: {limit, source, read, in_use, free, waves: [tasks per wave], problem}."""
    limits = read_limits(cfg, timeout=DRY_TIMEOUT_S)
    free, lim, in_use = room(limits)
    doc = {
        "tasks": n_tasks,
        "limit": None if lim is None else lim.jobs,
        "source": None if lim is None else lim.source,
        "read": limits.read,
        "why": limits.why,
        "in_use": in_use,
        "free": free,
        "waves": [n_tasks] if n_tasks else [],
        "problem": None,
    }
    if lim is not None:
        try:
            doc["waves"] = check_room(n_tasks, free, lim, in_use)
        except WorkFailed as e:
            doc["waves"], doc["problem"] = [], str(e)
    return doc


def max_array_size(cfg: dict) -> int | None:
    """Tasks one job array may hold: ``launcher.max_array_size``, else the cluster's MaxArraySize
    (indices 0..MaxArraySize-1), else None (no limit known)."""
    if cfg.get("max_array_size"):
        return int(cfg["max_array_size"])
    try:
        out = _call(["scontrol", "show", "config"], timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


# ---------------------------------------------------------------------------
# job arrays through submitit
# ---------------------------------------------------------------------------

MAX_NUM_TIMEOUT = 1_000_000  # submitit's budget of time-limit requeues (default 3)


def _task_class():
    """``SweepTask``, made (and submitit imported) the first time it is asked for."""
    if "SweepTask" in globals():
        return globals()["SweepTask"]
    import submitit

    class SweepTask(submitit.helpers.Checkpointable):
        """Array task ``index`` of a submission: ``entry(tasks.json, index)`` (launch/task.py's
        ``array_task``: every run of the task).  The inherited ``checkpoint(index)`` resubmits this
        same call."""

        def __init__(self, tasks_file: str | os.PathLike, entry):
            self.tasks_file = str(tasks_file)
            self.entry = entry

        def __call__(self, index: int) -> dict:
            entry = getattr(self, "entry", None)
            if entry is None:  # pickled by a dw before the entry was handed over (a job queued then)
                entry = importlib.import_module("depthwidth.launch.task").array_task
            return entry(self.tasks_file, index)

    SweepTask.__qualname__ = "SweepTask"  # pickled by reference: depthwidth.launch.slurm.SweepTask
    globals()["SweepTask"] = SweepTask
    return SweepTask


def __getattr__(name: str):
    """``SweepTask`` is made on first use (PEP 562), so that importing this module imports no submitit."""
    if name == "SweepTask":
        return _task_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parameters(name: str, cfg: dict) -> dict:
    """SlurmExecutor.update_parameters(**this) from the launcher config."""
    gpn = int(cfg["gpus_per_node"])
    tpn = int(cfg["tasks_per_node"] or max(1, gpn))
    nodes = int(cfg["nodes"])
    setup = [
        "trap '' USR2  # USR2 is for the steps (python under srun); scancel --full/--batch must not kill this shell",
        *where_lines(),
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
        time=time_minutes(cfg["time"]),
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


def executor(name: str, folder: Path, cfg: dict):
    """A ``submitit.SlurmExecutor`` for the submission's folder."""
    if not available("sbatch", "srun"):
        raise BadInput("launcher=slurm but there is no sbatch/srun on PATH (use launcher=local or launcher=debug here)")
    import submitit

    ex = submitit.SlurmExecutor(
        folder=folder, max_num_timeout=MAX_NUM_TIMEOUT, python=shlex.quote(cfg["python"] or sys.executable)
    )
    try:
        ex.update_parameters(**parameters(name, cfg))
    except ValueError as e:
        raise BadInput(f"launcher=slurm: {' '.join(str(e).split())[:300]}") from None
    return ex


def submit_tasks(ex, tasks_file: Path, indices: list[int], cfg: dict, entry) -> list[str]:
    """Array tasks for the submission's tasks ``indices`` (as many arrays as MaxArraySize needs)
    -> their job ids, in order; WorkFailed (with those already queued cancelled) if sbatch refuses."""
    if not indices:
        return []
    import submitit

    size = max_array_size(cfg) or len(indices)
    task = _task_class()
    said = io.StringIO()  # submitit prints sbatch's stderr before raising: keep it for our one line
    ids: list[str] = []
    try:
        for a in range(0, len(indices), size):
            with contextlib.redirect_stderr(said):
                jobs = ex.map_array(task(Path(tasks_file).absolute(), entry), indices[a : a + size])
            ids += [j.job_id for j in jobs]
    except submitit.core.utils.FailedJobError as e:
        cancel(ids)  # earlier arrays are queued: cancel them, so that nothing runs unrecorded
        raise WorkFailed(f"sbatch failed: {' '.join((str(e) or said.getvalue()).split())[:400]}") from None
    except FileNotFoundError:
        raise BadInput("launcher=slurm but there is no sbatch on PATH") from None
    return ids
