"""launcher=local: starting the worker processes (local.py is the worker itself).

One worker per group of ``gpus_per_run`` visible GPUs (each with its own
``CUDA_VISIBLE_DEVICES``), else ``workers`` CPU workers; each is started
detached (its own session), logs to ``worker-SLOT.log`` and is recorded in
``worker-SLOT.json`` with its slot's environment, so that a slot whose worker
has exited can be started again (successive halving hands a parked task back).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.launch.scheduler import pid_alive


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


SLOT_ENV = ("CUDA_VISIBLE_DEVICES", "DW_GPUS_PER_RUN")  # what one worker slot's environment sets


def spawn_workers(d: Path, tasks_file: Path, cfg: dict) -> None:
    for slot, extra in enumerate(worker_slots(cfg)):
        _spawn(d, tasks_file, slot, extra, _python(cfg))


def _spawn(d: Path, tasks_file: Path, slot: int, extra: dict, python: str) -> None:
    env = _env_pythonpath({**os.environ, **extra, "DW_RUNS": str(store.runs_root().absolute())})
    log = open(d / f"worker-{slot}.log", "ab")
    p = subprocess.Popen(
        [python, "-m", "depthwidth.launch", "worker", str(tasks_file), str(slot)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    log.close()
    write_json(d / f"worker-{slot}.json", {"pid": p.pid, "slot": slot, "state": "running", "python": python, **extra})


def restart_workers(d: Path, tasks_file: Path) -> None:
    """Start again every worker slot of submission ``d`` whose process has exited (a task was handed
    back to the workers: successive halving's release), with the slot's own environment."""
    with store.FileLock(d / ".workers.lock"):  # two releases at once start one worker per slot
        for p in sorted(d.glob("worker-*.json")):
            w = store.read_json(p) or {}
            if "slot" in w and not (w.get("state") == "running" and pid_alive(w.get("pid"))):
                extra = {k: w[k] for k in SLOT_ENV if k in w}
                _spawn(d, tasks_file, int(w["slot"]), extra, w.get("python") or sys.executable)
