"""kill -9 at ten points of a CPU run (tests/reliability/faults.py), then resume with the
same command: the resumed run completes, its final numbers equal the uninterrupted run's,
and no metrics or probe line is missing or repeated.

The run: WSD with a decay branch (to step 16, forking at 12), two accumulation
micro-batches per step, periodic evaluation and checkpoints every 8 steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.test_train import TIMING

TPS = 8 * 64
ARGS = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.log_every=4",
    "probe.every=8",
    "optim.schedule=wsd",
    "optim.warmup=4",
    "optim.decay_fraction=0.25",
    "train.steps=24",
    f"train.budgets=[{16 * TPS}]",
    "train.ckpt_every=8",
    "train.eval_every=8",
    "train.micro_batch_size=4",
    "train.eval_batches=4",
]
# point -> which arrival kills (counts from an instrumented run of ARGS)
POINTS = {
    "checkpoint-shards": 4,  # the second checkpoint's shards written, being hashed
    "checkpoint-manifest": 2,  # the second checkpoint hashed, its manifest not written
    "checkpoint-renamed": 6,  # the second checkpoint renamed into place, older ones not pruned
    "wsd-branch": 13,  # decay branch step 13 (of 12..15)
    "micro-batch": 42,  # between the two micro-batches of a step after the branch
    "evaluation": 3,  # inside the step-16 evaluation, at its second batch
    "metrics-torn": 3,  # half of the third metrics flush on disk
    "probe-written": 2,  # the step-16 probe line on disk, its checkpoint not yet
    "optimizer-step": 20,  # gradients clipped, the update not applied
    "summary": 2,  # about to write the final summary
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run of the matrix, done once: the reference, and per point the killed run and its
    resume by the same command (real processes, forked from one that imported torch)."""
    root = tmp_path_factory.mktemp("kill9")
    (root / "points.json").write_text(json.dumps(POINTS))
    env = dict(os.environ, PYTHONPATH=str(REPO), DW_FAULT_BRANCH_TOTAL="16")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.reliability.faults",
            "--matrix",
            str(root),
            str(root / "points.json"),
            "--",
            "train",
            "--quiet",
            *ARGS,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads((root / "results.json").read_text())
    assert results["ref"] == 0, p.stderr[-3000:]
    return root, results, p.stderr


def _lines(d: Path, name: str) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in (d / name).read_text().splitlines()]


def _final(d: Path) -> dict:
    s = json.loads((d / "summary.json").read_text())
    return {k: s[k] for k in ("status", "steps", "tokens", "final_val_loss", "budgets", "run_id")}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_kill9_then_resume_equals_the_uninterrupted_run(point, runs, ledger):
    root, results, log = runs
    reference, d = root / "ref", root / point
    assert results[point]["killed"] == -9, log[-3000:]  # the fault fired: killed, not finished
    assert results[point]["resumed"] == 0, log[-3000:]
    lost = dups = 0
    for name in ("metrics.jsonl", "probes.jsonl"):
        want, got = _lines(reference, name), _lines(d, name)
        steps = [r["step"] for r in got]
        dups += len(steps) - len(set(steps))
        lost += sum(1 for r in want if r["step"] not in steps)
    ledger(faults=1, recovered=int(_final(d)["status"] == "done"), lost=lost, duplicates=dups)
    assert lost == 0 and dups == 0
    assert _lines(d, "metrics.jsonl") == _lines(reference, "metrics.jsonl")
    assert _lines(d, "probes.jsonl") == _lines(reference, "probes.jsonl")
    assert _final(d) == _final(reference)
    assert not list((d / "ckpt").glob(".step_*.tmp")) and not list((d / "ckpt").glob("branch_*"))
