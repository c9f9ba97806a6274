"""The backends a sweep's tasks run on, and the one registry of them: ``backend(name)``.

debug   in this process, one task after another, with a live progress display (debug.py);
        ``dw sweep`` blocks until they have run.
local   detached worker processes on this machine (workers.py starts them, local.py is one);
        ``dw sweep`` returns once they are started.
slurm   one SLURM job array per submission, through submitit (slurm.py: the only module that
        runs SLURM's commands); ``dw sweep`` returns once sbatch has answered.

Everything dw does differently per launcher is a method or an attribute of ``Backend`` here:
the launcher settings' checks and what they imply (device, processes, parallel tasks), the
submission, the scheduler's view of the jobs, and the controls (stop, cancel, requeue, hold,
release, a failed run's retry).  Code elsewhere asks ``backend(cfg["name"])``, or the backend of
the launcher a run's manifest records, and does not compare launcher names.

A task in a SLURM array is run by ``entry(tasks.json, i)`` in the job (launch/task.py's
``array_task``), a debug task by ``run_here`` in this process: the submission (launch/submit.py)
hands both over in its ``Job``, so that nothing here imports the task runner.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from depthwidth.config import schema
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput, WorkFailed, bad
from depthwidth.core.tables import plural
from depthwidth.launch import slurm, slurm_waves
from depthwidth.launch.scheduler import pid_alive, set_state, task_states
from depthwidth.launch.workers import restart_workers, spawn_workers, visible_gpus, worker_slots


@dataclass
class Job:
    """One submission's tasks, as a backend gets them (launch/submit.py builds it)."""

    name: str  # the sweep
    folder: Path  # runs/NAME/jobs/SUB
    tasks_file: Path  # its tasks.json
    sub: str  # the submission's id (SUB)
    n_tasks: int
    cfg: dict  # the launcher settings
    register: Callable[[list[str]], None]  # the manifest's submit events, once the job ids exist
    run_here: Callable[[list[str]], None]  # every task, in this process (debug)
    entry: Callable  # what a SLURM array task calls in the job: entry(tasks.json, index)


class Backend(Protocol):
    name: str
    # the scheduler requeues a task itself: a preempted run resumes on its own, a parked task is
    # requeued held (it exits as a preempted one), a failed run is retried by a requeue (SLURM)
    requeues: bool
    runs_here: bool  # the tasks run in the submitting process (dw sweep blocks until they have)

    def check(self, cfg: dict, need_scheduler: bool, check_gpus: bool) -> None:
        """Refuse settings this backend cannot run (BadInput), beyond the schema's checks."""

    def device(self, cfg: dict) -> str:
        """Where the runs will train: cuda | cpu."""

    def processes(self, cfg: dict) -> int:
        """Processes one run gets."""

    def parallel_tasks(self, cfg: dict) -> int:
        """Tasks it runs at once."""

    def submit(self, job: Job) -> list[str]:
        """Queue (or run) the job's tasks; their job ids, in task order (``job.register`` called with
        them before any task can start, or, for SLURM, once sbatch has answered)."""

    def limits(self, cfg: dict, n_tasks: int) -> dict | None:
        """The queue's limit for ``n_tasks`` tasks and the waves it makes (the dry run's); None: no queue."""

    # a cluster's scheduler: each task is a job of its own (a process start each), on nodes it
    # allocates, cut at a time limit per allocation; the follow-up is a job of its own too
    cluster: bool

    def time_limit_hours(self, cfg: dict) -> float | None:
        """The time limit of one allocation, in hours (whole minutes); None: no limit."""

    def allocation(self, cfg: dict, at_once: int, procs: int, cuda: bool) -> tuple[int, int, int]:
        """(GPUs a node, nodes, GPUs) that ``at_once`` tasks hold, for the dry run's schedule."""

    def cpu_reason(self, cfg: dict) -> str:
        """Why these settings plan the runs on the CPU (the setting to change), in a few words."""

    def schedule_line(self, sc: dict, when: str) -> str:
        """The dry run's schedule line for plan_costs.schedule's summary ``sc``."""

    def in_flight(self, name: str, job_ids: list[str], root=None) -> set[str]:
        """Those of ``job_ids`` queued or running (SchedulerUnknown: the scheduler cannot say)."""

    def describe(self, job_ids: list[str]) -> str:
        """The submitted tasks in words: ``one job array of 30 tasks``, ``30 local tasks``."""

    def waves(self, name: str, job_ids: list[str]) -> list[dict]:
        """The submissions among ``job_ids`` that went in as waves (launch/slurm_waves.py); [] here."""

    def runs_followup(self, submitted: bool) -> bool:
        """Whether ``dw sweep`` runs the follow-up (--then) itself, now: no job or worker will."""

    def states(self, name: str, job_ids: list[str], root=None, running: dict | None = None) -> dict:
        """Job id -> the scheduler's own state of each (raw); SchedulerUnknown if it cannot say."""

    def normal(self, raw: str | None) -> str | None:
        """A raw state as dw status counts it: pending | running | completed | failed | ... | None."""

    def stop(self, run: dict) -> tuple[bool, str]:
        """SIGINT to a running run (dw stop): (stopped, how); WorkFailed if it cannot be sent."""

    def cancel(self, job_ids: list[str]) -> None:
        """Cancel the jobs of ``job_ids`` (a submission that failed half-way)."""

    def hold(self, where: dict, who: str = "dw") -> None:
        """Park the task ``where`` ({launcher, job_id, tasks_file, index}) until it is released."""

    def release(self, where: dict, who: str = "dw") -> bool:
        """Let a parked task run again; False if the scheduler refused (release it later)."""

    def requeue(self, where: dict, who: str = "dw") -> bool:
        """Start the task ``where`` again (all its processes), as a release would."""

    def died_how(self, job_id: str) -> str:
        """How the previous attempt of ``job_id`` ended (NODE_FAIL, ...); "" when unknown."""

    def retry_later(self, job_id: str, delay_s: float, say, stopped) -> str:
        """After a failed attempt that is retried: ``now`` (train it again in this process),
        ``requeued`` (the task starts again later) or ``no`` (it cannot be)."""


