"""launcher=debug: every task in this process, one after another, with a live progress bar.

Ctrl-C: the run that trains finishes its step, checkpoints and ends ``preempted``;
the tasks not yet run are ``cancelled``; ``dw sweep`` says so in one line and exits 3
(``Interrupted``), and ``dw sweep NAME --retry-failed`` resumes them.  A second Ctrl-C
within a few seconds exits at once (train/signals.py)."""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.launch import retry
from depthwidth.launch.halving import EXIT_PARKED
from depthwidth.launch.task import EXIT_PREEMPTED, ended, run_items, set_state
from depthwidth.train.signals import BEFORE_HARD_EXIT, Interrupted, give_terminal_back, interrupted_line


def run_debug(name: str, d: Path, tasks_file: Path, tasks: list, job_ids: list, *, show=None) -> None:
    """In-process: each task in turn, with a live progress bar (blocks)."""
    import threading

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    n_runs = sum(len(t) for t in tasks)
    lines: list = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=show,
        transient=False,
    ) as prog:
        overall = prog.add_task(f"sweep {name}", total=n_runs)
        cur = prog.add_task("", total=1, visible=False)
        halt = threading.Event()
        watch: dict = {}

        def poll():
            while not halt.wait(0.3):
                it = watch.get("it")
                if it is None:
                    continue
                last = store.last_jsonl(Path(it["run_dir"]) / "metrics.jsonl")
                tot = it.get("tokens_total") or 1
                if last and last.get("tokens") is not None:
                    loss = last.get("loss")
                    prog.update(
                        cur,
                        completed=min(last["tokens"], tot),
                        total=tot,
                        description=f"  run {it['run_id']}" + (f"  loss {loss:.3f}" if loss is not None else ""),
                    )

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        hook = _terminal_hook(prog.console)
        BEFORE_HARD_EXIT.extend([hook] if hook else [])
        stopped: list = []  # (run, Preempted) of a run a signal stopped
        i = 0
        queue, ran = list(range(len(tasks))), set()
        pol = retry.policy(json.loads(Path(tasks_file).read_text()))
        try:
            while queue:
                i = queue.pop(0)
                t = tasks[i]
                if i in ran:  # handed back (a parked run released): its runs count again
                    prog.update(overall, total=prog.tasks[overall].total + len(t))
                set_state(d, i, state="running", pid=os.getpid(), started=time.time())
                rc = 0
                for k, it in enumerate(t):
                    watch["it"] = it
                    prog.update(
                        cur,
                        completed=0,
                        total=it.get("tokens_total") or 1,
                        visible=True,
                        description=f"  run {it['run_id']}",
                    )
                    r = run_items(
                        name,
                        [it],
                        job_ids[i],
                        log=lines.append,
                        in_process=True,
                        on_preempt=lambda run, e: stopped.append((run, e)),
                        where={
                            "launcher": "debug",
                            "job_id": job_ids[i],
                            "tasks_file": str(tasks_file),
                            "index": i,
                            "retry": pol,
                        },
                    )
                    rc = r if r else rc
                    prog.advance(overall)
                    if r == EXIT_PREEMPTED:
                        break
                if rc != EXIT_PARKED:  # a parked task's state is its group's to set (halving.py)
                    ended(d, i, rc)
                if rc == EXIT_PREEMPTED:
                    break
                ran.add(i)
                queue += [j for j in sorted(ran) if j not in queue and _handed_back(d, j)]
        except KeyboardInterrupt:  # Ctrl-C between two runs: nothing is lost; the task is not finished
            set_state(d, i, state="cancelled", ended=time.time())
            _cancel(d, i + 1, len(tasks))
            raise
        finally:
            halt.set()
            th.join(timeout=1)
            prog.update(cur, visible=False)
            if hook in BEFORE_HARD_EXIT:
                BEFORE_HARD_EXIT.remove(hook)
    if stopped:
        _cancel(d, i + 1, len(tasks))
    if stopped and stopped[-1][1].signal == "SIGINT":
        run, e = stopped[-1]
        rest = sum(len(t) for t in tasks[i + 1 :])  # never started in this submission: cancelled, resumed alike
        also = f" (and the {rest} run{'s' * (rest != 1)} not started, cancelled)" if rest else ""
        raise Interrupted(
            interrupted_line(e.step, e.where, f"dw sweep {name} --retry-failed resumes it{also}", run=run["run_id"]),
            EXIT_PREEMPTED,
        )


def _terminal_hook(console):
    """What gives the terminal back if a second Ctrl-C ends the process under the live display."""
    try:
        return functools.partial(give_terminal_back, console.file.fileno()) if console.is_terminal else None
    except (AttributeError, OSError, ValueError):  # a console on a file without a descriptor
        return None


def _handed_back(d: Path, index: int) -> bool:
    """Whether task ``index``, run before, is queued again (successive halving released its run)."""
    return (store.read_json(d / f"task-{index}.json") or {}).get("state") == "queued"


def _cancel(d: Path, start: int, stop: int) -> None:
    """Tasks ``start..stop-1`` will not run in this submission (a stop signal): ``cancelled``, not lost."""
    for j in range(start, stop):
        set_state(d, j, state="cancelled", ended=time.time())
