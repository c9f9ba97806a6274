"""A run spread over 2 data-parallel processes (torchrun, gloo on the CPU)
trains the same model as one process: same token stream, gradient of the same
global batch, one set of files written by rank 0.  The reductions every rank
plans with (the smallest GPU's memory, the stop signal) agree across ranks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import REPO, dw, run_dw

ARGS = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.steps=20",
    "train.log_every=5",
    "probe.every=10",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_run_matches_one_process(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert dw("train", *ARGS, f"run.dir={one}").returncode == 0
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={_free_port()}",
            "-m",
            "depthwidth",
            "train",
            "--json",
            *ARGS,
            f"run.dir={two}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[:3000] + "\n...\n" + p.stderr[-3000:]  # the first failure is said first
    a = json.loads((one / "summary.json").read_text())
    b = json.loads((two / "summary.json").read_text())
    assert b["status"] == "done" and b["run_id"] == a["run_id"]
    assert abs(a["final_val_loss"] - b["final_val_loss"]) < 1e-5  # all-reduce order only
    ma = [json.loads(x) for x in (one / "metrics.jsonl").read_text().splitlines()]
    mb = [json.loads(x) for x in (two / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in mb] == [r["step"] for r in ma]  # rank 0 alone wrote, once
    for ra, rb in zip(ma, mb):
        assert abs(ra["loss"] - rb["loss"]) < 1e-5
    assert len((two / "probes.jsonl").read_text().splitlines()) == 2


def test_batch_must_split_over_processes(tmp_path):
    d = tmp_path / "run"
    p = run_dw(
        "train", *ARGS, "train.batch_size=7", f"run.dir={d}", env={"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    )
    assert p.returncode == 2 and "train.batch_size" in p.stderr and not d.exists()


AGREE = r"""
import json, sys
from depthwidth.train import dist
w = dist.world_from_env(); dist.init(w, "cpu")
mine = json.loads(sys.argv[1])[w.rank]
print(json.dumps({"rank": w.rank, "smallest": dist.smallest(w, mine), "largest": dist.largest(w, mine)}))
dist.shutdown(w)
"""


@pytest.mark.parametrize("capacities", [[150_150_610_944, 85_899_358_209], [85_899_358_209, 150_150_610_944]])
def test_every_rank_plans_for_the_smallest_device(capacities):
    """Two real gloo processes, each with its own planted device memory (bytes a float32 would round):
    both get the smaller one for the memory plan, and the larger from ``largest`` (the stop signal)."""
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        OMP_NUM_THREADS="1",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", AGREE, json.dumps(capacities)],
            cwd=REPO,
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    got = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    assert [g["rank"] for g in got] == [0, 1]
    assert [g["smallest"] for g in got] == [min(capacities)] * 2
    assert [g["largest"] for g in got] == [max(capacities)] * 2
