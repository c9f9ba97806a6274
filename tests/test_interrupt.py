"""Ctrl-C (SIGINT) on a training run: like SIGTERM, the run finishes its step,
checkpoints, ends ``preempted`` and exits 3 with one line saying how to resume;
a second Ctrl-C soon after exits at once (130) and says what was not saved.
Real subprocesses held at a gate (tests/gate/), so no signal races the run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from depthwidth.train import signals
from tests.helpers import dw, gate_env, open_gate, REPO
from tests.test_train import TINY, _metrics, _spawn, _summary, _wait_for

ARGS = [*TINY, "train.steps=40"]


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """The uninterrupted run every interrupted one must end up equal to."""
    d = tmp_path_factory.mktemp("ref") / "run"
    p = dw("train", *ARGS, "train.ckpt_every=20", f"run.dir={d}")
    assert p.returncode == 0, p.stderr
    return d


def _pid_at(gate: Path, step: int) -> int:
    return int(next(gate.glob(f"at-{step}-*")).name.rsplit("-", 1)[1])


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in (run_dir / "ckpt").glob("step_*"))


def test_ctrl_c_checkpoints_preempts_exits_3_and_the_rerun_resumes_exactly(tmp_path, ref):
    cut, gate = tmp_path / "cut", tmp_path / "gate"
    args = [*ARGS, "train.ckpt_every=100", f"run.dir={cut}"]  # no periodic checkpoint: only Ctrl-C's
    proc = _spawn(args, env=gate_env(gate, 10))  # held before step 11 until the signal has reached it
    _wait_for(gate / f"at-10-{proc.pid}")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert _lines(err) == [
        "dw: interrupted at step 11: checkpointed, summary preempted; rerun the same command to resume"
    ], err
    assert "Traceback" not in err
    s = _summary(cut)
    assert s["status"] == "preempted" and s["reason"] == "SIGINT at step 11" and s["steps"] == 11
    assert _steps(cut) == [11]
    p = dw("train", *args)
    assert p.returncode == 0, p.stderr
    assert "resuming" in p.stderr and "from step 11" in p.stderr
    assert _metrics(cut) == _metrics(ref)
    assert (cut / "probes.jsonl").read_text() == (ref / "probes.jsonl").read_text()
    a, b = _summary(ref), _summary(cut)
    assert b["status"] == "done" and a["final_val_loss"] == b["final_val_loss"] and a["budgets"] == b["budgets"]


def test_a_second_ctrl_c_exits_130_at_once_and_says_what_is_lost(tmp_path, ref):
    cut, gate = tmp_path / "cut", tmp_path / "gate"
    args = [*ARGS, "train.ckpt_every=20", f"run.dir={cut}"]
    # held before step 26 (past the step-20 checkpoint) until TWO signals have reached it: the
    # second lands while the first is still being acted on (the gate makes "soon" unbounded)
    proc = _spawn(args, env={**gate_env(gate, 25), "DW_TEST_GATE_SIGNALS": "2"})
    _wait_for(gate / f"at-25-{proc.pid}")
    proc.send_signal(signal.SIGINT)
    _wait_for(gate / f"signal-1-{proc.pid}")  # dw's handler took the first (two at once could merge)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert _lines(err) == ["dw: interrupted again: exiting without a checkpoint; steps since 20 are lost"], err
    s = _summary(cut)
    assert s["status"] == "failed" and s["steps"] == 25
    assert s["reason"] == "SIGINT twice at step 25: exited without a checkpoint; a rerun resumes from step 20"
    assert _steps(cut) == [20] and not list(cut.rglob("*.tmp"))
    p = dw("train", *args)
    assert p.returncode == 0, p.stderr
    assert "from step 20" in p.stderr
    assert _metrics(cut) == _metrics(ref)
    assert _summary(cut)["final_val_loss"] == _summary(ref)["final_val_loss"]


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_only_two_ctrl_c_within_the_window_exit(capfd):
    """The window, with an injected clock and exit: a Ctrl-C long after the previous one
    only re-arms; SIGTERM is never escalated; a multi-process rank never escalates."""
    clock, exits, said = _Clock(), [], []
    flag = signals.StopFlag(
        install=False, on_again=lambda: said.append(1) or "dw: gone", clock=clock, exit=exits.append
    )
    flag._on_signal(signal.SIGINT, None)
    assert flag.requested and flag.name == "SIGINT" and exits == []
    clock.t = signals.AGAIN_WITHIN_S + 1  # too late to count as "again": a new first
    flag._on_signal(signal.SIGINT, None)
    assert exits == [] and said == []
    clock.t += signals.AGAIN_WITHIN_S  # just within the window
    flag._on_signal(signal.SIGINT, None)
    assert exits == [signals.EXIT_INTERRUPTED] and said == [1]
    assert capfd.readouterr().err == "dw: gone\n"

    term = signals.StopFlag(install=False, on_again=lambda: "x", clock=clock, exit=exits.append)
    term._on_signal(signal.SIGTERM, None)
    term._on_signal(signal.SIGTERM, None)
    term._on_signal(signal.SIGINT, None)
    assert term.name == "SIGTERM" and exits == [130]
    rank = signals.StopFlag(install=False, escalate=False, clock=clock, exit=exits.append)
    for _ in range(3):
        rank._on_signal(signal.SIGINT, None)
    assert rank.name == "SIGINT" and exits == [130]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(pid: int) -> str:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next(e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"RANK="))


def test_ctrl_c_on_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    """torchrun, 2 processes: SIGINT reaches rank 1 only; rank 0 (held at the gate until the
    signal has been taken) stops at the same step, for the same signal, and writes it all."""
    d, gate = tmp_path / "two", tmp_path / "gate"
    env = {**os.environ, **gate_env(gate, 6)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={_free_port()}",
            "-m",
            "depthwidth",
            "train",
            "--quiet",
            *TINY,
            "train.steps=20",
            "train.ckpt_every=100",
            f"run.dir={d}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_n(gate, "at-6-*", 2)
        pids = {_rank(int(p.name.rsplit("-", 1)[1])): int(p.name.rsplit("-", 1)[1]) for p in gate.glob("at-6-*")}
        os.kill(pids["1"], signal.SIGINT)
        _wait_for(gate / f"signal-1-{pids['1']}")
        open_gate(gate)  # rank 0 goes on; both agree to stop after step 7
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    s = _summary(d)
    assert s["status"] == "preempted" and s["reason"] == "SIGINT at step 7" and s["steps"] == 7, err[-2000:]
    assert _steps(d) == [7]
    assert "interrupted at step 7: checkpointed" in err


def _wait_for_n(gate: Path, pattern: str, n: int, timeout: float = 120.0) -> None:
    import time

    t0 = time.monotonic()
    while len(list(gate.glob(pattern))) < n:
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {n} x {pattern}"
        time.sleep(0.01)
