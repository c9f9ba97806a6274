"""launcher=local: detached worker processes on this machine.

One worker per visible GPU (each with its own ``CUDA_VISIBLE_DEVICES``) or
``workers`` CPU workers; each claims whole tasks with an O_EXCL claim file and
runs them (``python -m depthwidth.launch worker TASKS.json SLOT``), so every
task is run by exactly one worker.
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


def _python(cfg: dict) -> str:
    return cfg.get("python") or sys.executable


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


def spawn_workers(d: Path, tasks_file: Path, cfg: dict) -> None:
    gpus = visible_gpus() if cfg.get("gpus", "auto") == "auto" else []
    slots = [{"CUDA_VISIBLE_DEVICES": g} for g in gpus] or [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(int(cfg["workers"]))]
    for slot, extra in enumerate(slots):
        env = _env_pythonpath({**os.environ, **extra, "DW_RUNS": str(store.runs_root().absolute())})
        log = open(d / f"worker-{slot}.log", "ab")
        p = subprocess.Popen(
            [_python(cfg), "-m", "depthwidth.launch", "worker", str(tasks_file), str(slot)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, close_fds=True,
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
    signal.signal(signal.SIGTERM, lambda s, f: stop.setdefault("sig", s))
    try:
        for i in range(len(doc["tasks"])):
            if stop:
                break
            try:
                fd = os.open(d / f"task-{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            set_state(d, i, state="running", pid=os.getpid(), slot=slot, started=time.time())
            rc = run_task(tf, i, log=lambda m: print(m, flush=True), in_process=True)
            ended(d, i, rc)
            if rc == EXIT_PREEMPTED:
                break
    finally:
        write_json(me, {**(store.read_json(me) or {}), "state": "exited"})
    return 0
