"""Where a run's history goes: the run directory always, W&B as a mirror.

``LocalTracker`` appends ``metrics.jsonl`` / ``probes.jsonl`` in the run
directory, the source of truth.  On resume from step s, lines past s (logged
after the checkpoint the run resumes from) are dropped first, so no step is
ever recorded twice.

``tracker=wandb`` adds the W&B mirror (mirror.py), which copies the same rows
to one W&B run per dw run; the local files stay the source of truth.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from depthwidth.config.check import check
from depthwidth.core.atomic import append_jsonl, read_jsonl, write_jsonl
from depthwidth.track.mirror import WandbMirror, setting

if TYPE_CHECKING:
    from depthwidth.track.mirror import WandbMirror


class LocalTracker:
    FILES = ("metrics.jsonl", "probes.jsonl")

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)
        self._pending: list[dict] = []

    def rewind(self, step: int) -> None:
        """Forget every line logged after ``step`` (resume point)."""
        for name in self.FILES:
            path = self.dir / name
            if path.exists():
                rows = read_jsonl(path)
                keep = [r for r in rows if r.get("step", 0) <= step]
                if len(keep) != len(rows) or path.read_bytes()[-1:] not in (b"\n", b""):
                    write_jsonl(path, keep)

    def log(self, row: dict) -> None:
        self._pending.append(row)

    def log_probe(self, row: dict) -> None:
        append_jsonl(self.dir / "probes.jsonl", [row])

    def flush(self) -> None:
        append_jsonl(self.dir / "metrics.jsonl", self._pending)
        self._pending = []

    def finish(self, summary: dict) -> None:
        self.flush()


class Tracker:
    """The local files first, then the mirror (which never raises)."""

    def __init__(self, local: LocalTracker, mirror: "WandbMirror"):
        self.local, self.mirror = local, mirror

    def rewind(self, step: int) -> None:
        self.local.rewind(step)
        self.mirror.start(step)

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

    def rewind(self, step) -> None:
        pass

    def log(self, row) -> None:
        pass

    def log_probe(self, row) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self, summary) -> None:
        pass
