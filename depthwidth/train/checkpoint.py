"""Checkpoints: atomic, checksummed, loadable with ``weights_only=True``.

``ckpt/step_00000040.pt`` holds the training state; ``step_00000040.sha256``
its checksum.  A checkpoint whose bytes do not match (a truncated write, a
bad disk) is skipped with a warning and the previous one is used.
"""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

from depthwidth.core.atomic import write_bytes, write_text


def _paths(ckpt_dir: Path, step: int) -> tuple[Path, Path]:
    return ckpt_dir / f"step_{step:08d}.pt", ckpt_dir / f"step_{step:08d}.sha256"


def save(ckpt_dir: Path, step: int, state: dict, keep: int = 2) -> Path:
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    pt, sha = _paths(ckpt_dir, step)
    # Steps newer than this one are leftovers of a corrupt checkpoint we resumed
    # past: drop them, or pruning below could keep them and delete this one.
    for newer in [s for s in list_steps(ckpt_dir) if s > step]:
        for p in _paths(ckpt_dir, newer):
            p.unlink(missing_ok=True)
    write_bytes(pt, data)
    write_text(sha, hashlib.sha256(data).hexdigest() + "\n")
    for old in list_steps(ckpt_dir)[:-keep] if keep > 0 else []:
        for p in _paths(ckpt_dir, old):
            p.unlink(missing_ok=True)
    return pt


def list_steps(ckpt_dir: Path) -> list[int]:
    if not ckpt_dir.is_dir():
        return []
    return sorted(int(p.stem.split("_")[1]) for p in ckpt_dir.glob("step_*.pt"))


def load_latest(ckpt_dir: Path, warn=None) -> dict | None:
    """Newest checkpoint whose checksum verifies, or None."""
    import torch

    warn = warn or (lambda m: print(f"dw: warning: {m}", file=sys.stderr))
    for step in reversed(list_steps(ckpt_dir)):
        pt, sha = _paths(ckpt_dir, step)
        try:
            data = pt.read_bytes()
            expected = sha.read_text().strip()
        except OSError:
            warn(f"checkpoint {pt.name} has no checksum; skipping it")
            continue
        if hashlib.sha256(data).hexdigest() != expected:
            warn(f"checkpoint {pt.name} is corrupt (checksum mismatch); falling back to the previous one")
            continue
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    return None
