"""The analysis.json format (docs/CONTRACTS.md), torch-free: written by ``train.analysis``,
read by ``dw report``.

``RUN_DIR/analysis.json`` analyses the run's newest checkpoint (``--checkpoint
final``, what ``train.analyze_at_end`` writes and the report reads);
``RUN_DIR/analysis_step_N.json`` (N zero-padded to 8 digits, like ``ckpt/step_N``)
one named checkpoint.  Both sit next to ``ckpt/``, outside the checkpoint
directories, so pruning old checkpoints never deletes an analysis.

Schema ``dw.analysis/2`` (the current one): ``lens_target_prob`` = exp(−lens_ce),
``lens_target_prob_mean`` the arithmetic mean, SwiGLU units active at the
layer's CETT threshold ``mlp_threshold`` (``options.mlp_rule``).  ``dw.analysis/1``
documents still read: their arithmetic ``lens_target_prob`` moves to
``lens_target_prob_mean`` and ``lens_target_prob`` becomes exp(−lens_ce); their
MLP numbers used a fixed |a| > ``options.swiglu_threshold`` (``mlp_rule``
"fixed"), which cannot be redone without the model — ``dw analyze SWEEP``
re-analyses such runs (``current`` is False for them).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

FILE = "analysis.json"
SCHEMA = "dw.analysis/2"
OLDER = ("dw.analysis/1",)  # still read (``read`` brings them to the current keys)
# per-layer keys, in the order tables print them
LAYER_KEYS = (
    "entropy_prefix",
    "entropy_full",
    "mlp_density",
    "mlp_dead",
    "mlp_balance",
    "mlp_threshold",
    "lens_ce",
    "lens_target_prob",
    "lens_target_prob_mean",
    "lens_entropy",
    "lens_kl_final",
    "lens_kl_prev",
)


def path_for(run_dir, step: int | None = None) -> Path:
    """Where the analysis of ``step`` (None: the newest checkpoint) is written."""
    return Path(run_dir) / (FILE if step is None else f"analysis_step_{int(step):08d}.json")


def read(run_dir, step: int | None = None) -> dict | None:
    """The analysis document (an older schema's brought to the current keys), or None when
    absent or unreadable."""
    p = path_for(run_dir, step)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(d, dict) and d.get("schema") in (SCHEMA, *OLDER) and isinstance(d.get("layers"), list)):
        return None
    return d if d["schema"] == SCHEMA else _from_v1(d)


def current(run_dir, step: int | None = None) -> bool:
    """Whether the analysis of ``step`` exists and was measured with the current definitions."""
    d = read(run_dir, step)
    return d is not None and d["schema"] == SCHEMA


def _from_v1(d: dict) -> dict:
    """dw.analysis/1: p(target) was the arithmetic mean; MLP units active at a fixed |a| > threshold."""
    for row in [*d["layers"], d.get("embedding_lens") or {}]:
        if isinstance(row, dict) and "lens_target_prob_mean" not in row:
            row["lens_target_prob_mean"] = row.get("lens_target_prob")
            ce = row.get("lens_ce")
            row["lens_target_prob"] = math.exp(-ce) if isinstance(ce, (int, float)) else None
    o = d.get("options")
    if isinstance(o, dict) and "mlp_rule" not in o:
        o["mlp_rule"] = "gelu>0" if o.get("mlp") == "gelu" else "fixed"
    return d


def column(doc: dict, key: str) -> list:
    """One per-layer measure as a list (index 0 = layer 1)."""
    return [row.get(key) for row in doc["layers"]]
