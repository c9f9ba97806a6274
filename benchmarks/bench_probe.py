"""Gradient-persistence probe overhead (issue: ≤ 3% of step time averaged over a run).

Times full training steps (forward, backward, clip, AdamW) of a CPU-sized
model with and without the per-layer gradient-norm probe, interleaved so
drift affects both alike, and reports the overhead on a probe step and
averaged over a run with the default cadence (probe.every = 100).

    .venv/bin/python benchmarks/bench_probe.py [--depth 8 --width 128 --repeats 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.train.probes import GradProbe
from depthwidth.model.spec import ModelSpec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    spec = ModelSpec(widths=(a.width,) * a.depth, vocab_size=256, embed_width=a.width, head_dim=32)
    model = VariableWidthGPT(spec, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    probe = GradProbe(model)
    x = torch.randint(0, 256, (a.batch, a.seq))

    def step(with_probe: bool) -> float:
        t0 = time.perf_counter()
        _, loss = model(x, x)
        loss.backward()
        if with_probe:
            probe()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    for _ in range(5):
        step(False), step(True)
    plain, probed = [], []
    for _ in range(a.repeats):
        plain.append(step(False))
        probed.append(step(True))
    tp, tq = statistics.median(plain), statistics.median(probed)
    per_probe = (tq - tp) / tp
    averaged = per_probe / a.every
    print(f"model {a.depth}L×{a.width}, batch {a.batch}×{a.seq}, {a.threads} threads")
    print(f"step time   plain {tp * 1e3:8.2f} ms   with probe {tq * 1e3:8.2f} ms")
    print(
        f"overhead    on a probe step {100 * per_probe:6.2f}%   averaged over a run (every {a.every}) "
        f"{100 * averaged:6.3f}%  (target ≤ 3%)"
    )
    print(
        json.dumps(
            {
                "bench": "probe",
                "plain_ms": tp * 1e3,
                "probe_ms": tq * 1e3,
                "overhead_probe_step": per_probe,
                "overhead_run_avg": averaged,
            }
        )
    )


if __name__ == "__main__":
    main()
