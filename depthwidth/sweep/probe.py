"""Measured throughput: ``dw sweep NAME --dry-run --probe`` times real steps of the sweep's smallest
and largest configurations on the device at hand, records them beside the sweep
(``runs/NAME/probe.json``) and plans with them; later dry runs of the sweep read the record.

Each configuration is trained for a few steps in a fresh process (train/timing.py), so the figures
include what a run pays besides its steps: the process start, set-up (data, model, compile), the
first steps' allocation, and one of each evaluation, gradient probe, entropy profile, checkpoint and
the end's analysis.  The steady step is the median of at least 2 s of steps, each counted on its
core (its wall time less the time the process waited for a core another process held): the plan
prices the device, assuming each run has its threads' cores to itself (a local worker's runs on the
CPU: one worker per core), not the co-tenants of the probe's moment; the dry run says how much the
probe waited.  A run's planned seconds are then

    setup_again + first + steps_planned × step + evals × eval + probes × probe + entropy × entropy_s
      + ckpts × ckpt + analysis

(``setup_again``: a set-up in a process that has set up a run before, as a worker's later runs;
the first set-up's one-time extra, ``setup − setup_again``: lazy imports, the data's first open,
is paid once per process with its start; ``steps_planned``: the trunk and every WSD decay branch;
the counts: plan_costs.events), each piece
interpolated between the two probed configurations log-linearly in FLOPs per step (a step's, an
evaluation's ... cost grows at most in proportion beyond the largest and is the smallest's below
it), plus one process start and first set-up's extra (``process_seconds``) per array task (SLURM)
or once per worker (local workers, debug: a worker's runs share its process).  Runs on another
device than the probe's keep the assumed MFU, and the dry run says which figures are measured and
which assumed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput, WorkFailed

PROBE_STEPS = 10  # timed steps per configuration at least (after 2 warm-up steps; and >= 2 s of them)
PIECES = ("setup_s", "setup_again_s", "first_s", "step_s", "eval_s", "probe_s", "entropy_s", "ckpt_s", "analysis_s")
FIXED = ("setup_s", "setup_again_s")  # the same whatever the size beyond the probed range


def path(store_name: str) -> Path:
    return store.sweep_dir(store_name) / "probe.json"


def flops_per_step(fig: dict) -> float:
    return float(fig["flops_per_token"]) * int(fig["tokens_per_step"])


def run_probe(name: str, store_name: str, runs: list, device_here: str, steps: int = PROBE_STEPS) -> dict:
    """Time the smallest and largest of ``runs`` (by FLOPs per step) here; write and return the record."""
    ok = [r for r in runs if not r.error]
    if not ok:
        raise BadInput(f"sweep {name}: no valid run to probe")
    want = {r.figures["plan"]["device"] for r in ok}
    if want != {device_here}:
        raise BadInput(
            f"--probe times the device at hand ({device_here}) but the runs train on {'/'.join(sorted(want))}: "
            "probe where they train (e.g. on a GPU node with the sweep's launcher settings)"
        )
    pick = sorted({id(r): r for r in (min(ok, key=_f), max(ok, key=_f))}.values(), key=_f)
    points = []
    for r in pick:
        ovr = [o for o in r.overrides if not o.startswith(("run.sweep=", "run.dir="))]
        t0 = time.time()
        p = subprocess.run(
            [sys.executable, "-m", "depthwidth.train.timing", repr(t0), str(steps), *ovr],
            capture_output=True,
            text=True,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")}
            if device_here == "cuda"
            else dict(os.environ),
        )
        if p.returncode != 0:
            tail = " ".join((p.stderr or "").strip().splitlines()[-1:])
            raise WorkFailed(f"the probe of run {r.index} ({r.run_id}) failed: {tail}")
        m = json.loads(p.stdout.strip().splitlines()[-1])
        points.append(
            {
                "index": r.index,
                "run_id": r.run_id,
                "depth": r.figures["depth"],
                "width": r.figures["width"],
                "params": r.figures["params"],
                "flops_per_step": _f(r),
                "wall_s": time.time() - t0,
                **m,
            }
        )
    doc = {
        "sweep": name,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "host": os.uname().nodename,
        "device": device_here,
        "loadavg": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "points": points,
    }
    write_json(path(store_name), doc)
    return doc


def _f(r) -> float:
    return flops_per_step(r.figures)


def read(store_name: str) -> dict | None:
    doc = store.read_json(path(store_name))
    return doc if doc and doc.get("points") else None


def piece(points: list, key: str, f: float) -> float:
    """``key``'s seconds at ``f`` FLOPs per step from the probed points (module docstring)."""
    pts = sorted(points, key=lambda p: p["flops_per_step"])
    lo, hi = pts[0], pts[-1]
    y0, y1 = max(float(lo[key] or 0.0), 0.0), max(float(hi[key] or 0.0), 0.0)
    if f <= lo["flops_per_step"]:
        return y0
    if f >= hi["flops_per_step"]:
        return y1 if key in FIXED else y1 * f / hi["flops_per_step"]
    if y0 <= 0 or y1 <= 0:
        t = (f - lo["flops_per_step"]) / (hi["flops_per_step"] - lo["flops_per_step"])
        return y0 + t * (y1 - y0)
    t = math.log(f / lo["flops_per_step"]) / math.log(hi["flops_per_step"] / lo["flops_per_step"])
    return math.exp(math.log(y0) + t * math.log(y1 / y0))


