"""launcher=debug: every task in this process, one after another, with a live progress bar."""

from __future__ import annotations

import os
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.launch.task import EXIT_PREEMPTED, ended, run_items, set_state


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
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=show, transient=False) as prog:
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
                    prog.update(cur, completed=min(last["tokens"], tot), total=tot,
                                description=f"  run {it['run_id']}" + (f"  loss {loss:.3f}" if loss is not None else ""))

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        try:
            for i, t in enumerate(tasks):
                set_state(d, i, state="running", pid=os.getpid(), started=time.time())
                rc = 0
                for k, it in enumerate(t):
                    watch["it"] = it
                    prog.update(cur, completed=0, total=it.get("tokens_total") or 1, visible=True,
                                description=f"  run {it['run_id']}")
                    r = run_items(name, [it], job_ids[i], log=lines.append, in_process=True)
                    rc = r if r else rc
                    prog.advance(overall)
                    if r == EXIT_PREEMPTED:
                        break
                ended(d, i, rc)
                if rc == EXIT_PREEMPTED:
                    break
        finally:
            halt.set()
            th.join(timeout=1)
            prog.update(cur, visible=False)
