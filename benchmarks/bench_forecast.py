"""How well ``dw status``'s forecast final loss does: finished runs forecast from the first part
of their curves (``--fraction``, 0.5: half their tokens), against their measured final loss.

    python benchmarks/bench_forecast.py                      # the demo sweep under out/bench_forecast/runs,
                                                             # trained first if it has no finished runs
    python benchmarks/bench_forecast.py --root runs --sweep demo      # any store of finished runs
    python benchmarks/bench_forecast.py --curve train        # the training-loss curve instead
    python benchmarks/bench_forecast.py --json out.json

Prints one line per run (forecast and interval, measured, error, covered) and a summary
line: mean absolute error, mean error (bias), coverage of the 95% intervals, their mean width.

The curve is the one ``dw status`` uses: held-out (``val_loss`` lines, ``train.eval_every`` > 0)
when the run logs enough of it, else training; the measured value is the run's
``final_val_loss``.  ``--curve train`` forecasts from the training loss and compares with the
run's final training loss (the mean over its last 5% of tokens: one batch's loss is noisy).

Training the demo here (``--train``, or an empty store): ``sweeps/demo.yaml``'s 16 runs with
``launcher=local`` and 2 workers, logging the training loss every 5 steps and the held-out
loss every 15 (20 points per run), without the WSD budget branches, probes and end-of-run
analysis (the main run's curve and final loss are the demo's own: branches restore every
state they touch, evaluations draw no random numbers).  About 4 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEMO_OVERRIDES = [
    "launcher=local",
    "launcher.workers=2",
    "train.log_every=5",
    "train.eval_every=15",
    "train.budgets=[]",
    "probe.every=0",
    "probe.entropy_every=0",
    "train.analyze_at_end=false",
]
TAIL = 0.05  # --curve train: the final training loss is the mean over this last share of tokens


def dw(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DW_RUNS": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "depthwidth", *args], cwd=REPO, env=env, capture_output=True, text=True
    )


def status(root: Path, sweep: str) -> dict | None:
    p = dw(root, "status", sweep, "--json")
    return json.loads(p.stdout) if p.returncode == 0 else None


def train_demo(root: Path, sweep: str) -> None:
    """Submit the sweep with the benchmark's overrides and wait until no run is pending or running."""
    t0 = time.perf_counter()
    p = dw(root, "sweep", sweep, *DEMO_OVERRIDES)
    if p.returncode != 0:
        raise SystemExit(f"dw sweep {sweep} failed ({p.returncode}): {p.stderr.strip()}")
    while True:
        st = status(root, sweep)
        if st and st["counts"]["running"] + st["counts"]["pending"] == 0:
            break
        time.sleep(5)
    print(f"trained {sweep} under {root}: {st['counts']['done']} done in {time.perf_counter() - t0:.0f} s")


def measured_train(run_dir: Path, total: float) -> float | None:
    from depthwidth.core.atomic import read_jsonl

    tail = [r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl") if r.get("tokens", 0) >= (1 - TAIL) * total]
    return sum(tail) / len(tail) if tail else None


def one(row: dict, fraction: float, curve: str) -> dict | None:
    """The forecast of one finished run from the first ``fraction`` of its tokens, and the measured loss."""
    import numpy as np

    from depthwidth.core.atomic import read_jsonl
    from depthwidth.fit import run_forecast as rf
    from depthwidth.fit.forecast import forecast

    rd = Path(row["run_dir"])
    if curve == "auto":
        f, why = rf.forecast_run(rd, fraction)
        measured = row.get("final_val_loss")
    else:
        cfg = rf.read_config(rd)
        total, sched = rf.run_schedule(cfg)
        rows = [r for r in read_jsonl(rd / "metrics.jsonl") if r.get("tokens", 0) <= fraction * total]
        t = np.array([r["tokens"] for r in rows if "loss" in r], dtype=float)
        y = np.array([r["loss"] for r in rows if "loss" in r], dtype=float)
        fc = forecast(t, y, total, sched)
        f, why = ({**fc.to_dict(), "curve": "train"}, None) if fc else (None, "too short")
        measured = measured_train(rd, total)
    if f is None or measured is None:
        return {"run_id": row["run_id"], "why": why or "no measured final loss"}
    return {
        "run_id": row["run_id"],
        "config": f"{row.get('depth')}x{row.get('width')} {row.get('shape')}",
        "curve": f["curve"],
        "decay": f["decay"],
        "n_points": f["n_points"],
        "forecast": f["mean"],
        "lo": f["lo"],
        "hi": f["hi"],
        "measured": measured,
        "error": f["mean"] - measured,
        "covered": f["lo"] <= measured <= f["hi"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(REPO / "out" / "bench_forecast" / "runs"), help="the run store root")
    ap.add_argument("--sweep", default="demo", help="the sweep (its finished runs are forecast)")
    ap.add_argument("--fraction", type=float, default=0.5, help="forecast from this first share of the tokens")
    ap.add_argument("--curve", choices=("auto", "train"), default="auto", help="auto: as dw status chooses")
    ap.add_argument("--train", action="store_true", help="train the sweep first (the demo's settings above)")
    ap.add_argument("--json", help="also write the per-run figures and the summary here")
    a = ap.parse_args()
    root = Path(a.root).absolute()
    st = status(root, a.sweep)
    if a.train or not st or not st["counts"]["done"]:
        train_demo(root, a.sweep)
        st = status(root, a.sweep)
    t0 = time.perf_counter()
    res = [one(r, a.fraction, a.curve) for r in st["runs"] if r["state"] == "done"]
    seconds = time.perf_counter() - t0
    ok = [r for r in res if "error" in r]
    print(f"{'run':12s}  {'config':18s} {'curve':5s} {'decay':6s} {'n':>3s}  {'forecast [95%]':>26s}  measured   error")
    for r in res:
        if "error" not in r:
            print(f"{r['run_id']:12s}  no forecast: {r['why']}")
            continue
        print(
            f"{r['run_id']:12s}  {r['config']:18s} {r['curve']:5s} {r['decay']:6s} {r['n_points']:3d}  "
            f"{r['forecast']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]  {r['measured']:8.4f}  {r['error']:+.3f}"
            f"{'' if r['covered'] else '  (outside)'}"
        )
    if not ok:
        raise SystemExit("no run could be forecast")
    n = len(ok)
    summary = {
        "sweep": a.sweep,
        "fraction": a.fraction,
        "curve": a.curve,
        "runs": n,
        "mean_abs_error": sum(abs(r["error"]) for r in ok) / n,
        "mean_error": sum(r["error"] for r in ok) / n,
        "coverage": sum(r["covered"] for r in ok) / n,
        "mean_width": sum(r["hi"] - r["lo"] for r in ok) / n,
        "seconds": seconds,
    }
    print(
        f"{a.sweep}: {n} finished runs forecast from the first {100 * a.fraction:.0f}% of their tokens "
        f"({a.curve} curve): mean |error| {summary['mean_abs_error']:.3f} nats, mean error "
        f"{summary['mean_error']:+.3f}, 95% intervals cover {sum(r['covered'] for r in ok)}/{n} "
        f"({100 * summary['coverage']:.0f}%), mean width {summary['mean_width']:.3f}; {seconds:.1f} s"
    )
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "runs": res}, indent=2))


if __name__ == "__main__":
    main()
