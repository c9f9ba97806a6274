"""The run store on disk: where a sweep's runs live and the manifest that lists them.

    runs/NAME/manifest        append-only JSONL log, one line per event:
      {"event": "submit", "run_id", "overrides", "run_dir", "launcher", "job_id",
       "label", "ref", "tokens_total", "params", "index", "depth", "width", "shape", "group", "tuned", "time"}
      {"event": "start", "run_id", "job_id", "restart", "host", "pid", "time"}  # each (re)start
      {"event": "forget", "run_id", "reason", "time"}  # dw forget: no longer one of the sweep's runs
    runs/NAME/RUN_ID/         one run directory (docs/CONTRACTS.md)
    runs/NAME/jobs/SUB/       one submission (tasks.json, launcher state, logs)

Formats are those of docs/CONTRACTS.md.  Launchers append events; ``dw
status`` (sweep/status.py) joins them with run directories and the
scheduler's view.  No torch, Hydra or pandas here.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Iterable

from depthwidth.core.atomic import append_jsonl, read_jsonl
from depthwidth.core.errors import bad

MANIFEST = "manifest"


def runs_root(root: str | os.PathLike | None = None) -> Path:
    """Run-store root: ``root`` (``--root``), else $DW_RUNS, else ``runs``."""
    return Path(root or os.environ.get("DW_RUNS") or "runs")


def checkout_store(name: str, root=None) -> Path | None:
    """The store of sweep ``name`` in the checkout's own ``runs/`` (beside the package, where
    sweeps/ and conf/ are found from any folder) when ``runs_root()`` points elsewhere and
    $DW_RUNS is unset: dw run from another folder would start a second store of the same
    sweep there (and retrain every run).  None when there is no such other store."""
    if root is not None or os.environ.get("DW_RUNS"):  # a store named on purpose
        return None
    there = Path(__file__).resolve().parents[2] / "runs" / name
    here = (runs_root() / name).absolute()
    if not (there / MANIFEST).is_file() or there.resolve() == here.resolve() or (here / MANIFEST).is_file():
        return None
    return there


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_name(name, what: str = "sweep") -> str:
    """A sweep's name is one folder of the runs directory: no ``/``, no ``..``, not absolute,
    so nothing dw writes or reads for it can land outside that directory."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad(
            what,
            name,
            "a name of letters, digits, '_', '-' and '.' that does not start with '.' "
            "(one folder of the runs directory)",
        )
    return name


def sweep_dir(name: str, root=None) -> Path:
    d = runs_root(root) / check_name(name)
    if d.is_symlink() and not d.resolve().is_relative_to(runs_root(root).resolve()):
        raise bad("sweep", name, f"a folder inside {runs_root(root)}, not a link to {d.resolve()}")
    return d


def manifest_path(name: str, root=None) -> Path:
    return sweep_dir(name, root) / MANIFEST


def jobs_dir(name: str, root=None) -> Path:
    return sweep_dir(name, root) / "jobs"


class FileLock:
    """Exclusive flock on ``path`` (created if absent) for the with-block: a read-modify-write of one
    file (a manifest's view, a run's eval.json) by two processes never loses the other's change."""

    def __init__(self, path):
        self.path = Path(path)

    def __enter__(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()  # releases the lock


class SweepLock(FileLock):
    """runs/NAME/.lock: whatever reads the manifest's state and then appends to it (a submission,
    ``dw forget``) holds it, so two of them never act on the same stale view."""

    def __init__(self, name: str):
        super().__init__(sweep_dir(name) / ".lock")


def append_events(name: str, rows: Iterable[dict]) -> None:
    """Append events to the manifest (one write + fsync per batch; never rewritten)."""
    now = round(time.time(), 3)
    append_jsonl(manifest_path(name), [{"time": now, **r} for r in rows])


def read_manifest(name: str, bad: list | None = None, root=None) -> list[dict]:
    return read_jsonl(manifest_path(name, root), bad)


def known_sweeps(root=None) -> list[str]:
    root = runs_root(root)
    return sorted(p.parent.name for p in root.glob(f"*/{MANIFEST}")) if root.is_dir() else []


def forgotten(events: list[dict]) -> set[str]:
    """Run ids whose last submit/forget event is a ``forget`` (``dw forget``): the record keeps them,
    status, tables, fits and reports leave them out; a later submission brings a run back."""
    last: dict[str, str] = {}
    for e in events:
        if e.get("run_id") and e.get("event") in ("submit", "forget"):
            last[e["run_id"]] = e["event"]
    return {r for r, ev in last.items() if ev == "forget"}


def manifest_runs(events: list[dict]) -> dict[str, dict]:
    """run_id -> {run_id, overrides, run_dir, label, ref, jobs, job_id (latest), launcher, attempts, started,
    retry_of (the diverged run a ``--retry-diverged`` run replaces, if it is one)}; forgotten runs
    (``forgotten``) are not among them."""
    runs: dict[str, dict] = {}
    starts: dict[str, list] = {}
    for e in events:
        rid = e.get("run_id")
        if not rid:
            continue
        if e.get("event") == "forget":
            runs.pop(rid, None)
            starts.pop(rid, None)
        elif e.get("event") == "submit":
            r = runs.setdefault(rid, {"run_id": rid, "jobs": []})
            for k in (
                "overrides",
                "run_dir",
                "label",
                "ref",
                "tokens_total",
                "params",
                "launcher",
                "index",
                "depth",
                "width",
                "shape",
                "retry_of",
                "group",
                "tuned",
            ):
                if k in e:
                    r[k] = e[k]
            r["jobs"].append(e["job_id"])
            r["job_id"] = e["job_id"]
        elif e.get("event") == "start":
            starts.setdefault(rid, []).append(e.get("job_id"))
    for rid, r in runs.items():
        jobs = set(r["jobs"])
        # attempts: every (re)start of the run by one of its jobs (0 while never started)
        r["attempts"] = sum(1 for j in starts.get(rid, []) if j in jobs)
        r["started"] = r["job_id"] in starts.get(rid, [])  # by its latest job
    return runs


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def last_jsonl(path: Path, tail: int = 4096) -> dict | None:
    """The last complete JSON line of a file, reading only its tail."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            chunk = f.read()
    except OSError:
        return None
    for line in reversed(chunk.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None
