"""Run every benchmark in this folder (``make bench``); each prints a table and a JSON line.

The timing targets of the issues live here, not in the tests:
  bench_model.py   uniform model tokens/s vs a plain transformer (≥ 0.95×); × vs uniform step time (≤ 1.0×)
  bench_shapes.py  ×, <, >, ◇ vs uniform step time at 8×512 … 12×1024, segments vs whole stream (≤ FLOP ratio + 0.02)
  bench_probe.py   gradient-probe overhead (≤ 3% of step time averaged over a run)
  bench_fit.py     4,500-start chinchilla fit on 240 points (≤ 3 s on 2 cores)
  bench_sweep.py   dry-run of the 30-run grid (≤ 1 s), status of a 1,000-run manifest (≤ 1 s)
  bench_scale.py   FSDP vs DDP step time (2 CPU processes), accumulation and activation-checkpointing overheads
  bench_analyze.py dw analyze of a demo-sized run (seconds), probe.entropy_every cost (≤ 2% of step time every 100)
Run on an otherwise idle machine: other processes on 2 cores distort every figure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    "bench_model.py",
    "bench_shapes.py",
    "bench_probe.py",
    "bench_fit.py",
    "bench_sweep.py",
    "bench_scale.py",
    "bench_analyze.py",
]


def main() -> int:
    failed = []
    for b in BENCHES:
        print(f"\n=== {b}", flush=True)
        if subprocess.run([sys.executable, str(HERE / b)], cwd=HERE.parent).returncode != 0:
            failed.append(b)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
