"""A run directory that cannot be written: uncreatable (/proc/x: bad input, exit 2, nothing
written), or on a full disk (a small tmpfs this test mounts and later grows: exit 1 with one
clear message, no traceback, no partial summary); once there is space the same command resumes the run
to the uninterrupted run's numbers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_dw
from tests.test_train import TINY, _metrics

ARGS = [*TINY, "train.steps=16", "train.ckpt_every=8", "train.log_every=4", "probe.every=8"]


def test_an_uncreatable_run_directory_is_bad_input(tmp_path):
    p = run_dw("train", "--quiet", *ARGS, "run.dir=/proc/x")
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert line.startswith("dw: error: bad value for run.dir: '/proc/x'") and "No such file or directory" in line
    assert not Path("/proc/x").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 600 KiB tmpfs: room for config, metrics and probes, not for a checkpoint."""
    d = tmp_path / "disk"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(d)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {p.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_a_full_disk_fails_cleanly_and_the_run_resumes_once_there_is_space(small_disk, tmp_path, ledger):
    ref = tmp_path / "ref"
    assert run_dw("train", *ARGS, f"run.dir={ref}").returncode == 0
    d = small_disk / "run"
    p = run_dw("train", "--quiet", *ARGS, f"run.dir={d}")
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "No space left on device" in line and "resumes" in line
    s = json.loads((d / "summary.json").read_text())  # whole, never half-written
    assert s["status"] in ("running", "failed") and s["steps"] < 16
    assert not list((d / "ckpt").glob("step_*"))  # no checkpoint that is not complete
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # space is back
    p = run_dw("train", *ARGS, f"run.dir={d}")
    assert p.returncode == 0, p.stderr
    got, want = _metrics(d), _metrics(ref)
    steps = [r["step"] for r in got]
    ledger(
        faults=1,
        recovered=1,
        lost=sum(1 for r in want if r["step"] not in steps),
        duplicates=len(steps) - len(set(steps)),
    )
    assert got == want
    assert (
        json.loads((d / "summary.json").read_text())["final_val_loss"]
        == json.loads((ref / "summary.json").read_text())["final_val_loss"]
    )
