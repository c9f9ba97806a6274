"""Scale features on the CPU (2 processes, gloo), step time per optimiser step:

1. FSDP2 vs DDP, 2 processes, the same model and global batch (ratio FSDP / DDP);
2. gradient accumulation: 4 micro-batches of 2 vs one batch of 8, one process (overhead);
3. activation checkpointing per block vs none, one process (overhead).

Each case trains with ``dw train`` (torchrun for 2 processes) and reads the
steady-state tokens/s of its metrics (steps after the first log interval).
Prints a table, then one JSON line.

    python benchmarks/bench_scale.py [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = [
    "model=depth_delusion",
    "model.depth=4",
    "model.width=256",
    "data=synthetic",
    "data.vocab_size=512",
    "data.order=1",
    "train.seq_len=128",
    "train.eval_batches=1",
    "probe.every=0",
    "train.ckpt_every=0",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp: Path, name: str, args: list[str], procs: int, steps: int) -> float:
    d = tmp / name
    cmd = [
        sys.executable,
        "-m",
        "depthwidth",
        "train",
        "--quiet",
        *MODEL,
        *args,
        f"train.steps={steps}",
        f"train.log_every={steps // 4}",
        f"run.dir={d}",
    ]
    if procs > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={procs}",
            f"--master_port={_port()}",
            *cmd[1:],
        ]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(2 // procs))
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{name} failed: {p.stderr[-2000:]}")
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    tps = [r["tokens_per_s"] for r in rows[1:]]  # the first interval holds start-up
    return sorted(tps)[len(tps) // 2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        b8 = ["train.batch_size=8", "train.threads=0"]
        one = ["train.threads=2"]
        res = {
            "ddp_2proc": run(tmp, "ddp", [*b8, "train.parallel=ddp"], 2, a.steps),
            "fsdp_2proc": run(tmp, "fsdp", [*b8, "train.parallel=fsdp"], 2, a.steps),
            "batch8": run(tmp, "b8", ["train.batch_size=8", *one], 1, a.steps),
            "accum4x2": run(tmp, "acc", ["train.batch_size=8", "train.micro_batch_size=2", *one], 1, a.steps),
            "ac_none": run(tmp, "noac", ["train.batch_size=8", *one], 1, a.steps),
            "ac_block": run(
                tmp, "ac", ["train.batch_size=8", "train.activation_checkpointing=block", *one], 1, a.steps
            ),
        }
    out = {
        "fsdp_vs_ddp_step_time": res["ddp_2proc"] / res["fsdp_2proc"],
        "accumulation_overhead": res["batch8"] / res["accum4x2"] - 1,
        "activation_checkpointing_overhead": res["ac_none"] / res["ac_block"] - 1,
        "tokens_per_s": res,
    }
    print(f"{'case':44s} {'tokens/s':>10s}")
    for k, v in res.items():
        print(f"{k:44s} {v:10.0f}")
    print(f"FSDP / DDP step time (2 processes)           {out['fsdp_vs_ddp_step_time']:.3f}")
    print(f"accumulation overhead (4x2 vs 8)             {100 * out['accumulation_overhead']:+.1f}%")
    print(f"activation checkpointing overhead (block)    {100 * out['activation_checkpointing_overhead']:+.1f}%")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
