"""`dw analyze` of a demo-sized run on the CPU (seconds), and the cost of
``probe.entropy_every`` as a fraction of step time (issue: ≤ 2% when probing every 100 steps).

Trains one demo-sized run (the demo's × shape, 96 × 6, vwt preset, 8 × 64
tokens per step) for a few steps, then times the library call
(``train.analysis.analyse_run``: checkpoint load + 8,192 tokens of measures)
and the whole command (``dw analyze RUN_DIR``, a fresh process: imports
included).  The probe: full training steps (forward, backward, clip, AdamW)
against one ``measure.inside.entropy_profile`` on its fixed 512-token batch,
interleaved so drift affects both alike.

    .venv/bin/python benchmarks/bench_analyze.py [--repeats 30 --every 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

DEMO = [
    "model=vwt",
    "model.heads=4",
    "model.quantum=8",
    "model.width=96",
    "model.depth=6",
    "model.shape=x",
    "train.seq_len=64",
    "train.batch_size=8",
    "train.threads=1",
    "train.steps=20",
    "probe.every=0",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from depthwidth.config.compose import compose
    from depthwidth.measure.inside import ENTROPY_PROBE_TOKENS, entropy_profile
    from depthwidth.train import train
    from depthwidth.train.analysis import analyse_run, load_model

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        train(compose([*DEMO, f"run.dir={run}"]), handle_signals=False, log=lambda m: None)
        analyse_run(run, write=False)  # warm: first-call costs are not the analysis's
        t0 = time.perf_counter()
        doc = analyse_run(run)
        lib_s = time.perf_counter() - t0
        env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "depthwidth", "analyze", str(run), "--json"], env=env, capture_output=True, text=True
        )
        cmd_s = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
        model, cfg, _ = load_model(run)

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    T = int(cfg.train.seq_len)
    x = torch.randint(0, model.spec.vocab_size, (int(cfg.train.batch_size), T))
    probe_x = torch.randint(0, model.spec.vocab_size, (ENTROPY_PROBE_TOKENS // T, T))

    def step() -> float:
        t0 = time.perf_counter()
        _, loss = model(x, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    def probe() -> float:
        t0 = time.perf_counter()
        entropy_profile(model, probe_x)
        return time.perf_counter() - t0

    for _ in range(5):
        step(), probe()
    steps, probes = [], []
    for _ in range(a.repeats):
        steps.append(step())
        probes.append(probe())
    ts, tp = statistics.median(steps), statistics.median(probes)
    per_probe = tp / ts
    averaged = per_probe / a.every
    print(
        f"demo-sized run ({doc['shape']} {doc['depth']}L × {doc['width']}, widths {doc['widths']}), {a.threads} "
        "thread(s)"
    )
    print(
        f"dw analyze    library call {lib_s:6.2f} s   whole command {cmd_s:6.2f} s   "
        f"({doc['eval']['tokens']:,} tokens, {doc['eval']['entropy_tokens']:,} in each entropy matrix)"
    )
    print(
        f"entropy probe {tp * 1e3:7.2f} ms on {ENTROPY_PROBE_TOKENS} tokens vs a step of {ts * 1e3:7.2f} ms "
        f"({x.numel()} tokens): {100 * per_probe:5.1f}% on a probe step, {100 * averaged:6.3f}% averaged "
        f"(every {a.every}; target ≤ 2%)"
    )
    print(
        json.dumps(
            {
                "bench": "analyze",
                "analyze_library_s": lib_s,
                "analyze_command_s": cmd_s,
                "step_ms": ts * 1e3,
                "entropy_probe_ms": tp * 1e3,
                "probe_step_fraction": per_probe,
                "run_avg_fraction": averaged,
            }
        )
    )


if __name__ == "__main__":
    main()
