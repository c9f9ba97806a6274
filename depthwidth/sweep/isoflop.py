"""IsoFLOP sweeps: a sweep file's ``isoflop:`` key becomes one block of runs per budget.

    isoflop:
      budgets: [1e18, 1e19, 1e20]   # training compute C per budget, FLOPs
      axis: shape                   # shape | size
      depths: [4, 8, 12, 16, 24, 32]     # axis shape: depth varies ...
      tokens_per_param: 20          # ... at N and T fixed per budget: C = 6·N·T, T = k·N
      count: total                  # the N held fixed: total | non_embedding | matmul parameters
      sizes: [{model.depth: 4, model.width: 256}, ...]   # axis size: the models; T = C / (6·N)

Axis ``shape``: at each budget N = sqrt(C / (6k)) and T = k·N; for every
depth the width is the multiple of ``model.quantum`` whose exact parameter
count (model/accounting.py, the count the run will report) is nearest to N,
so parameters stay within half a quantum step of the target.  Every run of
a budget trains on the same T tokens; its FLOPs (training FLOPs per token ×
T, attention included) differ from C by a few percent, which the dry run
shows per run (column ``C err``).  Axis ``size``: each listed model trains on
T = C / (6·N) tokens.  Each run's ``ref`` records the budget and the target.
"""

from __future__ import annotations

import math
from typing import Any

from depthwidth.config.compose import compose_parts
from depthwidth.core.errors import BadInput, bad
from depthwidth.model.accounting import count_params
from depthwidth.model.resolve import from_config
from depthwidth.sweep.file import MAX_RUNS

KEYS = ("budgets", "axis", "depths", "tokens_per_param", "count", "sizes")
AXES = ("shape", "size")
# matmul: the weights dense training FLOPs count (6 per weight per token: everything but the
# embedding lookup, the LM head included), so C = 6·N·T holds up to attention and rounding.
COUNTS = ("total", "non_embedding", "matmul")
MAX_QUANTA = 1 << 14  # widths up to 16,384 quanta: far past any model this tool plans


def params_of(groups: dict, keys: dict, depth: int, width: int, count: str) -> int | None:
    """Exact parameter count of the run's model at (depth, width); None if that shape is invalid."""
    try:
        cfg = compose_parts(groups, {**keys, "model.depth": int(depth), "model.width": int(width)})
        return int(count_params(from_config(cfg.model))[count])
    except BadInput:  # e.g. heads that do not divide this width: the next quantum may
        return None


