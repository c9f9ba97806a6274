"""A run directory that cannot be written: uncreatable (/proc/x: bad input, exit 2, nothing
written), or on a full disk (a small tmpfs this test mounts and later grows: exit 1 with one
clear message, no traceback, no partial summary); once there is space the same command resumes the run
to the uninterrupted run's numbers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import dw, run_dw
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


@pytest.fixture
def tiny_disk(tmp_path):
    """A 200 KiB tmpfs: room for a sweep's manifest, a run's config and metrics, not for its checkpoint."""
    d = tmp_path / "tiny-disk"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(d)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {p.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def _alive(store) -> bool:
    """Whether a worker of the sweep's local submissions is still a live process."""
    import os

    for w in store.glob("jobs/*/worker-*.json"):
        try:
            os.kill(json.loads(w.read_text())["pid"], 0)
            return True
        except (ProcessLookupError, KeyError, ValueError):
            continue
    return False


def test_a_full_disk_under_a_local_sweep_is_recorded_and_the_worker_ends_cleanly(tiny_disk, tmp_path, ledger):
    from tests.test_launch import tiny_env, wait_for

    (tmp_path / "ref").mkdir()
    ref_env = tiny_env(tmp_path / "ref", depths="[1]")
    assert run_dw("sweep", "tiny", "launcher=debug", env=ref_env).returncode == 0
    env = {**tiny_env(tmp_path, depths="[1]"), "DW_RUNS": str(tiny_disk / "runs")}
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=1", "launcher.max_retries=0", env=env)
    assert p.returncode == 0, p.stderr
    store = tiny_disk / "runs" / "tiny"
    (task,) = store.glob("jobs/*/task-0.json")
    w = next(store.glob("jobs/*/worker-0.json"))  # the worker ends the task, then itself: wait for the second

    def ended() -> bool:
        return json.loads(task.read_text()).get("state") == "failed" and json.loads(w.read_text())["state"] == "exited"

    wait_for(ended, 300, "the worker to end the task and exit")
    (rid,) = [p.name for p in store.iterdir() if (p / "config.yaml").is_file()]
    failures = [json.loads(x) for x in (store / rid / "failures.jsonl").read_text().splitlines()]
    summary = json.loads((store / rid / "summary.json").read_text())
    log = next(store.glob("jobs/*/worker-0.log")).read_text()
    recorded = len(failures) == 1 and "No space left on device" in failures[0]["error"]
    assert recorded and summary["status"] == "failed" and "No space left on device" in summary["reason"]
    assert "Traceback" not in log
    assert not list((store / rid / "ckpt").glob(".step_*.tmp"))  # the partial checkpoint freed its space

    subprocess.run(["mount", "-o", "remount,size=64m", str(tiny_disk)], check=True)  # space is back
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=1", "--retry-failed", env=env)
    assert p.returncode == 0, p.stderr
    wait_for(lambda: dw("status", "tiny", "--json", env=env).stdout.count('"state": "done"') == 1, 300, "done")
    wait_for(lambda: not _alive(store), 300, "the workers to exit")  # their logs are on the disk
    got, want = _metrics(store / rid), _metrics(tmp_path / "ref" / "runs" / "tiny" / rid)
    steps = [r["step"] for r in got]
    ledger(
        faults=1,
        recovered=1,
        lost=sum(1 for r in want if r["step"] not in steps),
        duplicates=len(steps) - len(set(steps)),
    )
    assert got == want


def test_a_full_disk_at_submission_leaves_no_half_submission(tmp_path, monkeypatch, capsys, ledger):
    """An injected ENOSPC on the submission's first file (works without root): one line, exit 1,
    no ``jobs/SUB/`` left and nothing in the manifest."""
    import errno

    from depthwidth.core import atomic
    from tests.helpers import dw_in_process
    from tests.test_launch import tiny_env

    for k, v in tiny_env(tmp_path, depths="[1]").items():
        monkeypatch.setenv(k, v)
    real = atomic.write_bytes

    def full(path, data):
        if "/jobs/" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(atomic, "write_bytes", full)
    code, out, err = dw_in_process(capsys, "sweep", "tiny", "launcher=local")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    store = tmp_path / "runs" / "tiny"
    left = list((store / "jobs").iterdir()) if (store / "jobs").exists() else []
    ledger(faults=1, recovered=0, lost=0, duplicates=0)
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "cannot write the submission" in lines[0] and "No space left on device" in lines[0]
    assert left == [] and not (store / "manifest").exists()
