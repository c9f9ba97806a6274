"""Run tables pulled from the W&B API (``dw fit/report --source wandb``).

``run_table_from_wandb("ENTITY/PROJECT", group)`` returns the same columns as
``depthwidth.track.table.run_table``: one row per token-budget point of every run,
read from what ``tracking.WandbMirror`` writes: the run summary (``budgets``,
``final_val_loss``, ``params``, ``flops_per_token``, ``depth``, ``width``,
``shape``, ``seed``, ``status``) and, for a run that never finished (no
summary written), its config (``accounting``, ``model``, ``run``).

One API query lists the runs with their config and summary (``lazy=False``);
``wandb`` is imported only when no ``api`` is passed.
"""

from __future__ import annotations

import math
import re

from depthwidth.config.schema import WANDB_ENTITY, WANDB_ENTITY_ALLOWED, WANDB_NAME, WANDB_NAME_ALLOWED
from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.model.shapes import ALIASES
from depthwidth.track.table import TABLE_COLUMNS, mean_width

# W&B run states -> dw status, for runs whose summary has no dw status
_STATES = {"running": "running", "pending": "pending", "finished": "done"}
_PROJECT = re.compile(f"{WANDB_ENTITY}/{WANDB_NAME}")


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _family(model: dict) -> str | None:
    if not model:
        return None
    if model.get("widths"):
        return "custom"

    s = model.get("shape")
    return ALIASES.get(s, s) if s is not None else None


def rows_for_run(run_id: str, summary: dict, config: dict, state: str | None = None) -> list[dict]:
    """Table rows of one W&B run from its summary and config (plain dicts)."""
    summary, config = dict(summary or {}), dict(config or {})
    acc = config.get("accounting") or {}
    model = config.get("model") or {}
    run_cfg = config.get("run") or {}
    pick = lambda key, fallback: summary.get(key) if summary.get(key) is not None else fallback  # noqa: E731
    status = summary.get("status") or _STATES.get(str(state or "").lower(), "failed")
    base = {
        "run": str(summary.get("run_id") or config.get("run_id") or run_id),
        "params": _num(pick("params", acc.get("params"))),
        "params_non_embedding": _num(pick("params_non_embedding", acc.get("params_non_embedding"))),
        "params_active": _num(pick("params_active", acc.get("params_active"))),
        "depth": _num(pick("depth", model.get("depth"))),
        "width": _num(pick("width", model.get("width"))),
        "seed": pick("seed", run_cfg.get("seed")),
        "shape": pick("shape", _family(model)),
        "status": status,
        "mean_width": mean_width(summary.get("widths"), acc.get("mean_width", pick("width", model.get("width")))),
        "kv_bytes_per_token": _num(pick("kv_bytes_per_token", acc.get("kv_bytes_per_token"))),
        "simulated": bool((summary.get("provenance") or config.get("provenance") or {}).get("simulated")),
    }
    fpt = _num(pick("flops_per_token", acc.get("flops_per_token")))
    budgets = summary.get("budgets") or []
    points = [(b.get("tokens"), b.get("val_loss"), b.get("step")) for b in budgets if isinstance(b, dict)]
    if not points:
        points = [(summary.get("tokens"), summary.get("final_val_loss"), summary.get("steps"))]
    out = []
    for tokens, loss, step in points:
        t = _num(tokens)
        out.append(
            {
                **base,
                "tokens": t,
                "loss": _num(loss),
                "flops": fpt * t if math.isfinite(t) else float("nan"),
                "step": step,
            }
        )
    return out


def run_table_from_wandb(project: str, group: str | None = None, api=None):
    """DataFrame of the runs of ``ENTITY/PROJECT`` (optionally one group = one sweep).

    ``api``: a ``wandb.Api`` (default: a new one, which needs a key / login and
    network).  Columns as ``track.table.run_table``.
    """
    import pandas as pd

    if not isinstance(project, str) or not _PROJECT.fullmatch(project):
        raise BadInput(
            f"bad value for --project: {project!r} (allowed: ENTITY/PROJECT; "
            f"ENTITY {WANDB_ENTITY_ALLOWED}; PROJECT {WANDB_NAME_ALLOWED})"
        )
    if api is None:
        try:
            import wandb

            api = wandb.Api(timeout=60)
        except Exception as e:
            raise WorkFailed(
                f"cannot reach the W&B API: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
            ) from None
    filters = {"group": group} if group else None
    rows: list[dict] = []
    try:
        for r in api.runs(project, filters=filters, per_page=200, lazy=False):
            rows += rows_for_run(r.id, r.summary_metrics, r.config, getattr(r, "state", None))
    except (BadInput, WorkFailed):
        raise
    except Exception as e:
        raise WorkFailed(
            f"W&B API query for {project} failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        ) from None
    df = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    df.attrs["source"] = f"wandb:{project}" + (f" group {group}" if group else "")
    df.attrs["unreadable"] = []
    return df
