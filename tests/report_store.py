"""A small run store written directly in the formats of docs/CONTRACTS.md.

No training: summary.json, probes.jsonl, a manifest and local-launcher task
files are written by hand, so every number a report shows is known here.
Losses follow a smooth made-up law with a mild U in depth; gradient profiles
decay exactly as exp(-(L-1-l)/tau(W)) with tau(W) = 0.5 * W^0.44.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from depthwidth.core.atomic import append_jsonl, write_json, write_jsonl

V = 256
GRID_DEPTHS = (2, 4, 6)
GRID_WIDTHS = (32, 64)
SHAPE_WIDTHS = {  # h = 64, L = 4
    "increasing": [32, 56, 72, 88],
    "decreasing": [88, 72, 56, 32],
    "diamond": [40, 80, 80, 40],
    "x": [88, 40, 40, 88],
}


def tau(w: int) -> float:
    return 0.5 * w**0.44


def loss_of(depth: int, width: int, seed: int, shape: str = "uniform") -> float:
    base = 2.0 + 8.0 / math.sqrt(width) + 0.01 * (depth - 4) ** 2
    bump = {"uniform": 0.0, "increasing": 0.02, "decreasing": 0.03, "diamond": 0.04, "x": -0.015}[shape]
    return round(base + bump + 0.004 * (seed - 1), 6)


def accounting(widths, h, seq=64):
    params = 2 * V * h + sum(16 * w * w for w in widths)
    return {
        "params": params,
        "params_non_embedding": params - 2 * V * h,
        "flops_per_token": 6.0 * (params - V * h) + 12.0 * (seq + 1) / 2 * sum(widths),
        "kv_bytes_per_token": sum(4 * w for w in widths),
    }


PROV_A = {
    "dw": "0.1.0",
    "git": {"commit": "a" * 40, "dirty": False, "root": "/src"},
    "versions": {"python": "3.11.7", "torch": "2.13.0", "numpy": "2.0", "scipy": "1.14"},
    "device": "cpu",
    "precision": "fp32",
    "data": "d" * 16,
    "job_id": None,
    "host": "h",
    "time": "t",
}
PROV_B = {
    **PROV_A,
    "git": {"commit": "b" * 40, "dirty": True, "root": "/src"},
    "device": "cuda:0 (NVIDIA H200)",
    "precision": "bf16",
}  # the x-shape run: another commit, a dirty tree, another precision


def summary(rid, depth, width, seed, shape="uniform", widths=None, status="done", tokens=10000, reason=None):
    widths = widths or [width] * depth
    a = accounting(widths, width)
    loss = loss_of(depth, width, seed, shape)
    budgets = [
        {"tokens": tokens // 2, "step": 10, "val_loss": round(loss + 0.3, 6)},
        {"tokens": tokens, "step": 20, "val_loss": loss},
    ]
    if status != "done":
        budgets = budgets[:1] if status == "failed" else []
    return {
        "run_id": rid,
        "sweep": "t",
        "status": status,
        "reason": reason,
        "final_val_loss": loss if status == "done" else None,
        "tokens": tokens if status == "done" else tokens // 2,
        "steps": 20,
        "depth": depth,
        "width": width,
        "widths": widths,
        "shape": shape,
        "seed": seed,
        "budgets": budgets,
        "bayes_loss": None,
        "wall_time_s": 1.0,
        "device": "cpu",
        "provenance": PROV_B if shape == "x" else PROV_A,
        **a,
    }


def probes(depth, width, shape="uniform"):
    t = tau(width)
    out = []
    for step in (10, 20):
        g = [0.5 * math.exp(-((depth - 1) - l) / t) for l in range(depth)]
        ent = [0.9 - 0.5 * math.sin(math.pi * (l + 0.5) / depth) * (0.3 if shape == "x" else 1.0) for l in range(depth)]
        out.append({"step": step, "tokens": step * 500, "grad_norm": {"block": g, "attn": g, "mlp": g}, "entropy": ent})
    return out


def build(root: Path, name: str = "t", *, failed: bool = False, pending: bool = False, seeds: bool = True) -> dict:
    """Write ROOT/NAME; returns {run_id: summary or None (pending)}."""
    d = Path(root) / name
    d.mkdir(parents=True, exist_ok=True)
    runs: dict = {}
    events = []
    specs = []
    for depth in GRID_DEPTHS:
        for width in GRID_WIDTHS:
            specs.append((f"u{depth}x{width}s1", depth, width, 1, "uniform", None, "done"))
    if seeds:
        specs.append(("u4x32s2", 4, 32, 2, "uniform", None, "done"))
        specs.append(("u4x32s3", 4, 32, 3, "uniform", None, "done"))
    specs.append(("shape-uniform", 4, 64, 1, "uniform", None, "dup"))  # the grid's 4x64 is the baseline
    for s, ws in SHAPE_WIDTHS.items():
        specs.append((f"shape-{s}", 4, 64, 1, s, ws, "done"))
    if failed:
        specs.append(("f8x32", 8, 32, 1, "uniform", None, "failed"))
        specs.append(("d8x64", 8, 64, 1, "uniform", None, "diverged"))
    if pending:
        specs.append(("p2x96", 2, 96, 1, "uniform", None, "pending"))
    jobs = d / "jobs" / "x"
    jobs.mkdir(parents=True, exist_ok=True)
    write_json(jobs / "worker-0.json", {"state": "running", "pid": os.getpid()})
    i = 0
    for rid, depth, width, seed, shape, ws, status in specs:
        if status == "dup":
            continue
        ref = {"source": "published", "loss": 3.1, "note": "test ref"} if rid == "u2x64s1" else None
        ovr = [f"model.depth={depth}", f"model.width={width}", f"model.shape={shape}", f"run.seed={seed}"]
        job = f"local-x_{i}"
        events.append(
            {
                "event": "submit",
                "run_id": rid,
                "overrides": ovr,
                "run_dir": str(d / rid),
                "launcher": "local",
                "job_id": job,
                "label": "grid" if shape == "uniform" else "shapes",
                "ref": ref,
                "tokens_total": 10000,
                "params": None,
                "index": i,
            }
        )
        if status == "pending":
            write_json(jobs / f"task-{i}.json", {"job_id": job, "state": "queued"})
            runs[rid] = None
        else:
            events.append({"event": "start", "run_id": rid, "job_id": job, "restart": 0})
            write_json(jobs / f"task-{i}.json", {"job_id": job, "state": "completed" if status == "done" else "failed"})
            s = summary(
                rid,
                depth,
                width,
                seed,
                shape,
                ws,
                status,
                reason={"failed": "RuntimeError: out of memory", "diverged": "loss is nan at step 7"}.get(status),
            )
            write_json(d / rid / "summary.json", s)
            write_jsonl(d / rid / "probes.jsonl", probes(depth, width, shape))
            runs[rid] = s
        i += 1
    append_jsonl(d / "manifest", events)
    return runs