@contextlib.contextmanager
def whole(d: Path):
    """A submission folder written whole or not at all: a write that fails (a full disk) removes the
    folder and says so in one line (exit 1), never a traceback or an empty ``jobs/SUB/``.  A manifest
    line cut short by it is skipped by every reader, and the next append starts on a new line."""
    try:
        yield
    except OSError as e:
        shutil.rmtree(d, ignore_errors=True)
        with contextlib.suppress(OSError):
            d.parent.rmdir()  # jobs/ itself, when this was to be its first submission
        raise WorkFailed(
            f"cannot write the submission in {d}: {e.strerror or e}; nothing was submitted "
            "(the same command submits once there is space)"
        ) from None


class _Here:
    """What debug and local share: the tasks run on this machine, their state in task files."""

    name = ""
    requeues = False
    cluster = False

    def time_limit_hours(self, cfg: dict) -> float | None:
        return None

    def allocation(self, cfg: dict, at_once: int, procs: int, cuda: bool) -> tuple[int, int, int]:
        return 0, 1, (at_once * procs if cuda else 0)

    def cpu_reason(self, cfg: dict) -> str:
        return "launcher.gpus=none" if cfg.get("gpus") == "none" else f"launcher={self.name} sees no GPU here"

    def in_flight(self, name: str, job_ids: list[str], root=None) -> set[str]:
        local = task_states(name, root)
        return {j for j in job_ids if local.get(j) in IN_FLIGHT}

    def waves(self, name: str, job_ids: list[str]) -> list[dict]:
        return []  # no scheduler limit on queued jobs here

    def check(self, cfg: dict, need_scheduler: bool, check_gpus: bool) -> None:
        pass

    def device(self, cfg: dict) -> str:
        return "cuda" if visible_gpus() else "cpu"

    def processes(self, cfg: dict) -> int:
        return 1

    def parallel_tasks(self, cfg: dict) -> int:
        return 1

    def submit(self, job: Job) -> list[str]:
        job_ids = [f"{self.name}-{job.sub}_{i}" for i in range(job.n_tasks)]
        with whole(job.folder):
            for i, j in enumerate(job_ids):
                write_json(job.folder / f"task-{i}.json", {"job_id": j, "index": i, "state": "queued"})
            job.register(job_ids)
        self.start(job, job_ids)
        return job_ids

    def start(self, job: Job, job_ids: list[str]) -> None:
        raise NotImplementedError

    def limits(self, cfg: dict, n_tasks: int) -> dict | None:
        return None

    def describe(self, job_ids: list[str]) -> str:
        n = len(job_ids)
        return f"{n} {self.name} task{'s' * (n != 1)}"

    def states(self, name: str, job_ids: list[str], root=None, running: dict | None = None) -> dict:
        return task_states(name, root, running)

    def normal(self, raw: str | None) -> str | None:
        return raw

    def stop(self, run: dict) -> tuple[bool, str]:
        pid, here = run.get("pid"), os.uname().nodename
        if run.get("host") not in (None, here):
            raise WorkFailed(
                f"run {run['run_id']} trains on host {run['host']} (pid {pid}), not here ({here}): run dw stop there"
            )
        if not pid or not pid_alive(pid):
            return False, "its process has just ended: nothing to stop"
        os.kill(int(pid), signal.SIGINT)
        return True, f"SIGINT to {run.get('worker') or 'its process'} (pid {pid})"

    def cancel(self, job_ids: list[str]) -> None:
        pass

    def hold(self, where: dict, who: str = "dw") -> None:
        set_state(Path(where["tasks_file"]).parent, int(where["index"]), state="parked", parked=time.time())

    def release(self, where: dict, who: str = "dw") -> bool:
        d, i = Path(where["tasks_file"]).parent, int(where["index"])
        set_state(d, i, state="queued", released=time.time())  # before the claim goes: a claimer's "running" wins
        (d / f"task-{i}.claim").unlink(missing_ok=True)
        return True

    def requeue(self, where: dict, who: str = "dw") -> bool:
        return self.release(where, who)

    def died_how(self, job_id: str) -> str:
        return ""

    def retry_later(self, job_id: str, delay_s: float, say, stopped) -> str:
        return "now"


