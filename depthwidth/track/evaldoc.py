"""The eval.json format (docs/evals.md), torch-free: written by ``evals.run`` (``dw eval``,
``train.eval_tasks``), read by the run table (run_source.py) and ``dw report``.

It lives in ``track`` because the run table reads it and ``track`` may not import
``evals`` (the stage above it).  ``RUN_DIR/eval.json`` holds one record per
lm-evaluation-harness task, merged by task name: an eval that adds tasks keeps the
earlier ones; a task evaluated again replaces its own record.  Each record says what
was measured and on what, so two numbers under one column can be checked to come
from the same task and checkpoint:

    {"schema": "dw.eval/1", "run_id", "run_dir",
     "tasks": {"hellaswag": {
        "metrics": {"acc": {"value": 0.31, "stderr": 0.01}, "acc_norm": {...}},
        "checkpoint": "final" | N, "step": 300, "limit": null, "samples": 10042,
        "task_version": 1.0, "config_sha256": "...", "num_fewshot": 0, "output_type": "multiple_choice",
        "harness": "0.4.13", "batch_size": 8, "bootstrap_iters": 100000, "provenance": {...}}}}

``config_sha256`` hashes the task's exact config as the harness dumps it (canonical
JSON: sorted keys, no spaces).  A metric the harness reports under a filter other
than ``none`` keeps the harness's name for it, ``METRIC,FILTER``
(``exact_match,strict-match``).  Run-table columns are ``METRIC:TASK``
(``acc:hellaswag``, ``exact_match,strict-match:gsm8k``), the names ``dw fit
--metric`` takes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

FILE = "eval.json"
SCHEMA = "dw.eval/1"


def path_for(run_dir) -> Path:
    return Path(run_dir) / FILE


def read(run_dir) -> dict | None:
    """The eval document of a run directory, or None when absent or unreadable."""
    try:
        d = json.loads(path_for(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(d, dict) and d.get("schema") == SCHEMA and isinstance(d.get("tasks"), dict)):
        return None
    return d


def merge(old: dict | None, new: dict) -> dict:
    """``new`` (a document of this eval's tasks) over ``old``: earlier tasks kept, re-run ones replaced."""
    tasks = dict((old or {}).get("tasks") or {})
    tasks.update(new["tasks"])
    return {**new, "tasks": dict(sorted(tasks.items()))}


def config_hash(config: dict) -> str:
    """sha256 of a task config's canonical JSON (what the harness dumps may hold non-JSON values: str)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def evaluated(doc: dict | None, task: str, checkpoint: str | int = "final", limit: int | None = None) -> bool:
    """Whether ``task`` is recorded for that checkpoint (``final`` or a step) on the same documents
    (``limit``): a --limit 20 smoke test does not count as the whole task."""
    rec = ((doc or {}).get("tasks") or {}).get(task)
    if not isinstance(rec, dict) or rec.get("limit") != limit:
        return False
    if checkpoint in (None, "final"):
        return rec.get("checkpoint") == "final"
    return rec.get("step") == int(checkpoint)


def column(metric: str, task: str) -> str:
    return f"{metric}:{task}"


def columns(doc: dict | None, checkpoint: str | int | None = None) -> dict[str, tuple[int | None, float | None]]:
    """``{"METRIC:TASK": (step, value)}`` of every metric of every task in the document (of the tasks
    evaluated at ``checkpoint``, ``final`` or a step, when one is given)."""
    out = {}
    for task, rec in sorted(((doc or {}).get("tasks") or {}).items()):
        if not isinstance(rec, dict) or (checkpoint is not None and rec.get("checkpoint") != checkpoint):
            continue
        for metric, m in sorted((rec.get("metrics") or {}).items()):
            if isinstance(m, dict):
                out[column(metric, task)] = (rec.get("step"), m.get("value"))
    return out
