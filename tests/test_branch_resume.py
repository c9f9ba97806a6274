"""Exact resume inside a WSD decay branch: SIGINT, SIGTERM and kill -9 while a branch trains, then
the same command again; the final loss, the budget losses and every metrics and probe line equal the
uninterrupted run's (CPU).  Real subprocesses: signals through tests/gate (no race with the run),
kill -9 through tests/reliability/faults.py.  And a resume under another setting says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import dw, gate_env, REPO
from tests.test_train import TIMING, TINY, _spawn, _summary, _wait_for

TPS = 8 * 64
# the demo's schedule settings at a tiny size: wsd, the default fractional warm-up (0.02) and decay
# (0.2); the budget's branch forks at step 16 and trains steps 16..19
BRANCH = [*TINY, "optim.schedule=wsd", "train.steps=40", f"train.budgets=[{20 * TPS}]", "train.ckpt_every=100"]
# the whole run decays (decay_fraction 1): the branch forks at step 0, where the optimizer has no state
AT_ZERO = [*BRANCH, "optim.decay_fraction=1.0"]
CASES = {"fork16": (BRANCH, 18), "fork0": (AT_ZERO, 10)}  # args, the branch step the signal lands in


def _lines(d: Path, name: str) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in (d / name).read_text().splitlines()]


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    """The uninterrupted run of each case."""
    out = {}
    for case, (args, _) in CASES.items():
        d = tmp_path_factory.mktemp("ref") / case
        p = dw("train", "--quiet", *args, f"run.dir={d}")
        assert p.returncode == 0, p.stderr
        out[case] = d
    return out


def _assert_equal(cut: Path, ref: Path) -> None:
    a, b = _summary(ref), _summary(cut)
    assert b["status"] == "done", b
    assert b["final_val_loss"] == a["final_val_loss"] and b["budgets"] == a["budgets"]
    assert b["last_loss"] == a["last_loss"] and b["resume_notes"] == []
    assert _lines(cut, "metrics.jsonl") == _lines(ref, "metrics.jsonl")
    assert _lines(cut, "probes.jsonl") == _lines(ref, "probes.jsonl")
    assert not list((cut / "ckpt").glob("branch_*"))


@pytest.mark.parametrize(
    "case,sig",
    [("fork16", signal.SIGINT), ("fork16", signal.SIGTERM), ("fork0", signal.SIGTERM)],
    ids=["fork16-SIGINT", "fork16-SIGTERM", "fork0-SIGTERM"],
)
def test_a_signal_inside_a_branch_then_resume_equals_the_uninterrupted_run(tmp_path, refs, case, sig):
    args, at = CASES[case]
    cut, gate = tmp_path / "cut", tmp_path / "gate"
    run = [*args, f"run.dir={cut}"]
    proc = _spawn(run, env=gate_env(gate, at))  # the branch asks for step `at` before the trunk does
    _wait_for(gate / f"at-{at}-{proc.pid}")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    s = _summary(cut)
    assert s["status"] == "preempted" and "decay branch to step 20" in s["reason"], s
    assert [p.name for p in (cut / "ckpt").glob("branch_*")] == ["branch_00000020"]
    p = dw("train", *run)
    assert p.returncode == 0, p.stderr
    assert f"resuming the decay branch to step 20 at step {at + 1}" in p.stderr
    _assert_equal(cut, refs[case])


@pytest.mark.parametrize("case", ["fork16"])
def test_kill9_inside_a_branch_then_resume_equals_the_uninterrupted_run(tmp_path, refs, case):
    args, at = CASES[case]
    cut = tmp_path / "cut"
    run = ["train", "--quiet", *args, f"run.dir={cut}"]
    env = dict(os.environ, PYTHONPATH=str(REPO), DW_FAULT_BRANCH_TOTAL="20")
    p = subprocess.run(
        [sys.executable, "-m", "tests.reliability.faults", "wsd-branch", str(at), "--", *run],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    assert _summary(cut)["status"] == "running"  # killed: nothing said
    p = dw(*run)
    assert p.returncode == 0, p.stderr
    _assert_equal(cut, refs[case])


def test_a_resume_under_another_setting_says_so_in_its_summary(tmp_path, refs):
    """The run checkpointed on 1 thread resumes on 2: it goes on, warns in one line, and its summary's
    resume_notes names what differs (an exact resume leaves the list empty: the tests above)."""
    args, at = CASES["fork16"]
    cut, gate = tmp_path / "cut", tmp_path / "gate"
    proc = _spawn([*args, f"run.dir={cut}"], env=gate_env(gate, at))
    _wait_for(gate / f"at-{at}-{proc.pid}")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 3
    p = dw("train", *args, "train.threads=2", f"run.dir={cut}")
    assert p.returncode == 0, p.stderr
    notes = _summary(cut)["resume_notes"]
    assert len(notes) == 2, notes  # the main run's checkpoint and the branch's
    assert all("threads 1 -> 2" in n and "may differ from an uninterrupted run" in n for n in notes)
    assert [ln for ln in p.stderr.splitlines() if "warning: resumed at step" in ln] != []
