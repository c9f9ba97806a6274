"""``dw sync NAME``: upload a sweep's offline W&B runs (tracker=wandb) to W&B.

Each run directory ``runs/NAME/RUN_ID/wandb/`` holds one ``offline-run-*``
segment per start of the run, all with the same W&B run id.  ``dw sync``
hands the segments that are not synced yet to ``wandb sync`` in one call:
several runs at a time (``--parallel``), the segments of one run in start
order, with W&B's progress display.  W&B marks each uploaded segment with a
``run-ID.wandb.synced`` file next to it; those are skipped next time.
``wandb sync`` runs in the sweep's directory, so its own logs go to
``runs/NAME/wandb/logs``, not to wherever dw was started.  A
segment still being written (no exit record, modified in the last
``LIVE_S`` seconds) is left for later.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import typer

from depthwidth.report.render import emit_json

LIVE_S = 120.0


@dataclass
class Segment:
    run_id: str
    path: str
    state: str  # pending | synced | live


def _finished(path: Path) -> bool:
    """The segment's run recorded its exit (W&B's reader; unreadable: not known to be finished)."""
    from depthwidth.track.wandb_log import WandbLogError, finished

    try:
        return finished(path)
    except WandbLogError:
        return False


def find_segments(name: str) -> list[Segment]:
    """Every offline W&B segment of sweep NAME, oldest first within a run."""
    from depthwidth.core.errors import BadInput
    from depthwidth.core.store import known_sweeps, store_runs, sweep_dir

    root = sweep_dir(name)
    if not root.is_dir():
        raise BadInput(f"no sweep {name!r} in {root.parent} (sweeps: {', '.join(known_sweeps()) or 'none'})")
    out = []
    now = time.time()
    dirs, _ = store_runs(root)  # the manifest's runs: a copy of a run folder is not synced twice
    for f in sorted(f for d in dirs.values() for f in d.glob("wandb/offline-run-*/run-*.wandb")):
        rid = f.stem[len("run-") :]
        if f.with_suffix(".wandb.synced").exists():
            state = "synced"
        elif now - f.stat().st_mtime < LIVE_S and not _finished(f):
            state = "live"
        else:
            state = "pending"
        out.append(Segment(rid, str(f), state))
    return out


def wandb_sync(files: list[str], parallel: int, cwd: Path) -> int:
    """``wandb sync -n PARALLEL FILES`` in a subprocess (its progress on the terminal), run in
    ``cwd`` (the sweep's directory): W&B writes its own logs to ``cwd/wandb/logs``."""
    cmd = [sys.executable, "-m", "wandb", "sync", "-n", str(parallel), *(str(Path(f).absolute()) for f in files)]
    return subprocess.run(cmd, cwd=cwd).returncode


def sync_sweep(name: str, *, parallel: int = 4, dry_run: bool = False, syncer=wandb_sync) -> dict:
    from depthwidth.core.errors import BadInput, WorkFailed

    if parallel < 1:
        raise BadInput(f"bad value for --parallel: {parallel} (allowed: an integer >= 1)")
    segs = find_segments(name)
    todo = [s for s in segs if s.state == "pending"]
    out = {
        "sweep": name,
        "segments": [asdict(s) for s in segs],
        "runs": len({s.run_id for s in segs}),
        "to_sync": len(todo),
        "synced_now": 0,
        "dry_run": dry_run,
    }
    if dry_run or not todo:
        return out
    from depthwidth.track.mirror import credentials_configured

    if not credentials_configured():
        raise BadInput("no W&B API key or login configured: set WANDB_API_KEY or run `wandb login`, then dw sync again")
    from depthwidth.core.store import sweep_dir

    rc = syncer([s.path for s in todo], parallel, sweep_dir(name).absolute())
    done = [s for s in todo if Path(s.path).with_suffix(".wandb.synced").exists()]
    out["synced_now"] = len(done)
    out["not_synced"] = [s.path for s in todo if s not in done]
    if rc != 0 or len(done) < len(todo):
        raise WorkFailed(
            f"wandb sync: {len(done)} of {len(todo)} segments synced (exit code {rc}); run dw sync {name} again"
        )
    return out


def sync_cmd(
    name: str = typer.Argument(..., help="sweep name (runs/NAME)"),
    parallel: int = typer.Option(4, "--parallel", "-n", help="runs uploaded at a time"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be synced; upload nothing"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document instead of the table"),
) -> None:
    """Upload a sweep's offline W&B runs (tracker=wandb), skipping those already synced.

    Example: dw sync depth_delusion -n 8

    Needs WANDB_API_KEY or `wandb login`.  Segments of one run (one per restart)
    go to the same W&B run, in order.
    """
    res = sync_sweep(name, parallel=parallel, dry_run=dry_run)
    if as_json:
        emit_json(res)
        return
    from depthwidth.report.render import console

    c = console(stderr=False)
    counts = {k: sum(s["state"] == k for s in res["segments"]) for k in ("pending", "synced", "live")}
    verb = "would sync" if dry_run else ("synced" if res["synced_now"] else "to sync")
    n = res["synced_now"] if res["synced_now"] else res["to_sync"]
    c.print(
        f"{name}: {res['runs']} runs, {len(res['segments'])} offline segments — {verb} {n}, "
        f"already synced {counts['synced']}, still running {counts['live']}"
    )
    if dry_run:
        root = os.getcwd()
        for s in res["segments"]:
            if s["state"] == "pending":
                c.print(f"  {os.path.relpath(s['path'], root)}")