class Debug(_Here):
    name = "debug"
    runs_here = True

    def schedule_line(self, sc: dict, when: str) -> str:
        return f"schedule: {plural(sc['tasks'], 'run')} one after another here (launcher=debug); {when}"

    def start(self, job: Job, job_ids: list[str]) -> None:
        job.run_here(job_ids)

    def runs_followup(self, submitted: bool) -> bool:
        return True


class Local(_Here):
    name = "local"
    runs_here = False

    def schedule_line(self, sc: dict, when: str) -> str:
        slots = "/".join(sorted({str(x["slots"]) for x in sc["groups"]}))
        what = f"{sc['gpus']} GPUs" if sc["gpus"] else "the CPU"
        return (
            f"schedule: {plural(sc['tasks'], 'task')} on {slots} local worker(s) here, at most "
            f"{sc['at_once']} at once on {what}; {when}"
        )

    def check(self, cfg: dict, need_scheduler: bool, check_gpus: bool) -> None:
        if int(cfg["workers"]) > schema.MAX_CPUS:  # before anything lists them
            allowed = f"an integer in [1, {schema.MAX_CPUS:,}] (CPU worker processes)"
            raise bad("launcher.workers", cfg["workers"], allowed)
        if check_gpus and cfg.get("gpus") == "auto" and int(cfg["gpus_per_run"]) > 1:
            n = len(visible_gpus())
            if n < int(cfg["gpus_per_run"]):
                raise bad("launcher.gpus_per_run", cfg["gpus_per_run"], f"at most the {n} visible GPUs")

    def device(self, cfg: dict) -> str:
        return "cpu" if cfg.get("gpus") == "none" else super().device(cfg)

    def processes(self, cfg: dict) -> int:
        return int(cfg["gpus_per_run"]) if self.device(cfg) == "cuda" else 1

    def parallel_tasks(self, cfg: dict) -> int:
        return max(1, len(worker_slots(cfg)))

    def start(self, job: Job, job_ids: list[str]) -> None:
        spawn_workers(job.folder, job.tasks_file, job.cfg)

    def runs_followup(self, submitted: bool) -> bool:
        return not submitted  # else the last worker to stop runs it

    def release(self, where: dict, who: str = "dw") -> bool:
        super().release(where, who)
        restart_workers(Path(where["tasks_file"]).parent, Path(where["tasks_file"]))
        return True

    def retry_later(self, job_id: str, delay_s: float, say, stopped) -> str:
        t_end = time.monotonic() + delay_s
        while time.monotonic() < t_end and not stopped():
            time.sleep(min(1.0, t_end - time.monotonic()))
        return "no" if stopped() else "now"