def solve_width(groups: dict, keys: dict, depth: int, target: float, count: str = "total") -> dict:
    """The multiple of the width quantum whose parameter count is nearest ``target`` at ``depth``."""
    q = int(compose_parts(groups, keys).model.quantum)
    cache: dict[int, int | None] = {}

    def up(m: int) -> tuple[int, int] | None:
        """(quanta, params) of the first valid width at or above m quanta (heads may skip some)."""
        for j in range(m, m + 16):
            if j not in cache:
                cache[j] = params_of(groups, keys, depth, j * q, count)
            if cache[j] is not None:
                return j, cache[j]
        return None

    # Parameters grow with width: bisect on the number of quanta for the first count >= target.
    lo, hi = 0, 1
    while (v := up(hi)) is not None and v[1] < target:
        lo, hi = hi, hi * 2
        if hi > MAX_QUANTA:
            raise bad("isoflop target params", f"{target:.4g}", f"a count reachable below width {MAX_QUANTA * q}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = up(mid)
        if v is not None and v[1] < target:
            lo = mid
        else:
            hi = mid
    cands = [v for v in (up(hi), up(lo) if lo >= 1 else None) if v is not None]
    below = [j for j in range(lo, 0, -1) if cache.get(j) is not None][:1]  # the valid width just under
    cands += [(j, cache[j]) for j in below]
    if not cands:
        raise BadInput(
            f"isoflop: no valid width near {target:.4g} parameters at depth {depth} "
            f"(multiples of model.quantum={q}; check model.heads / model.head_dim)"
        )
    m, p = min(cands, key=lambda v: abs(v[1] - target))
    return {"width": m * q, "params": p, "target": float(target), "quantum": q, "params_error": (p - target) / target}


def _number(name: str, key: str, v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise bad(f"sweep {name}: isoflop.{key}", v, "a positive number") from None
    if not (x > 0 and math.isfinite(x)):
        raise bad(f"sweep {name}: isoflop.{key}", v, "a positive number")
    return x


def blocks(name: str, doc: dict) -> list[dict]:
    """One block per budget, explicit runs with model.depth, model.width, tokens and ref."""
    iso = doc["isoflop"]
    if not isinstance(iso, dict):
        raise bad(f"sweep {name}: isoflop", iso, "a mapping with keys " + ", ".join(KEYS))
    unknown = [k for k in iso if k not in KEYS]
    if unknown:
        raise BadInput(f"sweep {name}: isoflop: unknown key {unknown[0]!r} (allowed: {', '.join(KEYS)})")
    axis = iso.get("axis", "shape")
    if axis not in AXES:
        raise bad(f"sweep {name}: isoflop.axis", axis, " | ".join(AXES))
    budgets = iso.get("budgets")
    if not isinstance(budgets, list) or not budgets:
        raise bad(f"sweep {name}: isoflop.budgets", budgets, "a non-empty list of FLOPs")
    per = iso.get("depths") if axis == "shape" else iso.get("sizes")
    per = len(per) if isinstance(per, list) else 1
    if len(budgets) * per > MAX_RUNS:  # before any width is solved
        raise bad(
            f"sweep {name}: isoflop runs",
            f"{len(budgets):,} budgets x {per:,} {'depths' if axis == 'shape' else 'sizes'}",
            f"at most {MAX_RUNS:,} runs per sweep",
        )
    budgets = [_number(name, "budgets", c) for c in budgets]
    count = iso.get("count", "total")
    if count not in COUNTS:
        raise bad(f"sweep {name}: isoflop.count", count, " | ".join(COUNTS))
    groups, keys = dict(doc.get("groups") or {}), dict(doc.get("fixed") or {})
    out = []
    for C in budgets:
        runs = []
        if axis == "shape":
            depths = iso.get("depths")
            if not isinstance(depths, list) or not depths or not all(isinstance(d, int) and d >= 1 for d in depths):
                raise bad(f"sweep {name}: isoflop.depths", depths, "a non-empty list of depths >= 1")
            k = _number(name, "tokens_per_param", iso.get("tokens_per_param", 20))
            N = math.sqrt(C / (6.0 * k))
            T = int(round(k * N))
            for d in depths:
                s = solve_width(groups, keys, d, N, count)
                runs.append(
                    {
                        "model.depth": d,
                        "model.width": s["width"],
                        "tokens": {"value": T},
                        "ref": {
                            "source": "isoflop",
                            "budget": C,
                            "target_params": N,
                            "params_error": s["params_error"],
                            "count": count,
                        },
                    }
                )
        else:
            sizes = iso.get("sizes")
            if not isinstance(sizes, list) or not sizes or not all(isinstance(m, dict) and m for m in sizes):
                raise bad(f"sweep {name}: isoflop.sizes", sizes, "a non-empty list of mappings of model keys")
            for m in sizes:
                cfg = compose_parts(groups, {**keys, **m})
                N = count_params(from_config(cfg.model))[count]
                runs.append(
                    {
                        **m,
                        "tokens": {"value": int(round(C / (6.0 * N)))},
                        "ref": {"source": "isoflop", "budget": C, "count": count},
                    }
                )
        out.append({"label": f"C={C:.0e}", "runs": runs})
    return out


def with_blocks(name: str, doc: dict) -> dict:
    """``doc`` with its ``isoflop`` key replaced by blocks (appended to any blocks it has)."""
    if "isoflop" not in doc:
        return doc
    top = [k for k in ("runs", "axes", "zip") if doc.get(k)]
    if top and not doc.get("blocks"):
        raise BadInput(f"sweep {name}: isoflop with top-level {top[0]}: put the other runs in blocks")
    d = {k: v for k, v in doc.items() if k != "isoflop"}
    d["blocks"] = list(doc.get("blocks") or []) + blocks(name, doc)
    return d
