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


def is_name(name) -> bool:
    """Whether ``name`` may name a sweep (``check_name`` without the error)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


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
    """The JSON object in ``path``; None when it is absent, unreadable, not UTF-8, not JSON or
    not an object (a list, a number)."""
    doc, _ = read_json_why(path)
    return doc


def read_json_why(path: Path) -> tuple[dict | None, str | None]:
    """(the JSON object in ``path`` or None, why it could not be read: None when it is absent or
    read; else one phrase, e.g. "JSONDecodeError: Unterminated string ... (char 41)")."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{type(e).__name__}: {e.strerror or e}"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
    if not isinstance(doc, dict):
        return None, f"it holds a JSON {type(doc).__name__}, not an object"
    return doc, None


def run_status(run_dir: Path) -> str | None:
    """The ``status`` in a run folder's summary.json; None when it has none or cannot be read."""
    return (read_json(Path(run_dir) / "summary.json") or {}).get("status")


# ---------------------------------------------------------------------------
# The manifest is the index of a store: which folders are its runs
# ---------------------------------------------------------------------------

# folders of a store that are not runs (launch/, launch/halving.py, the follow-up's report)
STORE_DIRS = ("jobs", "halving", "report")
_RUN_FILES = ("summary.json", "config.yaml", "metrics.jsonl", "ckpt")  # what makes a folder look like a run


def run_folder(sweep_dir: Path, run_id) -> Path | None:
    """The folder of run ``run_id`` in the store ``sweep_dir``: always SWEEP_DIR/RUN_ID, whatever the
    manifest's ``run_dir`` says (None: the id is not one folder name, so it has no folder here)."""
    if not isinstance(run_id, str) or not _NAME.fullmatch(run_id):
        return None
    return Path(sweep_dir) / run_id


def outside(sweep_dir: Path, run: dict) -> tuple[str, object, str] | None:
    """(what, its value, what is allowed) when run ``run`` (a ``manifest_runs`` record or a submit
    event) of the store ``sweep_dir`` would take a command outside the store, else None.  The
    manifest's ``run_dir`` may name the same run in the same store since moved (its last two parts
    SWEEP/RUN_ID): dw reads and writes SWEEP_DIR/RUN_ID.  Anything else (an edited or corrupt
    manifest, a run id that is no folder name, a run folder that is a link out of the store) is
    refused by every command that writes or deletes, and reported by ``dw status``."""
    sweep_dir = Path(sweep_dir)
    rid = run.get("run_id")
    d = run_folder(sweep_dir, rid)
    if d is None:
        return f"run id in {sweep_dir / MANIFEST}", rid, "one folder name (letters, digits, '_', '-', '.')"
    given = run.get("run_dir")
    if given is not None:
        g = Path(str(given))
        if g.parts[-2:] != (sweep_dir.name, rid) and os.path.realpath(g) != os.path.realpath(d):
            return f"run_dir of run {rid} in {sweep_dir / MANIFEST}", str(given), f"the run's own folder {d}"
    if os.path.lexists(d) and not Path(os.path.realpath(d)).is_relative_to(os.path.realpath(sweep_dir)):
        return f"run folder {d}", os.path.realpath(d), f"a folder inside {sweep_dir}, not a link out of it"
    return None


def refuse_outside(sweep_dir: Path, runs) -> None:
    """BadInput (one line, before anything is touched) when a run of ``runs`` (manifest records)
    would take a command that writes or deletes outside the store ``sweep_dir`` (``outside``)."""
    for r in runs:
        if (why := outside(sweep_dir, r)) is not None:
            what, value, allowed = why
            raise bad(what, value, f"{allowed}; the manifest was edited or is corrupt: nothing was written or deleted")


def in_store(sweep_dir: Path, item: dict) -> dict:
    """A manifest submit event (or task item) of a run that ``outside`` accepts, its ``run_dir`` and
    ``run.dir=`` override set to the run's folder SWEEP_DIR/RUN_ID (where it is now, if moved)."""
    d = str(Path(sweep_dir).absolute() / item["run_id"])
    ovr = [f"run.dir={d}" if str(o).startswith("run.dir=") else o for o in item.get("overrides") or []]
    return {**item, "run_dir": d, "overrides": ovr}


def looks_like_run(d: Path) -> bool:
    return d.is_dir() and not d.name.startswith(".") and any((d / f).exists() for f in _RUN_FILES)


def unknown_folders(sweep_dir: Path, known) -> list[str]:
    """Folders of the store that look like run folders (summary.json, config.yaml, metrics.jsonl or
    ckpt/ inside) but that the manifest does not know: a copy (``cp -a RUN RUN.bak``), a run from
    elsewhere.  No reader counts them."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return []
    known = set(known)
    return sorted(
        p.name for p in root.iterdir() if p.name not in known and p.name not in STORE_DIRS and looks_like_run(p)
    )


def unknown_line(sweep_dir: Path, names: list[str]) -> str | None:
    """The one warning line about ``unknown_folders`` (None when there are none)."""
    if not names:
        return None
    n = len(names)
    shown = ", ".join(names[:5]) + (", ..." if n > 5 else "")
    return (
        f"{sweep_dir}: {n} folder{'s' * (n != 1)} the manifest does not list, not counted: {shown} "
        "(dw reads only the runs its manifest lists)"
    )


def store_runs(sweep_dir: Path, writing: bool = False) -> tuple[dict[str, Path], list[str]]:
    """(run id -> its folder, the folders not counted) of the store ``sweep_dir``: with a manifest,
    exactly its runs (forgotten ones left out; forgotten folders are known, not counted); without
    one (a folder of run directories put together by hand), one folder per run id among those that
    look like runs (``looks_like_run``): the one named after the run id its summary.json gives (else
    the first by name); the others are not counted.  ``writing``: for a command that writes into the
    run folders (dw analyze, dw eval), a manifest naming a folder outside the store is refused
    (``refuse_outside``)."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return {}, []
    if (root / MANIFEST).is_file():
        events = read_jsonl(root / MANIFEST)
        runs = manifest_runs(events)
        if writing:
            refuse_outside(root, runs.values())
        dirs = {rid: d for rid in runs if (d := run_folder(root, rid)) is not None}
        known = {e.get("run_id") for e in events if isinstance(e.get("run_id"), str)}
        return dirs, unknown_folders(root, known)
    by_id: dict[str, list[Path]] = {}
    for d in sorted(p for p in root.iterdir() if p.name not in STORE_DIRS and looks_like_run(p)):
        s = read_json(d / "summary.json") or {}
        rid = s.get("run_id") if isinstance(s.get("run_id"), str) and s.get("run_id") else d.name
        by_id.setdefault(rid, []).append(d)
    dirs, extra = {}, []
    for rid, ds in by_id.items():
        own = next((d for d in ds if d.name == rid), ds[0])
        dirs[rid] = own
        extra += [d.name for d in ds if d != own]
    return dirs, sorted(extra)


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
