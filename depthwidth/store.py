"""The run store, read side: ``runs/SWEEP/RUN_ID/`` directories -> tables.

Formats are those of docs/CONTRACTS.md.  Functions here are self-contained
(no shared state), so the manifest/status side can be added beside them.

``run_table(sweep_dir)``: one row per token-budget point of every run, from
each run's summary.json (``budgets``; when empty, ``final_val_loss`` at
``tokens``).  ``probe_profiles(sweep_dir)``: per run, its probes.jsonl records
plus width and depth.
"""

from __future__ import annotations

import json
from pathlib import Path

from depthwidth.atomic import read_jsonl

TABLE_COLUMNS = ("run", "params", "tokens", "loss", "depth", "width", "flops", "seed", "shape", "status", "step")


def _summaries(sweep_dir: str | Path):
    """(run_dir, summary dict or None) for every run directory, sorted by name."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return []
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        f = d / "summary.json"
        if not f.is_file():
            continue
        try:
            s = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            s = None
        out.append((d, s if isinstance(s, dict) else None))
    return out


def _num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def run_table(sweep_dir: str | Path):
    """DataFrame with one row per token-budget point of every run in ``sweep_dir``.

    Columns: run, params, tokens, loss, depth, width, flops (= flops_per_token
    * tokens), seed, shape, status, step.  Runs whose summary.json cannot be
    read are listed in ``df.attrs["unreadable"]``.
    """
    import pandas as pd

    rows: list[dict] = []
    unreadable: list[str] = []
    for d, s in _summaries(sweep_dir):
        if s is None:
            unreadable.append(d.name)
            continue
        base = {
            "run": str(s.get("run_id") or d.name),
            "params": _num(s.get("params")),
            "depth": _num(s.get("depth")),
            "width": _num(s.get("width")),
            "seed": s.get("seed"),
            "shape": s.get("shape"),
            "status": s.get("status"),
        }
        fpt = _num(s.get("flops_per_token"))
        budgets = s.get("budgets") or []
        points = [(b.get("tokens"), b.get("val_loss"), b.get("step")) for b in budgets if isinstance(b, dict)]
        if not points:
            points = [(s.get("tokens"), s.get("final_val_loss"), s.get("steps"))]
        for tokens, loss, step in points:
            t = _num(tokens)
            rows.append({**base, "tokens": t, "loss": _num(loss), "flops": fpt * t, "step": step})
    df = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    df.attrs["unreadable"] = unreadable
    return df


def probe_profiles(sweep_dir: str | Path) -> list[dict]:
    """Per run with a probes.jsonl: {run, width, depth, seed, shape, status, probes: [records]}."""
    out = []
    for d, s in _summaries(sweep_dir):
        f = d / "probes.jsonl"
        if s is None or not f.is_file():
            continue
        out.append({
            "run": str(s.get("run_id") or d.name),
            "width": s.get("width"),
            "depth": s.get("depth"),
            "seed": s.get("seed"),
            "shape": s.get("shape"),
            "status": s.get("status"),
            "probes": read_jsonl(f),
        })
    return out


# =============================================================================
# Manifest + status (sweep side; used by `dw sweep` and `dw status`)
#
# runs/NAME/manifest is an append-only JSONL log, one line per event:
#   {"event": "submit", "run_id", "overrides", "run_dir", "launcher", "job_id",
#    "label", "ref", "tokens_total", "params", "index", "time"}
#   {"event": "start", "run_id", "job_id", "restart", "host", "pid", "time"}  # each (re)start
# Status joins the manifest, each run directory's summary.json and the tail of
# its metrics.jsonl with the scheduler's view of the run's latest job (slurm:
# ONE sacct call for the whole sweep; local/debug: task state files under
# runs/NAME/jobs/).  No torch, Hydra or pandas here.
# =============================================================================

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Iterable  # noqa: E402

from depthwidth.atomic import append_jsonl  # noqa: E402
from depthwidth.errors import BadInput, WorkFailed  # noqa: E402

MANIFEST = "manifest"
STATES = ("pending", "running", "done", "failed", "diverged", "preempted", "cancelled", "lost")
RETRYABLE = ("failed", "diverged", "cancelled", "lost")


def runs_root(root: str | os.PathLike | None = None) -> Path:
    """Run-store root: ``root`` (``--root``), else $DW_RUNS, else ``runs``."""
    return Path(root or os.environ.get("DW_RUNS") or "runs")


def sweep_dir(name: str) -> Path:
    return runs_root() / name


def manifest_path(name: str) -> Path:
    return sweep_dir(name) / MANIFEST


def jobs_dir(name: str) -> Path:
    return sweep_dir(name) / "jobs"


def append_events(name: str, rows: Iterable[dict]) -> None:
    """Append events to the manifest (one write + fsync per batch; never rewritten)."""
    now = round(time.time(), 3)
    append_jsonl(manifest_path(name), [{"time": now, **r} for r in rows])


def read_manifest(name: str) -> list[dict]:
    return read_jsonl(manifest_path(name))


def known_sweeps() -> list[str]:
    root = runs_root()
    return sorted(p.parent.name for p in root.glob(f"*/{MANIFEST}")) if root.is_dir() else []


def manifest_runs(events: list[dict]) -> dict[str, dict]:
    """run_id -> {run_id, overrides, run_dir, label, ref, jobs, job_id (latest), launcher, attempts, started}."""
    runs: dict[str, dict] = {}
    starts: dict[str, list] = {}
    for e in events:
        rid = e.get("run_id")
        if not rid:
            continue
        if e.get("event") == "submit":
            r = runs.setdefault(rid, {"run_id": rid, "jobs": []})
            for k in ("overrides", "run_dir", "label", "ref", "tokens_total", "params", "launcher", "index"):
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


def _json(path: Path) -> dict | None:
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


# ---- scheduler views ----------------------------------------------------------

SLURM_STATES = {
    "PENDING": "pending", "RESV_DEL_HOLD": "pending", "CONFIGURING": "running", "RUNNING": "running",
    "COMPLETING": "running", "RESIZING": "running", "SUSPENDED": "running", "STOPPED": "running",
    "SIGNALING": "running", "STAGE_OUT": "running", "REQUEUED": "preempted", "REQUEUE_HOLD": "preempted",
    "REQUEUE_FED": "preempted", "PREEMPTED": "preempted", "COMPLETED": "completed", "CANCELLED": "cancelled",
    "REVOKED": "cancelled", "FAILED": "failed", "TIMEOUT": "failed", "OUT_OF_MEMORY": "failed",
    "NODE_FAIL": "failed", "BOOT_FAIL": "failed", "DEADLINE": "failed", "SPECIAL_EXIT": "failed",
}


def expand_array(jobid: str) -> list[str]:
    """'12_[0-3,7%2]' -> ['12_0', '12_1', '12_2', '12_3', '12_7']; other ids unchanged."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", jobid)
    if not m:
        return [jobid]
    base, body = m.group(1), m.group(2).split("%")[0]
    out = []
    for part in body.split(","):
        if "-" in part:
            a, b = part.split("-")[:2]
            step = 1
            if ":" in b:
                b, step = b.split(":")
            out += [f"{base}_{i}" for i in range(int(a), int(b) + 1, int(step))]
        elif part:
            out.append(f"{base}_{part}")
    return out


