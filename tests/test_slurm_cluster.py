"""Real submitit against the single-node test cluster (scripts/slurm_cluster.sh).

These pin down the SLURM behaviour dw's launcher relies on: results, job
arrays, failures, cancel, and the two requeue paths (an outside
`scontrol requeue`, and submitit's own requeue after the preemption signal).
See docs/slurm.md for what they showed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import cloudpickle
import pytest

submitit = pytest.importorskip("submitit")

# Jobs unpickle these functions in a fresh interpreter that cannot import this
# test module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.slurm


# ---------------------------------------------------------------- helpers
def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def executor(folder: Path, timeout_min: int = 5, **params):
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    ex.update_parameters(timeout_min=timeout_min, cpus_per_task=1, **params)
    return ex


def sacct_states(cluster, job_id: str) -> list[str]:
    """Every record of the job (one per run: -D keeps requeued ones), oldest first."""
    out = cluster.sh("sacct", "-n", "-X", "-D", "-P", "-o", "State", "-j", job_id).stdout
    return [ln.strip() for ln in out.splitlines() if ln.strip()]


# ---------------------------------------------------------------- job bodies
def add(a, b):
    return a + b


def square_logged(x, log):
    start = time.time()
    time.sleep(1)
    with open(log, "a") as fh:
        fh.write(f"{x} {start} {time.time()}\n")
    return x * x


def boom():
    raise ValueError("boom from the job")


def append_and_sleep(path, seconds, seconds_after_restart=0):
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    with open(path, "a") as fh:
        fh.write(f"start restart={restart}\n")
    time.sleep(seconds if restart == "0" else seconds_after_restart)
    return "slept"


class Counter(submitit.helpers.Checkpointable):
    """Counts to `until`; on the preemption signal submitit calls checkpoint()."""

    def __call__(self, path, until, step=0):
        with open(path, "a") as fh:
            fh.write(f"start step={step} restart={os.environ.get('SLURM_RESTART_COUNT', '0')}\n")
        self.step = step
        while self.step < until:
            time.sleep(0.25)
            self.step += 1
            Path(f"{path}.step").write_text(str(self.step))  # what a test waits on before signalling
        return self.step

    def checkpoint(self, path, until, step=0):
        with open(path, "a") as fh:
            fh.write(f"checkpoint step={self.step}\n")
        return submitit.helpers.DelayedSubmission(self, path, until, self.step)


# ---------------------------------------------------------------- tests
def test_single_job_returns_result(slurm_cluster, tmp_path):
    job = executor(tmp_path).submit(add, 2, 3)
    assert job.result() == 5
    assert wait_until(lambda: job.state == "COMPLETED" or None, 30, "sacct COMPLETED")


def test_map_array_is_one_array_job_and_tasks_run_concurrently(slurm_cluster, tmp_path):
    log = tmp_path / "tasks.log"
    jobs = executor(tmp_path).map_array(square_logged, [1, 2, 3], [str(log)] * 3)
    assert len({j.job_id.split("_")[0] for j in jobs}) == 1, [j.job_id for j in jobs]
    assert sorted(j.job_id.split("_")[1] for j in jobs) == ["0", "1", "2"]
    assert [j.result() for j in jobs] == [1, 4, 9]
    spans = [tuple(map(float, ln.split()[1:])) for ln in lines(log)]
    overlapping = any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1 :])
    assert overlapping, f"array tasks ran one at a time: {spans}"


def test_raising_job_gives_failed_job_error_with_remote_traceback(slurm_cluster, tmp_path):
    job = executor(tmp_path).submit(boom)
    with pytest.raises(submitit.core.utils.FailedJobError) as info:
        job.result()
    assert "ValueError: boom from the job" in str(info.value)
    assert "Traceback" in str(info.value)


def test_scancel_shows_cancelled_in_sacct(slurm_cluster, tmp_path):
    marker = tmp_path / "marker"
    job = executor(tmp_path).submit(append_and_sleep, str(marker), 120)
    wait_until(lambda: marker.exists(), 30, "the job to start")
    job.cancel()
    wait_until(lambda: sacct_states(slurm_cluster, job.job_id)[-1:] == ["CANCELLED by 0"], 30, "sacct CANCELLED")
    # submitit reports the same state once sacct has it.
    assert job.watcher.get_state(job.job_id, mode="force").startswith("CANCELLED")
    assert job.done(force_check=True)


def test_scontrol_requeue_runs_the_job_again(slurm_cluster, tmp_path):
    """An outside `scontrol requeue` (what a preemption/requeue looks like to dw).

    submitit ignores SIGTERM, so Slurm kills the job after KillWait; the same
    job id is pending for cred_expire seconds, then the job runs again from
    the start (SLURM_RESTART_COUNT=1) with the originally pickled call.
    """
    marker = tmp_path / "marker"
    # The first run must outlive KillWait (5 s): submitit ignores SIGTERM, so a
    # job that ends within KillWait of the requeue writes its result anyway.
    job = executor(tmp_path).submit(append_and_sleep, str(marker), 60, 0)
    wait_until(lambda: marker.exists(), 30, "the job to start")
    slurm_cluster.sh("scontrol", "requeue", job.job_id)
    assert job.result() == "slept"
    assert lines(marker) == ["start restart=0", "start restart=1"]
    states = sacct_states(slurm_cluster, job.job_id)
    assert states[0] == "REQUEUED" and states[-1] in ("COMPLETED", "RUNNING"), states


def test_checkpointable_job_is_requeued_by_submitit_on_usr2(slurm_cluster, tmp_path):
    """The preemption signal (USR2, what `--signal=USR2@90` sends before the
    time limit) makes submitit call checkpoint(), pickle its result and run
    `scontrol requeue` itself; the rerun resumes from the checkpointed step.
    timeout_min >= 50 makes submitit call it a preemption (below that every
    USR2 counts as a timeout and uses up one of max_num_timeout)."""
    marker = tmp_path / "marker"
    job = executor(tmp_path, timeout_min=60).submit(Counter(), str(marker), 24)
    wait_until(lambda: Path(f"{marker}.step").exists(), 60, "the job's first step")  # an event, not a sleep
    slurm_cluster.sh("scancel", "--signal=USR2", job.job_id)
    assert job.result() == 24
    log = lines(marker)
    assert log[0] == "start step=0 restart=0"
    assert log[1].startswith("checkpoint step=")
    step = int(log[1].split("=")[1])
    assert 0 < step < 24
    assert log[2] == f"start step={step} restart=1"
    assert sacct_states(slurm_cluster, job.job_id)[0] == "REQUEUED"
    assert "this job is preempted" in job.stderr()


def test_usr2_on_short_non_checkpointable_job_fails_it(slurm_cluster, tmp_path):
    """timeout_min < 50: submitit treats any USR2 as a timeout; a plain
    function is not requeued but ends with UncompletedJobError."""
    marker = tmp_path / "marker"
    job = executor(tmp_path, timeout_min=5).submit(append_and_sleep, str(marker), 60)
    wait_until(lambda: marker.exists(), 30, "the job to start")
    slurm_cluster.sh("scancel", "--signal=USR2", job.job_id)
    with pytest.raises(submitit.core.utils.FailedJobError, match="timed-out and not checkpointable"):
        job.result()
