"""Where a run's history goes: the run directory always, W&B as a mirror.

``LocalTracker`` appends ``metrics.jsonl`` / ``probes.jsonl`` in the run
directory, the source of truth.  On resume from step s, lines past s (logged
after the checkpoint the run resumes from) are dropped first, so no step is
ever recorded twice.  Each checkpoint also holds the lines logged since the
previous one (``unsaved``: the trainer puts them in its extra state), so a
last line torn after the checkpoint was written (a crash mid-append, a disk
that filled, a file cut short) is restored on resume instead of silently
dropped; every repair is said in one line (``rewind``'s notes).

``tracker=wandb`` adds the W&B mirror (mirror.py), which copies the same rows
to one W&B run per dw run; the local files stay the source of truth.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from depthwidth.config.check import check
from depthwidth.core.atomic import append_jsonl, read_jsonl, torn_tail, write_jsonl
from depthwidth.track.mirror import WandbMirror, setting

if TYPE_CHECKING:
    from depthwidth.track.mirror import WandbMirror


HISTORY_CAP = 1000  # lines per file a checkpoint holds: those logged since the previous checkpoint, at most


class LocalTracker:
    FILES = ("metrics.jsonl", "probes.jsonl")

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)
        self._pending: list[dict] = []
        self._since: dict[str, list[dict]] = {n: [] for n in self.FILES}  # appended since the last checkpoint

    def rewind(self, step: int, carried: dict | None = None) -> list[str]:
        """Forget every line logged after ``step`` (resume point), and put back the lines at or before
        it that the checkpoint holds (``carried``: ``unsaved()`` when it was written) but the file lacks
        (its last line torn, the file cut short); one note per file repaired."""
        notes = []
        for name in self.FILES:
            path = self.dir / name
            back = [r for r in (carried or {}).get(name) or [] if isinstance(r, dict) and r.get("step", 0) <= step]
            if not path.exists() and not back:
                continue
            torn = torn_tail(path)
            rows = read_jsonl(path)
            keep = [r for r in rows if r.get("step", 0) <= step]
            have = {r.get("step") for r in keep}
            back = [r for r in back if r.get("step") not in have]
            if back:
                keep = sorted(keep + back, key=lambda r: r.get("step", 0))
            if torn is not None or back or len(keep) != len(rows):
                write_jsonl(path, keep)
            if torn is not None or back:
                notes.append(_repaired(name, torn, [r.get("step") for r in back], step))
        return notes

    def unsaved(self) -> dict[str, list[dict]]:
        """The lines appended since the last checkpoint (the newest HISTORY_CAP of each file): what the
        checkpoint being written holds, so that a resume from it can restore them (``rewind``)."""
        return {n: rows[-HISTORY_CAP:] for n, rows in self._since.items() if rows}

    def saved(self) -> None:
        """A checkpoint holds ``unsaved()`` now."""
        self._since = {n: [] for n in self.FILES}

    def log(self, row: dict) -> None:
        self._pending.append(row)

    def log_probe(self, row: dict) -> None:
        append_jsonl(self.dir / "probes.jsonl", [row])
        self._since["probes.jsonl"].append(row)

    def flush(self) -> None:
        append_jsonl(self.dir / "metrics.jsonl", self._pending)
        self._since["metrics.jsonl"] += self._pending
        self._pending = []

    def finish(self, summary: dict) -> None:
        self.flush()


def _repaired(name: str, torn: bytes | None, restored: list, step: int) -> str:
    """``rewind``'s one line about ``name``: its torn last line (the step it names, if it does) and the
    records restored from the checkpoint at ``step``."""
    m = re.match(rb'\s*\{"step":\s*(\d+)', torn or b"")
    at = int(m.group(1)) if m else None
    head = f"{name} ended in a torn line{f' (step {at})' if at is not None else ''}" if torn is not None else name
    if restored:
        steps = ", ".join(map(str, restored[:5])) + (", ..." if len(restored) > 5 else "")
        return f"{head}: restored {len(restored)} record(s) (step {steps}) from the checkpoint at step {step}"
    if at is not None and at > step:
        return f"{head}: dropped, past the checkpoint at step {step}: the resume logs it again"
    return (
        f"{head}: dropped; the checkpoint at step {step} does not hold it (written by an older dw), "
        "so that record is lost"
    )


class Tracker:
    """The local files first, then the mirror (which never raises)."""

    def __init__(self, local: LocalTracker, mirror: "WandbMirror"):
        self.local, self.mirror = local, mirror

    def rewind(self, step: int, carried: dict | None = None) -> list[str]:
        notes = self.local.rewind(step, carried)
        self.mirror.start(step)
        return notes

    def unsaved(self) -> dict:
        return self.local.unsaved()

    def saved(self) -> None:
        self.local.saved()

    def log(self, row: dict) -> None:
        self.local.log(row)
        self.mirror.add(row)

    def log_probe(self, row: dict) -> None:
        self.local.log_probe(row)
        self.mirror.add(row, probe=True)

    def flush(self) -> None:
        self.local.flush()
        self.mirror.flush()

    def finish(self, summary: dict) -> None:
        self.local.finish(summary)
        self.mirror.finish(summary)


def validate(cfg) -> None:
    """Check the ``tracker`` group against the schema (BadInput); call before anything is written."""
    check(cfg, groups=("tracker",))


def make_tracker(cfg, run_dir: Path, run_id: str, config: dict, log=print):
    """The run's tracker: the local files, mirrored to W&B when ``tracker=wandb``."""

    local = LocalTracker(run_dir)
    t = setting(cfg, "tracker")
    if t is None or setting(t, "name", "none") == "none":
        return local
    validate(cfg)
    return Tracker(local, WandbMirror(t, Path(run_dir), run_id, config, log))


class NullTracker:
    """What ranks other than 0 log to: nothing (rank 0 owns the run directory)."""

    def rewind(self, step, carried=None) -> list[str]:
        return []

    def unsaved(self) -> dict:
        return {}

    def saved(self) -> None:
        pass

    def log(self, row) -> None:
        pass

    def log_probe(self, row) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self, summary) -> None:
        pass