def slurm_states(job_ids: Iterable[str]) -> dict[str, str]:
    """ONE ``sacct`` call for every job of the sweep -> job id -> raw SLURM state.
    A task requeued several times has one record per run; the newest wins."""
    arrays = sorted({j.split("_")[0] for j in job_ids if j})
    if not arrays:
        return {}
    cmd = ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(arrays)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return {}  # no SLURM client here: the scheduler's view is unknown
    except subprocess.TimeoutExpired:
        raise WorkFailed("sacct did not answer within 60 s") from None
    if p.returncode != 0:
        raise WorkFailed(f"sacct failed: {' '.join(p.stderr.split())[:300]}")
    out: dict[str, str] = {}
    for line in p.stdout.splitlines():
        parts = line.split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        state = parts[1].split()[0] if parts[1] else "UNKNOWN"
        for jid in expand_array(parts[0]):
            out[jid] = state
    return out


def pid_alive(pid) -> bool:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def task_states(name: str) -> dict[str, str | None]:
    """Local/debug launchers' task state files -> job id -> normalised state (None: unknown)."""
    out: dict[str, str | None] = {}
    d = jobs_dir(name)
    if not d.is_dir():
        return out
    for sub in d.iterdir():
        if not sub.is_dir():
            continue
        workers = [_json(p) or {} for p in sub.glob("worker-*.json")]
        alive = any(w.get("state") == "running" and pid_alive(w.get("pid")) for w in workers)
        for p in sub.glob("task-*.json"):
            t = _json(p)
            if not t or "job_id" not in t:
                continue
            st = t.get("state")
            if st == "queued":
                st = "pending" if alive else None
            elif st == "running":
                st = "running" if pid_alive(t.get("pid")) else None
            out[t["job_id"]] = st  # completed | failed | preempted | cancelled
    return out