def _again(points: list) -> list:
    """The points with ``setup_again_s`` (a record written before it was measured: the set-up, in full)."""
    return [p if p.get("setup_again_s") is not None else {**p, "setup_again_s": p["setup_s"]} for p in points]


def process_seconds(points: list) -> float:
    """What a process pays once, before its first run's set-up proper: its start and the first
    set-up's one-time extra over a later one (the most of the probed points)."""
    return max(
        float(p.get("start_s") or 0.0) + max(0.0, float(p["setup_s"] or 0.0) - float(p["setup_again_s"] or 0.0))
        for p in _again(points)
    )


def run_seconds(points: list, row: dict) -> dict:
    """A run's planned seconds, piece by piece, from the probe (its process's one-time costs apart:
    ``process_seconds``)."""
    f, ev = flops_per_step(row), row["events"]
    points = _again(points)
    at = {k: piece(points, k, f) for k in PIECES}
    parts = {
        "setup": at["setup_again_s"],
        "first": at["first_s"],
        "steps": row["steps_planned"] * at["step_s"],
        "evals": ev["evals"] * at["eval_s"],
        "probes": ev["probes"] * at["probe_s"],
        "entropy": ev["entropy"] * at["entropy_s"],
        "ckpts": ev["ckpts"] * at["ckpt_s"],
        "analysis": ev["analysis"] * at["analysis_s"],
    }
    return {**parts, "total": sum(parts.values()), "step_s": at["step_s"]}


def apply(doc: dict | None, rows: list) -> list:
    """Rows on the probe's device get measured hours (``time: measured``, ``seconds`` piece by piece,
    ``start_s``: a process's one-time costs, process_seconds); the others keep the assumed MFU
    (``time: assumed``).  Returns the rows measured."""
    done = []
    for x in rows:
        x["time"] = "assumed"
        if not doc or x["plan"]["device"] != doc["device"]:
            continue
        sec = run_seconds(doc["points"], x)
        procs = x["plan"]["processes"]
        x.update(
            time="measured",
            seconds=sec,
            start_s=process_seconds(doc["points"]),
            wall_hours=sec["total"] / 3600.0,
            device_hours=sec["total"] * procs / 3600.0,
        )
        x["gpu_hours" if x["plan"]["device"] == "cuda" else "cpu_hours"] = x["device_hours"]
        done.append(x)
    return done


def line(doc: dict, measured: list, rows: list) -> str:
    """The dry run's line: which figures are measured (where, when, under what load), which assumed."""
    pts = doc["points"]
    each = "; ".join(
        f"run {p['index']} ({p['depth']}×{p['width']}): {p['tokens_per_s']:,.0f} tokens/s"
        + (f", MFU {p['mfu']:.1%} of {p['peak_flops']:.3g} FLOP/s" if p.get("mfu") is not None else "")
        for p in pts
    )
    start = max(float(p.get("start_s") or 0) for p in pts)
    once = process_seconds(pts)
    timed = [p for p in pts if p.get("steps_timed")]
    waited = max((float(p.get("waited") or 0.0) for p in pts), default=0.0)
    steady = (
        f"steady steps: the median of {'/'.join(str(p['steps_timed']) for p in timed)} timed steps, each on its core "
        f"(the probe waited {waited:.0%} of its steps' time for a core another process held; assumed: each run has "
        "its threads' cores to itself)"
        if timed and any("step_wall_s" in p for p in pts)
        else "steady steps: wall time of a few timed steps (a probe of an earlier version: probe again)"
    )
    left = len(rows) - len(measured)
    return (
        f"measured: {len(measured)} of {len(rows)} runs' hours from the probe of {doc['time']} on {doc['device']} "
        f"({doc['host']}, load {doc['loadavg'][0]:.1f} on {doc['cpus']} CPUs): {each}; {steady}; process start "
        f"{start:.1f} s and the first set-up's one-time extra, {once:.1f} s in all, once per process (a worker, "
        "an array task); a later run's set-up, evaluations, checkpoints, probes and analysis priced as measured"
        + (f"; the other {left} assumed at the stated MFU" if left else "")
    )
