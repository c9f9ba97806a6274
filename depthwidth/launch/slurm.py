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

Waves: a submission larger than the scheduler's limit on queued jobs leaves room for
(launch/limits.py) goes in as waves; the first now, with a wave job behind it
(``--dependency=afterany``) that submits the next wave when it has ended (``next_wave``, run as
``python -m depthwidth.launch.waves``), and so on.  docs/slurm.md says why, and how a broken
chain is resumed (``--retry-failed``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import submitit

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.launch import sbatch
from depthwidth.launch.sbatch import cpu_job, where_lines
from depthwidth.launch.limits import WAVE_JOB, check_room, cut, halving_groups, largest_group, read_limits, room
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
    records them all, so ``dw status`` and ``--retry-failed`` see one sweep.

    Waves: when a limit on queued jobs (launch/limits.py) leaves room for fewer than ``n_tasks``
    jobs, only the first wave goes in now, with one wave job (``--dependency=afterany`` on that
    wave) that submits the next wave once it has ended (``next_wave``), and so on.  The tasks of
    later waves get the wave job's id: their runs are ``pending`` on it in ``dw status``."""
    ex = executor(name, d / "submitit", cfg)
    free, lim, in_use = room(read_limits(cfg))
    sizes = [n_tasks] if lim is None else check_room(n_tasks, free, lim, in_use)
    if len(sizes) > 1:  # a halving group goes in whole (limits.cut): one wave must be able to hold it
        groups = halving_groups(json.loads(Path(tasks_file).read_text())["tasks"])
        if (g := largest_group(groups)) > lim.jobs - 2:
            raise BadInput(
                f"a halving tuning group of {g} runs cannot go in one wave under the limit of {lim.jobs} queued "
                f"jobs ({lim.source}: at most {lim.jobs - 2} tasks per wave beside {WAVE_JOB}s); fewer tuned values"
            )
        sizes[0] = cut(groups, sizes[0])
    ids = submit_tasks(ex, tasks_file, list(range(sizes[0])), cfg)  # none: no room but for the wave job
    if len(sizes) == 1:
        return ids
    doc = {"sweep": name, "launcher": cfg, "limit": lim.jobs, "source": lim.source, "in_use": in_use, "tasks": n_tasks}
    doc.update(planned=sizes, waves=[])
    write_json(d / WAVES, doc)  # before the wave job exists: it reads this
    try:
        nxt = submit_wave_job(name, d, cfg, after=ids, begin_s=0 if ids else RETRY_S)
    except (WorkFailed, BadInput):
        _cancel(ids)  # the first wave without the job that carries on: nothing half-submitted
        raise
    _record(d, doc, len(ids), ids, nxt, free)
    return ids + [nxt] * (n_tasks - sizes[0])


def submit_tasks(ex, tasks_file: Path, indices: list[int], cfg: dict) -> list[str]:
    """Array tasks for the submission's tasks ``indices`` (as many arrays as MaxArraySize needs)
    -> their job ids, in order; WorkFailed (with those already queued cancelled) if sbatch refuses."""
    if not indices:
        return []
    size = max_array_size(cfg) or len(indices)
    said = io.StringIO()  # submitit prints sbatch's stderr before raising: keep it for our one line
    ids: list[str] = []
    try:
        for a in range(0, len(indices), size):
            with contextlib.redirect_stderr(said):
                jobs = ex.map_array(SweepTask(Path(tasks_file).absolute()), indices[a : a + size])
            ids += [j.job_id for j in jobs]
    except submitit.core.utils.FailedJobError as e:
        _cancel(ids)  # earlier arrays are queued: cancel them, so that nothing runs unrecorded
        raise WorkFailed(f"sbatch failed: {' '.join((str(e) or said.getvalue()).split())[:400]}") from None
    except FileNotFoundError:
        raise BadInput("launcher=slurm but there is no sbatch on PATH") from None
    return ids


def _cancel(ids: list[str]) -> None:
    if ids:
        subprocess.run(["scancel", *sorted({i.split("_")[0] for i in ids})], capture_output=True, timeout=60)


# ---------------------------------------------------------------------------
# waves: the job that submits the next one (docs/slurm.md, "Waves")
# ---------------------------------------------------------------------------

WAVES = "waves.json"  # in the submission's folder: its launcher settings, the limit, every wave so far
WAVE_SCRIPT = "wave.sh"
WAVE_MINUTES = 15  # the wave job's --time
RETRY_S = 15  # a wave job that finds no room waits this long before it looks again (squeue)
WAIT_S = (WAVE_MINUTES - 3) * 60  # ... for at most this long, then leaves it to a successor


def wave_script(name: str, d: Path, cfg: dict) -> Path:
    """The wave job's sbatch file: one CPU on one node, the runs' partition/account/QOS (its slot
    counts against the same limits), no requeue (a rerun must not submit a wave twice)."""
    return cpu_job(
        d / WAVE_SCRIPT,
        cfg,
        opts=[
            f"--job-name={cfg['job_name'] or f'dw-{name}'}-waves",
            f"--output={d.absolute()}/wave-%j.out",
            f"--time={WAVE_MINUTES}",
            "--no-requeue",
        ],
        comment=f"dw's wave job: submits the next wave of {d.name}'s array tasks when the last one has ended",
        module="depthwidth.launch.waves",
        args=[str(d.absolute())],
    )


def submit_wave_job(name: str, d: Path, cfg: dict, *, after: list[str] | None = None, begin_s: int = 0) -> str:
    """sbatch the wave job of submission ``d``: ``afterany`` the arrays of job ids ``after`` (all
    their tasks ended, whatever their state), or ``begin_s`` seconds from now; -> its job id."""
    script = d / WAVE_SCRIPT
    if not script.is_file():
        wave_script(name, d, cfg)
    opts = []
    if after:
        opts.append("--dependency=afterany:" + ":".join(sorted({j.split("_")[0] for j in after}, key=int)))
    if begin_s:
        opts.append(f"--begin=now+{int(begin_s)}")
    return sbatch.submit(script, WAVE_JOB, *opts)


def _record(d: Path, doc: dict, n: int, ids: list[str], nxt: str | None, free: int | None) -> None:
    doc["waves"].append(
        {
            "wave": len(doc["waves"]) + 1,
            "tasks": n,
            "arrays": sorted({j.split("_")[0] for j in ids}),
            "wave_job": nxt,
            "room": free,
            "time": round(time.time(), 3),
        }
    )
    write_json(d / WAVES, doc)


def _assigned(events: list[dict], event: str) -> dict[str, dict]:
    """run id -> its latest ``event`` (submit, eval_submit) event; a forgotten run has none."""
    latest: dict[str, dict] = {}
    for e in events:
        if e.get("run_id") and e.get("event") == event:
            latest[e["run_id"]] = e
        elif e.get("run_id") and e.get("event") == "forget" and event == "submit":
            latest.pop(e["run_id"], None)
    return latest


def _again(e: dict, job_id: str) -> dict:
    """A run's submit event once more, as the first submission wrote it, with its new job id."""
    return {**{k: v for k, v in e.items() if k != "time"}, "job_id": job_id}


def next_wave(d: Path, me: str, log=print) -> int:
    """The wave job ``me`` of submission ``d`` (``python -m depthwidth.launch.waves DIR``): submit
    the next wave of the tasks whose runs the manifest still gives to ``me``, and, if tasks remain,
    the next wave job; record both in the manifest as the first submission does.  The manifest is
    the one record of what is left: a run forgotten, or resubmitted by hand, since is not
    submitted again.  0 ok; 1 if the chain stops here (its runs then end ``failed`` with this job:
    ``--retry-failed`` submits them)."""
    d = Path(d).absolute()
    tasks_doc = json.loads((d / "tasks.json").read_text())
    doc = store.read_json(d / WAVES)
    if doc is None:
        log(f"no readable {d / WAVES}: nothing submitted")
        return 1
    name, cfg, tasks = tasks_doc["sweep"], doc["launcher"], tasks_doc["tasks"]
    kind = tasks_doc.get("kind", "train")
    event = "submit" if kind == "train" else f"{kind}_submit"
    redo = f"dw sweep {name} --retry-failed" if kind == "train" else f"dw {kind} {name} again"
    t0, limits = time.monotonic(), read_limits(cfg)  # sacctmgr once; squeue at each look
    while True:
        with store.SweepLock(name):  # never while waiting: dw sweep/forget on this sweep go on meanwhile
            latest = _assigned(store.read_manifest(name), event)
            mine = [
                i for i, t in enumerate(tasks) if t and all(latest.get(r["run_id"], {}).get("job_id") == me for r in t)
            ]
            if not mine:
                log(f"{WAVE_JOB} {me}: no task of {d.name} is left to it (all submitted, forgotten or resubmitted)")
                return 0
            free, lim, in_use = room(limits)
            w = len(mine) if free is None or len(mine) <= free else max(0, free - 1)
            w = cut(halving_groups([tasks[i] for i in mine]), w)  # a halving group goes in whole
            if w or time.monotonic() - t0 >= WAIT_S:
                return _wave(name, d, cfg, doc, tasks, mine, w, latest, free, event, redo, log)
        log(f"{WAVE_JOB} {me}: no room ({in_use} of {lim.jobs} queued, {lim.source}); looking again in {RETRY_S} s")
        time.sleep(RETRY_S)


def _wave(name, d, cfg, doc, tasks, mine, w, latest, free, event, redo, log) -> int:
    ids: list[str] = []
    if w:
        try:
            ids = submit_tasks(executor(name, d / "submitit", cfg), d / "tasks.json", mine[:w], cfg)
        except WorkFailed as e:  # the queue filled up meanwhile: a successor tries again later
            log(f"wave of {w} tasks not submitted: {e}")
            w = 0
    rows = [_again(latest[r["run_id"]], j) for i, j in zip(mine[:w], ids) for r in tasks[i]]
    if rows:
        store.append_events(name, rows)  # at once: these jobs exist whatever happens next
    rest, nxt = mine[w:], None
    if rest:
        try:
            nxt = submit_wave_job(name, d, cfg, after=ids, begin_s=0 if ids else RETRY_S)
        except (WorkFailed, BadInput) as e:
            _record(d, doc, w, ids, None, free)
            log(f"{e}; the {len(rest)} task(s) left stay with this job, which ends failed: {redo} submits them")
            return 1
        store.append_events(name, [_again(latest[r["run_id"]], nxt) for i in rest for r in tasks[i]])
    _record(d, doc, w, ids, nxt, free)
    log(
        f"wave {len(doc['waves'])}: {w} task(s) as {' '.join(sorted({j.split('_')[0] for j in ids})) or 'nothing'}"
        + (f"; {len(rest)} left for {WAVE_JOB} {nxt}" if rest else "; none left")
    )
    return 0


def waves_of(name: str, job_ids) -> list[dict]:
    """The waves of the submissions of sweep ``name`` whose first wave job is among ``job_ids``."""
    ids, out = set(job_ids), []
    for p in sorted(store.jobs_dir(name).glob(f"*/{WAVES}")):
        doc = store.read_json(p) or {}
        first = (doc.get("waves") or [{}])[0]
        if first.get("wave_job") in ids:
            out.append({k: doc.get(k) for k in ("limit", "source", "in_use", "tasks", "planned")} | {"first": first})
    return out
