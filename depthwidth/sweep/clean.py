"""``dw clean NAME``: delete the checkpoints of a sweep's finished runs, to free disk.

Only ``done`` runs are touched (``dw status``'s state, launch/status.py): every other run may still
need its checkpoints — a pending, running or preempted run resumes from them, ``dw sweep
--retry-failed`` resumes a failed, cancelled or lost one, an ``unknown`` one may still be running, and
a diverged one keeps them for finding out why.  ``done`` is final: the trainer never writes a done run
again (train() returns its summary) and ``dw sweep`` skips it, so no sweep lock is taken (a debug
submission holds it while it trains, and dw clean need not wait for that).

``keep="final"`` keeps each run's newest checkpoint that verifies — ``find_checkpoint(run_dir,
"final")``, the one ``dw analyze``, ``dw eval`` and ``dw export`` load — and deletes the others (a
newer one that fails its checksums too: nothing would load it).  ``keep="none"`` deletes them all,
except that a run whose end-of-run analysis (``train.analyze_at_end``) or evaluation
(``train.eval_tasks``) has no result yet keeps its final checkpoint, unless ``force``.

Each checkpoint is deleted by renaming ``ckpt/step_N`` to ``ckpt/.deleting-step_N`` (one rename in one
folder: atomic) and then removing that.  ``checkpoint.list_steps`` globs ``step_*``, so a checkpoint
is either whole under its own name or gone from every reader's view; a crash mid-removal leaves only
a ``.deleting-*`` folder, which the next dw clean finishes.  So do a finished run's ``.step_N.tmp``
folders (a checkpoint write cut short: the next save would have removed it, and a done run saves no more).

Only the store's own folders are touched: each run's is ``runs/NAME/RUN_ID`` (``core.store.run_folder``),
and a manifest whose ``run_dir`` names anything else (an edited or corrupt one) is refused in one line
before anything is deleted (``core.store.refuse_outside``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.errors import BadInput, WorkFailed, bad
from depthwidth.core.tables import plural
from depthwidth.launch.status import status
from depthwidth.measure import doc as analysis_doc
from depthwidth.track import evaldoc
from depthwidth.train.analysis import find_checkpoint
from depthwidth.train.checkpoint import list_steps

KEEP = ("final", "none")
TRASH = ".deleting-"
# what only dw clean (.deleting-step_N) or a cut-short checkpoint write (.step_N.tmp) leaves in ckpt/
LEFTOVER = re.compile(rf"{re.escape(TRASH)}.*|\.step_\d+\.tmp")


def clean(name: str, keep: str = "final", force: bool = False, dry_run: bool = False) -> dict:
    """Delete the checkpoints of sweep ``name``'s done runs (``dry_run``: only say which);
    {sweep, keep, force, dry_run, runs: [one per run of the sweep], total}."""
    if keep not in KEEP:
        raise bad("--keep", keep, " | ".join(KEEP))
    if force and keep != "none":
        raise bad("--force", True, "only with --keep none (it deletes final checkpoints analyze or eval still need)")
    # nothing outside the store, whatever its manifest says: such a run refuses the whole clean
    store.refuse_outside(store.sweep_dir(name), store.manifest_runs(store.read_manifest(name)).values())
    runs = [_clean_run(r, keep, force, dry_run) for r in status(name)["runs"]]
    return {"sweep": name, "keep": keep, "force": force, "dry_run": dry_run, "runs": runs, "total": _total(runs)}


def _clean_run(row: dict, keep: str, force: bool, dry_run: bool) -> dict:
    """One run of the sweep: {run_id, state, run_dir, kept, deleted (steps), leftovers (names),
    bytes (freed, or that would be), needed_by, note}."""
    run_dir = Path(row["run_dir"])
    ckpt = run_dir / "ckpt"
    out = {"run_id": row["run_id"], "state": row["state"], "run_dir": row["run_dir"]}
    if row["state"] != "done":
        return {**out, **_untouched(list_steps(ckpt), f"left alone: {row['state']}"), "leftovers": [], "bytes": 0}
    if not ckpt.is_dir():
        return {**out, **_untouched([], "no checkpoints"), "leftovers": [], "bytes": 0}
    leftovers = sorted(p for p in ckpt.iterdir() if LEFTOVER.fullmatch(p.name))
    out.update(_choose(run_dir, list_steps(ckpt), keep, force))
    out["leftovers"] = [p.name for p in leftovers]
    doomed = [*leftovers, *(ckpt / f"step_{s:08d}" for s in out["deleted"])]
    out["bytes"] = sum(_size(p) for p in doomed)
    if not dry_run:
        for p in doomed:
            _delete(p)
    return out


def _untouched(steps: list[int], note: str) -> dict:
    return {"kept": steps, "deleted": [], "needed_by": [], "note": note}


def _choose(run_dir: Path, steps: list[int], keep: str, force: bool) -> dict:
    """{kept, deleted, needed_by, note} of a done run's checkpoint ``steps``."""
    needs = needed_by(run_dir) if keep == "none" and steps else []
    if not steps or (keep == "none" and (force or not needs)):
        note = f"deleted although {' and '.join(needs)} still needs it (--force)" if needs else None
        return {"kept": [], "deleted": steps, "needed_by": needs, "note": note}
    try:
        final = find_checkpoint(run_dir, "final")[0]
    except BadInput:  # none verifies: leave them for a person to look at rather than guess
        return {**_untouched(steps, "no valid checkpoint: left as it is"), "needed_by": needs}
    note = None
    if needs:
        note = f"kept: still needed by {' and '.join(needs)}"
    elif final != steps[-1]:
        note = f"step {steps[-1]} fails its checksums: kept step {final}, the newest that verifies"
    return {"kept": [final], "deleted": [s for s in steps if s != final], "needed_by": needs, "note": note}


