"""The MoE router's load per layer, from the runs' probes (``probes.jsonl`` → ``router``).

A layer's load is the share of its token-slots each of its E experts received in a
probe step (train/probes.py).  Balanced routing gives every expert 1/E; the table
reads the last probe step of each MoE run and shows, over its layers, the mean and
worst ``max share × E`` (1.00 = balanced, E = one expert takes everything), the
least-used expert's ``min share × E`` and the normalised entropy of the shares
(1 = balanced), plus the tokens dropped (dw's experts have no capacity: 0).
"""

from __future__ import annotations

import math

from depthwidth.core.tables import Col, Table


def _entropy(shares: list[float]) -> float:
    E = len(shares)
    if E < 2:
        return 1.0
    return -sum(p * math.log(p) for p in shares if p > 0) / math.log(E)


def router_table(probes: list[dict]) -> Table | None:
    """One row per MoE run (None when no run recorded router loads)."""
    rows = []
    for run in probes:
        recs = [r for r in run.get("probes") or [] if isinstance(r.get("router"), dict)]
        if not recs:
            continue
        last = recs[-1]
        load = last["router"]["load"]
        E = len(load[0]) if load else 0
        over = [max(layer) * E for layer in load]
        worst = max(range(len(over)), key=over.__getitem__)
        rows.append(
            {
                "run": run["run"],
                "shape": run.get("shape") or "uniform",
                "width": run.get("width"),
                "depth": run.get("depth"),
                "step": last.get("step"),
                "experts": E,
                "mean_max": sum(over) / len(over),
                "worst_max": over[worst],
                "worst_layer": worst + 1,
                "min_share": min(min(layer) * E for layer in load),
                "entropy": sum(_entropy(layer) for layer in load) / len(load),
                "dropped": sum(last["router"].get("dropped") or []),
            }
        )
    if not rows:
        return None
    cols = [
        Col("run", "run"),
        Col("shape", "shape"),
        Col("width", "h"),
        Col("depth", "L"),
        Col("step", "step"),
        Col("experts", "E"),
        Col("mean_max", "max share×E (mean over layers)", "{:.2f}"),
        Col("worst_max", "worst layer: max share×E", "{:.2f}"),
        Col("worst_layer", "worst layer"),
        Col("min_share", "least-used expert: share×E", "{:.2f}"),
        Col("entropy", "load entropy (1 = balanced)", "{:.3f}"),
        Col("dropped", "tokens dropped"),
    ]
    return Table(
        "router",
        "MoE router load at the last probe step (1.00 = every expert an equal share)",
        cols,
        rows,
        notes=["dw's experts have no capacity limit, so no token is ever dropped"],
    )
