"""Scheduler unavailable: with no sacct, or a sacct that fails, a SLURM sweep's unfinished
runs are ``unknown`` in ``dw status`` (never ``lost``: they may still be running), and
``dw sweep --retry-failed`` refuses to resubmit them and says why.

The sweep here is written in the manifest/summary formats (tests/test_status.py's
helper) with launcher=slurm; the failing sacct is a real executable on PATH.  The
test against the real cluster is tests/test_launch_slurm.py's."""

from __future__ import annotations

import json
import os
import stat

import pytest

from depthwidth.launch import status as status_mod
from depthwidth.core.atomic import read_jsonl
from tests.helpers import at_gate, gate_env, run_dw
from tests.test_launch import tiny_env, wait_for
from tests.test_launch_slurm import status, submit
from tests.test_status import _fake_sweep

FAILING = "#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n"


@pytest.mark.parametrize(
    "summary,want",
    [
        ("running", "unknown"),
        ("preempted", "unknown"),
        (None, "unknown"),
        ("failed", "failed"),
        ("done", "done"),
        ("diverged", "diverged"),
    ],
)
def test_run_state_when_the_scheduler_cannot_be_asked(summary, want):
    s = {"status": summary} if summary else None
    assert status_mod.run_state(s, None, True, known=False) == want


def _bin(tmp_path, sacct: str | None):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    if sacct is not None:
        f = d / "sacct"
        f.write_text(sacct)
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return str(d)


@pytest.mark.parametrize(
    "sacct,why",
    [
        (None, "no sacct on this machine"),
        (FAILING, "Connection refused"),
    ],
)
def test_status_says_unknown_not_lost(tmp_path, monkeypatch, sacct, why, ledger):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    _fake_sweep(tmp_path, "s", 3, launcher="slurm", states={1: "running", 2: "pending"})
    env = {"DW_RUNS": str(tmp_path), "PATH": _bin(tmp_path, sacct)}
    p = run_dw("status", "s", "--json", env=env)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert [r["state"] for r in st["runs"]] == ["done", "unknown", "unknown"]
    ledger(faults=1, recovered=0, lost=st["counts"]["lost"], duplicates=0)  # "lost" here would be a false alarm
    assert st["counts"]["lost"] == 0 and why in st["scheduler_unknown"]
    p = run_dw("status", "s", env=env)
    assert p.returncode == 0 and "2 unknown" in p.stdout and "scheduler state unknown" in p.stdout


@pytest.mark.slurm
def test_retry_failed_refuses_a_running_job_whose_state_is_unknown(slurm_cluster, tmp_path, ledger):
    """A run trains on the real cluster; sacct then fails (a failing sacct first on PATH).
    --retry-failed must not submit a second job into the same run directory."""
    env = tiny_env(tmp_path, steps=100)
    gate = tmp_path / "gate"  # the run waits before step 8, running, until the final scancel
    out = submit({**env, **gate_env(gate, 8)}, "--only", "model.depth=1")
    (job,) = out["jobs"]
    try:
        wait_for(lambda: at_gate(gate, 8) == 1, 120, "the run training, at step 8")
        broken = {**env, "PATH": _bin(tmp_path, FAILING) + os.pathsep + os.environ["PATH"]}
        assert status(broken)["runs"][0]["state"] == "unknown"
        p = run_dw("sweep", "tiny", "launcher=slurm", "--retry-failed", "--only", "model.depth=1", "--json", env=broken)
        assert p.returncode == 0, p.stderr
        again = json.loads(p.stdout)
        assert again["submitted"] == [] and again["skipped"] == {"unknown": 1}
        assert "state is unknown" in again["notes"][0] and "Connection refused" in again["notes"][0]
        p = run_dw("sweep", "tiny", "launcher=slurm", "--retry-failed", "--only", "model.depth=1", env=broken)
        assert p.returncode == 0 and "not resubmitted" in p.stderr and "1 unknown" in p.stdout
        # sacct back: it was running all along (accounting may lag the controller a moment under load)
        wait_for(lambda: status(env)["runs"][0]["state"] == "running", 120, "the run running again in dw status")
    finally:
        slurm_cluster.sh("scancel", job)
    subs = [e for e in read_jsonl(tmp_path / "runs" / "tiny" / "manifest") if e["event"] == "submit"]
    ledger(faults=1, recovered=0, lost=0, duplicates=len(subs) - 1)  # a second job into one run directory
    assert [e["job_id"] for e in subs] == [job]
