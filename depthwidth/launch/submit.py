"""How a sweep's runs become jobs: ``submit(name, items, launcher_cfg)``, through the launcher's
backend (backend.py):

debug   in-process, one run after another, with a live progress display (debug.py).
local   detached worker processes on this machine (local.py): one per visible
        GPU, each with its own CUDA_VISIBLE_DEVICES, or ``workers`` CPU
        workers; returns as soon as they are started.
slurm   through submitit (slurm.py): one ``SlurmExecutor.map_array`` = one
        job array for the whole submission; returns as soon as sbatch answers.

Packing: ``pack=N`` puts N runs in one task; they run one after another.

A submission lives in ``runs/NAME/jobs/SUB/``: ``tasks.json`` (task i -> its
runs' override lists), per-task state files (local/debug), logs, and for slurm
submitit's folder ``submitit/``.  Every task runs ``task.run_task(TASKS.json,
I)`` (by hand: ``python -m depthwidth.launch task TASKS.json I``).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Callable

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.launch.backend import Job, backend, whole
from depthwidth.launch.debug import run_debug
from depthwidth.launch.task import array_task, ended, run_task


_SUBMISSIONS = itertools.count()
KINDS = ("train", "eval")  # what a submission's tasks do: train runs, or evaluate finished ones


def _sub_id() -> str:
    """Unique per submission: time, pid, and a counter (one sweep may submit several arrays at once)."""
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}-{next(_SUBMISSIONS)}"


def submit(
    name: str,
    items: list[dict],
    cfg: dict,
    *,
    show: Callable | None = None,
    kind: str = "train",
    args: dict | None = None,
) -> list[dict]:
    """Submit ``items`` (dicts: run_id, overrides, run_dir, label, ref, tokens_total,
    params, index) with launcher ``cfg``; returns [{run_id, job_id}].  Appends one
    ``submit`` event per run to the manifest (before the jobs can start, except
    for slurm where the ids exist only once sbatch has answered).

    ``kind="eval"``: the tasks evaluate finished runs instead (``dw eval SWEEP launcher=...``,
    ``args`` the evaluation's options: task.py's ``run_evals``); the manifest gets ``eval_submit``
    events, which the runs' own records (``store.manifest_runs``) leave alone."""
    if kind not in KINDS:
        raise ValueError(f"submission kind {kind!r}: one of {KINDS}")
    if not items:
        return []
    pack = int(cfg["pack"])
    tasks = [items[i : i + pack] for i in range(0, len(items), pack)]
    sub = _sub_id()
    d = store.jobs_dir(name) / sub
    tasks_file = d / "tasks.json"
    with whole(d):
        d.mkdir(parents=True, exist_ok=True)
        write_json(
            tasks_file,
            {
                "sweep": name,
                "launcher": cfg["name"],
                "submission": sub,
                "runs_root": str(store.runs_root().absolute()),
                "kind": kind,
                "args": args or {},
                "retry": {"max_retries": int(cfg.get("max_retries", 0)), "delay_s": float(cfg.get("retry_delay_s", 0))},
                "tasks": [
                    [{k: it[k] for k in ("run_id", "overrides", "run_dir", "halving") if k in it} for it in t]
                    for t in tasks
                ],
            },
        )
    b = backend(cfg["name"])

    def register(job_ids: list[str]) -> None:
        _register(name, tasks, job_ids, b.name, kind, args, cfg)

    def run_here(job_ids: list[str]) -> None:  # debug: the tasks, in this process
        if kind == "train":
            run_debug(name, d, tasks_file, tasks, job_ids, show=show)
        else:  # evaluations in this process, one task after another (no training progress to show)
            for i in range(len(tasks)):
                ended(d, i, run_task(tasks_file, i, in_process=True))

    job = Job(name, d, tasks_file, sub, len(tasks), cfg, register, run_here, array_task)
    return _pairs(tasks, b.submit(job))


def _pairs(tasks, job_ids):
    return [{"run_id": it["run_id"], "job_id": j} for t, j in zip(tasks, job_ids) for it in t]


def _register(name, tasks, job_ids, launcher, kind="train", args=None, launcher_cfg=None):
    rows = []
    for t, j in zip(tasks, job_ids):
        for it in t:
            if kind != "train":
                ev = {"event": f"{kind}_submit", "run_id": it["run_id"], "job_id": j, "launcher": launcher}
                rows.append({**ev, "run_dir": it["run_dir"], "tasks": (args or {}).get("tasks")})
                continue
            rows.append(
                {
                    "event": "submit",
                    "run_id": it["run_id"],
                    "job_id": j,
                    "launcher": launcher,
                    **{
                        k: it.get(k)
                        for k in ("overrides", "run_dir", "label", "ref", "tokens_total", "params", "index")
                    },
                    **{k: it[k] for k in ("depth", "width", "shape") if it.get(k) is not None},
                    **({"retry_of": it["retry_of"]} if it.get("retry_of") else {}),
                    **({"group": it["group"], "tuned": it.get("tuned")} if it.get("group") else {}),
                    **({"halving": it["halving"]} if it.get("halving") else {}),
                    "launcher_cfg": launcher_cfg,
                }
            )
    store.append_events(name, rows)
