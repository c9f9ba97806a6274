"""launcher=local: detached worker processes on this machine.

One worker per visible GPU (each with its own ``CUDA_VISIBLE_DEVICES``) or
``workers`` CPU workers; each claims whole tasks with an O_EXCL claim file and
runs them (``python -m depthwidth.launch worker TASKS.json SLOT``), so every
task is run by exactly one worker.

SIGTERM or SIGINT to a worker (``kill -INT PID``): the run it trains finishes
its step, checkpoints and ends ``preempted`` (train's own handler; a torchrun of
several GPUs gets the signal passed on), and the worker claims no further task.
``dw sweep NAME --retry-failed`` resumes the run from its checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.launch.task import EXIT_PREEMPTED, ended, run_task, set_state
from depthwidth.train.dist import free_port

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _python(cfg: dict) -> str:
    return cfg["python"] or sys.executable


def _env_pythonpath(env: dict) -> dict:
    repo = str(Path(__file__).resolve().parents[2])
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = repo + (os.pathsep + pp if pp else "")
    return env


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without importing torch."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, ln in enumerate(out.splitlines()) if ln.startswith("GPU ")]


def gpu_slots(gpus: list[str], per_run: int) -> list[dict]:
    """One worker per group of ``per_run`` visible GPUs (a remainder too small for a run stays idle)."""
    return [
        {"CUDA_VISIBLE_DEVICES": ",".join(gpus[i : i + per_run]), "DW_GPUS_PER_RUN": str(per_run)}
        for i in range(0, len(gpus) - per_run + 1, per_run)
    ]


def worker_slots(cfg: dict) -> list[dict]:
    """Each worker's own environment: one per group of ``gpus_per_run`` visible GPUs, else
    ``workers`` CPU workers (the dry run's schedule counts these too)."""
    gpus = visible_gpus() if cfg["gpus"] == "auto" else []
    return gpu_slots(gpus, int(cfg["gpus_per_run"])) or [
        {"CUDA_VISIBLE_DEVICES": ""} for _ in range(int(cfg["workers"]))
    ]


def spawn_workers(d: Path, tasks_file: Path, cfg: dict) -> None:
    for slot, extra in enumerate(worker_slots(cfg)):
        env = _env_pythonpath({**os.environ, **extra, "DW_RUNS": str(store.runs_root().absolute())})
        log = open(d / f"worker-{slot}.log", "ab")
        p = subprocess.Popen(
            [_python(cfg), "-m", "depthwidth.launch", "worker", str(tasks_file), str(slot)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        log.close()
        write_json(d / f"worker-{slot}.json", {"pid": p.pid, "slot": slot, "state": "running", **extra})


def worker(tasks_file: str | os.PathLike, slot: int) -> int:
    """A local worker: claim tasks one at a time (O_EXCL claim files) and run them."""
    tf = Path(tasks_file)
    d = tf.parent
    doc = json.loads(tf.read_text())
    me = d / f"worker-{slot}.json"
    write_json(me, {**(store.read_json(me) or {}), "pid": os.getpid(), "slot": slot, "state": "running"})
    stop: dict = {}
    for sig in STOP_SIGNALS:  # between runs; while one trains, train()'s handler has these
        signal.signal(sig, lambda s, f: _stop(stop, s))
    try:
        for i in range(len(doc["tasks"])):
            if "sig" in stop:
                break
            try:
                fd = os.open(d / f"task-{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            set_state(d, i, state="running", pid=os.getpid(), slot=slot, started=time.time())
            rc = _run(tf, i, stop)
            ended(d, i, rc)
            if rc == EXIT_PREEMPTED:
                break
    finally:
        write_json(me, {**(store.read_json(me) or {}), "state": "exited"})
    return 0


def _stop(stop: dict, sig: int) -> None:
    """A stop signal reached the worker: no further task; a torchrun child gets it passed on."""
    stop.setdefault("sig", sig)
    child = stop.get("child")
    if child is not None and child.poll() is None:
        child.send_signal(sig)


def _run(tasks_file: Path, index: int, stop: dict) -> int:
    """Task ``index`` on this worker's GPUs: in this process, or as one torchrun of G processes."""
    g = int(os.environ.get("DW_GPUS_PER_RUN", "1"))
    if g <= 1:
        return run_task(
            tasks_file, index, log=lambda m: print(m, flush=True), in_process=True, stopped=lambda: "sig" in stop
        )
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={g}",
        f"--master_port={free_port()}",
        "-m",
        "depthwidth.launch",
        "task",
        str(tasks_file),
        str(index),
    ]
    stop["child"] = child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    if "sig" in stop:  # it came while the child started
        child.send_signal(stop["sig"])
    try:
        rc = child.wait()
    finally:
        stop.pop("child", None)
    # torchrun reports its ranks' exit 3 as a failure of its own: the summaries say what happened
    return EXIT_PREEMPTED if rc and "sig" in stop and _preempted(tasks_file, index) else rc


def _preempted(tasks_file: Path, index: int) -> bool:
    """Whether a run of task ``index`` ended ``preempted`` (and none failed)."""
    runs = json.loads(Path(tasks_file).read_text())["tasks"][index]
    got = [(store.read_json(Path(it["run_dir"]) / "summary.json") or {}).get("status") for it in runs]
    return "preempted" in got and not {"failed", "diverged"} & set(got)
