"""W&B's offline run logs (``RUN_DIR/wandb/offline-run-*/run-ID.wandb``), read by W&B itself.

The ``.wandb`` file is W&B's private transaction log; dw does not parse it.
``wandb leet inspect --json FILE`` (W&B's own reader, in its public CLI since
0.2x) prints one JSON object per record: ``{"num": 1, "type": "header", ...}``,
``{"type": "history", "history": {"item": {"_step": 5, ...}}}``, ..., and
``{"type": "exit", ...}`` once a run finished.  A torn tail (a killed writer)
ends the list quietly, as W&B's own ``wandb sync`` treats it.

Where W&B cannot read a file (a release changed the format, a corrupt header,
no ``leet`` command in this wandb) ``WandbLogError`` says so, with W&B's own
message: the caller turns the mirror off or reports the segment, never guesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 120.0


class WandbLogError(RuntimeError):
    """W&B could not read a .wandb file (its message included)."""


def records(path: str | os.PathLike) -> list[dict]:
    """Every record of one .wandb file, in order (W&B's reader, one subprocess)."""
    cmd = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WandbLogError(f"wandb leet inspect {path}: {type(e).__name__}: {e}") from None
    if p.returncode != 0:
        why = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
        raise WandbLogError(f"wandb leet inspect {path}: {why[-1] if why else f'exit code {p.returncode}'}")
    out = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                raise WandbLogError(f"wandb leet inspect {path}: not one JSON object per line: {line[:80]!r}") from None
    return out


def history_steps(path: str | os.PathLike) -> list[int]:
    """The ``_step`` of every history row of one .wandb file, in order."""
    steps = []
    for r in records(path):
        if r.get("type") == "history":
            step = (r.get("history") or {}).get("item", {}).get("_step")
            if step is not None:
                steps.append(int(step))
    return steps


def finished(path: str | os.PathLike) -> bool:
    """Whether the run that wrote this file recorded its exit."""
    return any(r.get("type") == "exit" for r in records(path))


def last_history_step(files) -> int:
    """The largest history step recorded in these .wandb files, oldest first (-1: none; a
    file that vanished counts as empty).  The mirror never sends a step at or below what
    earlier segments hold, so the newest segment with any history holds the largest: the
    files are read newest first and the first with history ends the search (one read per
    restart, not one per segment).  Raises WandbLogError where W&B cannot read a file it needs."""
    for f in reversed(list(files)):
        steps = history_steps(f) if Path(f).exists() else []
        if steps:
            return max(steps)
    return -1
