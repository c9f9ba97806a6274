"""The analysis.json format (docs/CONTRACTS.md), torch-free: written by ``train.analysis``,
read by ``dw report``.

``RUN_DIR/analysis.json`` analyses the run's newest checkpoint (``--checkpoint
final``, what ``train.analyze_at_end`` writes and the report reads);
``RUN_DIR/analysis_step_N.json`` (N zero-padded to 8 digits, like ``ckpt/step_N``)
one named checkpoint.  Both sit next to ``ckpt/``, outside the checkpoint
directories, so pruning old checkpoints never deletes an analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

FILE = "analysis.json"
SCHEMA = "dw.analysis/1"
# per-layer keys, in the order tables print them
LAYER_KEYS = ("entropy_prefix", "entropy_full", "mlp_density", "mlp_dead", "mlp_balance", "lens_ce",
              "lens_target_prob", "lens_entropy", "lens_kl_final", "lens_kl_prev")


def path_for(run_dir, step: int | None = None) -> Path:
    """Where the analysis of ``step`` (None: the newest checkpoint) is written."""
    return Path(run_dir) / (FILE if step is None else f"analysis_step_{int(step):08d}.json")


def read(run_dir, step: int | None = None) -> dict | None:
    """The analysis document, or None when absent or unreadable."""
    p = path_for(run_dir, step)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("schema") == SCHEMA and isinstance(d.get("layers"), list) else None


def column(doc: dict, key: str) -> list:
    """One per-layer measure as a list (index 0 = layer 1)."""
    return [row.get(key) for row in doc["layers"]]
