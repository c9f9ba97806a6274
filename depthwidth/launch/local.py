"""launcher=local: the worker, a detached process on this machine (workers.py starts them).

One worker per visible GPU (each with its own ``CUDA_VISIBLE_DEVICES``) or
``workers`` CPU workers; each claims whole tasks with an O_EXCL claim file and
runs them (``python -m depthwidth.launch worker TASKS.json SLOT``), so every
task is run by exactly one worker.

SIGINT to a worker while it trains (``kill -INT PID``, ``dw stop NAME RUN_ID``; the PID is in
``dw status``): that run finishes its step, checkpoints and ends ``preempted`` (train's own
handler; a torchrun of several GPUs gets the signal passed on), and the worker goes on to its next
task.  SIGTERM (or SIGINT while it waits between tasks) stops the worker: the run it trains
checkpoints and ends ``preempted`` and the worker claims no further task.  ``dw sweep NAME
--retry-failed`` resumes a preempted run from its checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.launch import followup
from depthwidth.launch.halving import EXIT_PARKED
from depthwidth.launch.task import EXIT_PREEMPTED, ended, run_task, set_state
from depthwidth.train.dist import free_port

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


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
        while "sig" not in stop:
            i = _claim(d, len(doc["tasks"]))
            if i is None:
                with store.FileLock(d / ".workers.lock"):  # no task handed back between the look and the exit
                    i = _claim(d, len(doc["tasks"]))
                    if i is None:
                        write_json(me, {**(store.read_json(me) or {}), "state": "exited"})
                        break
            set_state(d, i, state="running", pid=os.getpid(), slot=slot, started=time.time())
            stop.pop("run", None)
            stop["training"] = True
            try:
                rc = _run(tf, i, stop)
            finally:
                stop.pop("training", None)
            if rc != EXIT_PARKED and _still_mine(d, i):  # a parked task's state is its group's to set (halving.py)
                try:
                    ended(d, i, rc)
                except OSError as e:  # a full disk: the run's own record says how it ended; go on
                    print(f"worker {slot}: task {i}'s state could not be written: {e.strerror or e}", flush=True)
            if rc == EXIT_PREEMPTED and ("sig" in stop or stop.get("run") != "SIGINT"):
                break
            if rc == EXIT_PREEMPTED:  # one run's Ctrl-C: that run stopped, the worker goes on
                print(f"worker {slot}: task {i} stopped by SIGINT; going on to the next task", flush=True)
    finally:
        try:
            write_json(me, {**(store.read_json(me) or {}), "state": "exited"})
        except OSError as e:  # a full disk: its process is gone either way (dw status checks the pid)
            print(f"worker {slot}: its state could not be written: {e.strerror or e}", flush=True)
    if doc.get("kind", "train") == "train" and "sig" not in stop:  # the last worker to stop runs --then's follow-up
        rec = followup.record(doc["sweep"])
        if rec is not None and rec.get("launcher") == doc["launcher"]:  # armed for the workers
            followup.run(doc["sweep"], log=lambda m: print(m, flush=True))
    return 0


def _still_mine(d: Path, i: int) -> bool:
    """Whether task ``i`` is still this worker's (not handed back and claimed by another meanwhile)."""
    return (store.read_json(d / f"task-{i}.json") or {}).get("pid") == os.getpid()


def _claim(d: Path, n: int) -> int | None:
    """The first task of the ``n`` nobody has claimed, now claimed by this worker (O_EXCL), or None.
    Asked again after every task: one handed back (a parked run released) is claimed anew."""
    for i in range(n):
        try:
            fd = os.open(d / f"task-{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return i
    return None


def _stop(stop: dict, sig: int) -> None:
    """A stop signal reached the worker (its own handler: between tasks, or while a torchrun child
    trains): SIGINT while a run trains stops that run only (passed on to the child); else no further task."""
    child = stop.get("child")
    if sig == signal.SIGINT and stop.get("training"):
        stop["run"] = "SIGINT"
    else:
        stop.setdefault("sig", sig)
    if child is not None and child.poll() is None:
        child.send_signal(sig)


def _run(tasks_file: Path, index: int, stop: dict) -> int:
    """Task ``index`` on this worker's GPUs: in this process, or as one torchrun of G processes."""
    g = int(os.environ.get("DW_GPUS_PER_RUN", "1"))
    if g <= 1:  # train()'s own handler takes the signals while the run trains; on_preempt says which
        return run_task(
            tasks_file,
            index,
            log=lambda m: print(m, flush=True),
            in_process=True,
            stopped=lambda: "sig" in stop,
            on_preempt=lambda it, e: stop.update(run=e.signal),
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
    if "sig" in stop or "run" in stop:  # it came while the child started
        child.send_signal(stop.get("sig") or signal.SIGINT)
    try:
        rc = child.wait()
    finally:
        stop.pop("child", None)
    # torchrun reports its ranks' exit 3 (or 4) as a failure of its own: the summaries say what happened
    t = store.read_json(Path(tasks_file).parent / f"task-{index}.json") or {}
    if rc and (t.get("parked") or 0) >= (t.get("started") or 0) > 0:  # parked by its run (halving.py)
        return EXIT_PARKED
    got = _statuses(tasks_file, index) if rc else set()
    asked = "sig" in stop or "run" in stop
    return EXIT_PREEMPTED if rc and asked and "preempted" in got and not {"failed", "diverged"} & got else rc


def _statuses(tasks_file: Path, index: int) -> set:
    """The summary statuses of task ``index``'s runs."""
    runs = json.loads(Path(tasks_file).read_text())["tasks"][index]
    return {(store.read_json(Path(it["run_dir"]) / "summary.json") or {}).get("status") for it in runs}