def needed_by(run_dir: Path) -> list[str]:
    """What still wants the run's final checkpoint: ``analyze`` when its config asks for an analysis at
    the end (train.analyze_at_end) and it has no current analysis.json, ``eval`` when a task of
    train.eval_tasks has no result for the final checkpoint in eval.json.  The config is read as plain
    YAML, each key with a default: a run of an older dw has neither setting."""
    import yaml

    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        cfg = None
    train = (cfg if isinstance(cfg, dict) else {}).get("train")
    train = train if isinstance(train, dict) else {}
    out = []
    if train.get("analyze_at_end") is True and not analysis_doc.current(run_dir):
        out.append("analyze")
    tasks = train.get("eval_tasks")
    if isinstance(tasks, list) and tasks:
        doc = evaldoc.read(run_dir)
        if any(not evaldoc.evaluated(doc, str(t)) for t in tasks):
            out.append("eval")
    return out


def _size(path: Path) -> int:
    """Bytes of the files under ``path`` (a link counts as itself: nothing it points to is deleted)."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for top, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(top, f)).st_size for f in files)
    return total


def _delete(path: Path) -> None:
    """Rename ``path`` to its trash name beside it, then remove that; a path gone already (another
    dw clean took it) is not an error."""
    trash = path if path.name.startswith(TRASH) else path.with_name(TRASH + path.name)
    try:
        if trash != path:
            os.rename(path, trash)
    except FileNotFoundError:
        return
    except OSError as e:
        raise WorkFailed(f"could not delete {path}: {e.strerror or e}; it is left whole") from None
    try:
        if trash.is_symlink():
            trash.unlink()
        else:
            shutil.rmtree(trash)
    except FileNotFoundError:
        return
    except OSError as e:
        raise WorkFailed(
            f"could not delete {trash}: {e.strerror or e}; nothing reads it as a checkpoint, and the next "
            "dw clean of its sweep removes it once that is fixed"
        ) from None


def _total(runs: list[dict]) -> dict:
    done = [r for r in runs if r["state"] == "done"]
    alone: dict[str, int] = {}
    for r in runs:
        if r["state"] != "done":
            alone[r["state"]] = alone.get(r["state"], 0) + 1
    return {
        "bytes": sum(r["bytes"] for r in runs),
        "runs": sum(1 for r in done if r["bytes"] or r["deleted"] or r["leftovers"]),
        "checkpoints": sum(len(r["deleted"]) for r in done),
        "kept": sum(len(r["kept"]) for r in done),
        "kept_needed": sum(1 for r in done if r["needed_by"] and r["kept"]),
        "left_alone": dict(sorted(alone.items())),
    }


def size_text(b: int) -> str:
    """Bytes as the total line says them: GiB from 1 GiB up, else the largest unit that is >= 1."""
    for unit, k in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= k:
            return f"{b / k:,.1f} {unit}"
    return f"{b} B"


def summary_line(res: dict) -> str:
    """``freed 1.2 GiB in 3 runs (6 checkpoints); kept 3 final checkpoints (1 still needed by
    analyze/eval); left alone 2 runs not done (1 running, 1 preempted)``."""
    t = res["total"]
    line = (
        f"{'would free' if res['dry_run'] else 'freed'} {size_text(t['bytes'])} in {plural(t['runs'], 'run')} "
        f"({plural(t['checkpoints'], 'checkpoint')}); kept {plural(t['kept'], 'checkpoint')}"
    )
    if t["kept_needed"]:
        line += f" ({t['kept_needed']} still needed by analyze/eval; --force deletes them)"
    if t["left_alone"]:
        n = sum(t["left_alone"].values())
        line += f"; left alone {plural(n, 'run')} not done (" + ", ".join(
            f"{v} {k}" for k, v in t["left_alone"].items()
        )
        line += ")"
    return line