# ---- joining ------------------------------------------------------------------


def run_state(summary: dict | None, sched: str | None, started: bool = False) -> str:
    """The run's state from its summary.json and its latest job's (normalised) scheduler state:
    pending | running | completed | failed | cancelled | preempted | None (the scheduler does not know it)."""
    s = (summary or {}).get("status")
    if s in ("done", "diverged"):
        return s
    if sched == "pending":
        return "preempted" if s == "preempted" else "pending"
    if sched == "running":
        if s == "failed" and not started:
            return "failed"
        return "running" if started or s in ("running", "preempted") else "pending"  # packed: not yet started
    if sched in ("cancelled", "preempted"):
        return sched
    if sched in ("failed", "completed"):
        return "preempted" if s == "preempted" and sched == "completed" else "failed"
    return "failed" if s == "failed" else "lost"


def status(name: str) -> dict:
    """Every submitted run of sweep NAME: state, progress, last loss, attempts."""
    events = read_manifest(name)
    if not events:
        raise BadInput(f"no sweep {name!r} in {runs_root()} (sweeps with a manifest: {', '.join(known_sweeps()) or 'none'})")
    runs = manifest_runs(events)
    slurm = [r["job_id"] for r in runs.values() if r.get("launcher") == "slurm"]
    raw = slurm_states(slurm) if slurm else {}
    local = task_states(name) if len(slurm) < len(runs) else {}
    rows = []
    for r in runs.values():
        rd = Path(r.get("run_dir") or sweep_dir(name) / r["run_id"])
        summ = _json(rd / "summary.json")
        if summ is not None and summ.get("run_id") not in (None, r["run_id"]):
            summ = None
        last = last_jsonl(rd / "metrics.jsonl")
        if r.get("launcher") == "slurm":
            sched_raw = raw.get(r["job_id"])
            sched = SLURM_STATES.get(sched_raw) if sched_raw else None
        else:
            sched = sched_raw = local.get(r["job_id"])
        state = run_state(summ, sched, r.get("started", False))
        total = (summ or {}).get("tokens_total") or r.get("tokens_total")
        tok = max((summ or {}).get("tokens") or 0, (last or {}).get("tokens") or 0)
        loss = (last or {}).get("loss")
        if loss is None and summ:
            loss = summ.get("last_loss")
        rows.append({
            "run_id": r["run_id"], "state": state, "tokens": tok, "tokens_total": total,
            "progress": min(1.0, tok / total) if total else None, "last_loss": loss,
            "final_val_loss": (summ or {}).get("final_val_loss"), "attempts": r["attempts"],
            "job_id": r["job_id"], "jobs": r["jobs"], "scheduler_state": sched_raw, "launcher": r.get("launcher"),
            "label": r.get("label"), "reason": (summ or {}).get("reason"), "run_dir": str(rd),
            "params": r.get("params"), "overrides": r.get("overrides"),
        })
    counts = {s: 0 for s in STATES}
    for row in rows:
        counts[row["state"]] += 1
    return {"sweep": name, "total": len(rows), "counts": counts, "runs": rows}


def summary_line(st: dict) -> str:
    c = st["counts"]
    parts = [f"{c[s]} {s}" for s in STATES if c[s]]
    n = st["total"]
    return f"{st['sweep']}: {n} run{'s' * (n != 1)} — " + (", ".join(parts) if parts else "none")