class Slurm:
    name = "slurm"
    requeues = True
    runs_here = False
    cluster = True

    def time_limit_hours(self, cfg: dict) -> float | None:
        return slurm.time_minutes(cfg["time"]) / 60.0

    def allocation(self, cfg: dict, at_once: int, procs: int, cuda: bool) -> tuple[int, int, int]:
        per_node, nodes = int(cfg["gpus_per_node"]), at_once * int(cfg["nodes"])
        return per_node, nodes, nodes * per_node

    def cpu_reason(self, cfg: dict) -> str:
        return "launcher.gpus_per_node=0"

    def schedule_line(self, sc: dict, when: str) -> str:
        g = sc["groups"]
        par = "/".join(sorted({str(x["slots"]) for x in g}))
        pack = "/".join(sorted({str(x["pack"]) for x in g}))
        mem = "/".join(sorted({f"{x['gpu_memory_gib']:g}" for x in g}))
        gpus = f", {sc['gpus']:,} GPUs of {mem} GiB" if sc["gpus"] else ""
        if sc["full_nodes"]:
            gpus += (
                f" (≥ {sc['full_nodes']:,} nodes of {sc['gpus_per_full_node']} GPUs where smaller tasks share nodes)"
            )
        return (
            f"schedule: {plural(sc['tasks'], 'array task')} in {plural(len(g), 'job array')} "
            f"(launcher.array_parallelism={par}, pack={pack}): at most {sc['at_once']:,} at once on "
            f"{plural(sc['nodes'], 'node')}{gpus}; {when}, requeue restarts, queue waits and checkpoint "
            "writes included (calendar per run, below)"
        )

    def waves(self, name: str, job_ids: list[str]) -> list[dict]:
        return slurm_waves.waves_of(name, job_ids)

    def in_flight(self, name: str, job_ids: list[str], root=None) -> set[str]:
        raw = slurm.slurm_states(job_ids) if job_ids else {}  # SchedulerUnknown: the caller decides
        states = {j: slurm.SLURM_STATES.get(v.split()[0] if v else "", None) for j, v in raw.items()}
        return {j for j in job_ids if states.get(j, "pending") in IN_FLIGHT}  # not listed yet: pending

    def check(self, cfg: dict, need_scheduler: bool, check_gpus: bool) -> None:
        gpn, tpn = int(cfg["gpus_per_node"]), cfg["tasks_per_node"]
        if gpn and tpn is not None and int(tpn) > gpn:  # a process per GPU, at most
            raise bad("launcher.tasks_per_node", tpn, f"at most launcher.gpus_per_node={gpn} (one process per GPU)")
        if need_scheduler and not slurm.available():
            raise BadInput("launcher=slurm but there is no sbatch on PATH (use launcher=local or launcher=debug here)")

    def device(self, cfg: dict) -> str:
        return "cuda" if int(cfg["gpus_per_node"]) > 0 else "cpu"

    def processes(self, cfg: dict) -> int:
        gpn = int(cfg["gpus_per_node"])
        return int(cfg["nodes"]) * int(cfg["tasks_per_node"] or max(1, gpn))

    def parallel_tasks(self, cfg: dict) -> int:
        return int(cfg["array_parallelism"])

    def submit(self, job: Job) -> list[str]:
        try:
            job_ids = slurm_waves.submit_array(job.name, job.folder, job.tasks_file, job.n_tasks, job.cfg, job.entry)
        except BaseException:
            shutil.rmtree(job.folder, ignore_errors=True)  # nothing was queued: leave no half submission
            raise
        job.register(job_ids)
        return job_ids

    def limits(self, cfg: dict, n_tasks: int) -> dict | None:
        return slurm.wave_plan(cfg, n_tasks)

    def describe(self, job_ids: list[str]) -> str:
        n, arrays = len(job_ids), len({j.split("_")[0] for j in job_ids})  # several when the cluster caps an array
        return f"{'one job array' if arrays == 1 else f'{arrays} job arrays'} of {n} task{'s' * (n != 1)}"

    def runs_followup(self, submitted: bool) -> bool:
        return False  # its own job does

    def states(self, name: str, job_ids: list[str], root=None, running: dict | None = None) -> dict:
        return slurm.slurm_states(job_ids) if job_ids else {}

    def normal(self, raw: str | None) -> str | None:
        return slurm.SLURM_STATES.get(raw) if raw else None

    def stop(self, run: dict) -> tuple[bool, str]:
        if (said := slurm.signal_job(str(run["job_id"]), "INT")) is not None:
            raise WorkFailed(f"scancel --signal=INT {run['job_id']} failed: {said}")
        return True, f"SIGINT to job {run['job_id']} (scancel --signal=INT)"

    def cancel(self, job_ids: list[str]) -> None:
        slurm.cancel(job_ids)

    def hold(self, where: dict, who: str = "dw") -> None:
        slurm.scontrol("requeuehold", where["job_id"], tries=3, who=who)

    def release(self, where: dict, who: str = "dw") -> bool:
        return slurm.scontrol("release", where["job_id"], tries=3, who=who)

    def requeue(self, where: dict, who: str = "dw") -> bool:
        return slurm.scontrol("requeue", where["job_id"], tries=3, who=who)

    def died_how(self, job_id: str) -> str:
        return slurm.died_how(job_id)

    def retry_later(self, job_id: str, delay_s: float, say, stopped) -> str:
        return "requeued" if slurm.requeue_later(job_id, delay_s, say) else "no"


IN_FLIGHT = ("pending", "running", "preempted")


BACKENDS: dict[str, Backend] = {b.name: b for b in (Debug(), Local(), Slurm())}


def backend(name: str | None) -> Backend:
    """The backend of launcher ``name``.  A name no backend has (the runs ``dw simulate`` planted, a
    record without one) gets debug's: task state files on this machine, no scheduler."""
    return BACKENDS.get(name or "", BACKENDS["debug"])
