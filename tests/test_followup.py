"""``dw sweep NAME --then fit,report`` (launch/followup.py): the sweep's fit and report made when
its last run has ended, by the cluster (a follow-up job) or the last local worker, and
runs/NAME/DONE written; bad input refused before anything is submitted."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import open_gate, run_dw, start_gate_env
from tests.test_launch import wait_for

SWEEP = """groups: {model: vwt, data: pydoc}
fixed: {model.heads: 4, model.shape: uniform, train.seq_len: 32, train.batch_size: 4, train.steps: 6,
        train.log_every: 2, train.threads: 1, train.eval_batches: 1, probe.every: 0, probe.at: [],
        train.budgets: [256, 512]}
axes: {model.width: [32], model.depth: DEPTHS}
then: {fit: "--law chinchilla --bootstrap 20"}
"""


def _env(tmp_path, depths="[1, 2, 3]", then=None):
    d = tmp_path / "sweeps"
    d.mkdir(exist_ok=True)
    text = SWEEP.replace("DEPTHS", depths)
    if then is not None:
        text = text.replace('then: {fit: "--law chinchilla --bootstrap 20"}', then)
    (d / "fu.yaml").write_text(text)
    return {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")}


@pytest.mark.parametrize(
    "args,then,word",
    [
        (["--then", "fit,plot"], None, "--then"),
        (["--then", "fit,fit"], None, "distinct"),
        (["--then", "fit"], 'then: {fit: "--lawz chinchilla"}', "--lawz"),
        (["--then", "fit"], "then: {fitt: x}", "fitt"),
    ],
)
def test_bad_then_is_one_line_exit_2_and_nothing_is_submitted(tmp_path, args, then, word):
    env = _env(tmp_path, then=then)
    p = run_dw("sweep", "fu", *args, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and word in p.stderr, p.stderr
    assert not (tmp_path / "runs" / "fu").exists()


def test_local_workers_the_last_one_fits_and_reports(tmp_path):
    env = _env(tmp_path)
    p = run_dw("sweep", "fu", "launcher=local", "launcher.workers=2", "--then", "fit,report", env=env)
    assert p.returncode == 0, p.stderr
    assert "the last local worker runs it" in p.stdout
    done = tmp_path / "runs" / "fu" / "DONE"
    wait_for(done.is_file, 300, "runs/fu/DONE")
    assert done.read_text().startswith("fu: 3 runs — 3 done; fit: ok; report: ok")
    fit = json.loads((tmp_path / "runs" / "fu" / "fit.json").read_text())
    assert fit["law"] == "chinchilla" and fit["bootstrap"]["replicates"] == 20  # the sweep file's own fit options
    assert (tmp_path / "runs" / "fu" / "report" / "report.md").is_file()
    st = run_dw("status", "fu", env=env).stdout
    assert "follow-up (fit, report) ran: fu: 3 runs — 3 done; fit: ok; report: ok" in st, st


@pytest.mark.slurm
def test_on_slurm_the_follow_up_waits_for_a_retry_failed_resubmission(slurm_cluster, tmp_path, ledger):
    """One task at a time; task 0 held at its start; task 1 cancelled while it waits; --retry-failed
    resubmits its run as a second array, which the waiting follow-up job now also waits for; once
    everything has ended it fits and reports all three runs.  launcher.mail reaches the job."""
    env = _env(tmp_path)
    gate = tmp_path / "gate"
    sh = lambda *a: subprocess.run(a, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)  # noqa: E731
    p = run_dw(
        "sweep",
        "fu",
        "launcher=slurm",
        "launcher.array_parallelism=1",
        "launcher.mail=dw@example.org",
        "--then",
        "fit,report",
        "--json",
        env={**env, **start_gate_env(gate, 0)},
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    follow, array = out["then"]["job_id"], out["jobs"][0].split("_")[0]
    job = sh("scontrol", "show", "job", follow).stdout
    assert f"Dependency=afterany:{array}" in job and "MailUser=dw@example.org" in job and "MailType=END,FAIL" in job
    try:
        wait_for(lambda: list(gate.glob("at-start-*")), 120, "task 0 held at its start")
        assert sh("scancel", f"{array}_1").returncode == 0
        st = wait_for(
            lambda: (
                # a pending array task cancelled leaves no accounting record: dw says lost (retried alike)
                (s := json.loads(run_dw("status", "fu", "--json", env=env).stdout))["runs"][1]["state"]
                in ("cancelled", "lost")
                and s
            ),
            120,
            "task 1 cancelled",
        )
        p = run_dw("sweep", "fu", "launcher=slurm", "--retry-failed", "--json", env=env)
        assert p.returncode == 0, p.stderr
        again = json.loads(p.stdout)
        (new,) = {j.split("_")[0] for j in again["jobs"]}
        assert again["then"]["extended"] and again["then"]["job_id"] == follow
        dep = sh("scontrol", "show", "job", follow).stdout
        assert array in dep and new in dep, dep
    finally:
        open_gate(gate)
    done = tmp_path / "runs" / "fu" / "DONE"
    wait_for(done.is_file, 300, "runs/fu/DONE")
    assert done.read_text().startswith("fu: 3 runs — 3 done; fit: ok; report: ok"), done.read_text()
    assert (tmp_path / "runs" / "fu" / "fit.json").is_file() and (
        tmp_path / "runs" / "fu" / "report" / "report.md"
    ).is_file()
    times = dict(
        ln.split("|", 1)
        for ln in sh("sacct", "-n", "-P", "-X", "-o", "JobID,Start,End", "-j", f"{follow},{new}").stdout.split()
    )
    assert times[follow].split("|")[0] >= times[new].split("|")[1], times  # it started once the retry had ended
    assert st["total"] == 3
    ev = [json.loads(x) for x in (tmp_path / "runs" / "fu" / "manifest").read_text().splitlines()]
    starts = [e["run_id"] for e in ev if e["event"] == "start"]
    ledger(faults=1, recovered=1, lost=3 - len(set(starts)), duplicates=len(starts) - len(set(starts)))


@pytest.mark.slurm
def test_on_slurm_a_run_slurm_timed_out_is_resubmitted_by_the_follow_up(slurm_cluster, tmp_path, ledger):
    """A hung run (stuck at step 4, deaf to every signal but SIGKILL: tests/gate DW_TEST_HANG) reaches
    its time limit, shortened to a minute: SLURM ends the task TIMEOUT and does not requeue it.  The
    follow-up job finds it, records the attempt, resubmits it from its checkpoint and requeues itself
    behind it; when the retry is done it reports: one run, done, one history."""
    from tests.helpers import GATE_CODE, REPO

    env = _env(tmp_path, depths="[1]")
    hang = tmp_path / "hang"
    hang.mkdir()
    fault = {"PYTHONPATH": f"{GATE_CODE}{os.pathsep}{REPO}", "DW_TEST_HANG": f"{hang}:4"}
    sh = lambda *a: subprocess.run(a, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)  # noqa: E731
    p = run_dw("sweep", "fu", "launcher=slurm", "--then", "report", "--json", env={**env, **fault})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (job,), follow = out["jobs"], out["then"]["job_id"]
    wait_for(lambda: list(hang.glob("hung-*")), 120, "the run hung at step 4")
    assert sh("scontrol", "update", f"JobId={job}", "TimeLimit=1").returncode == 0
    wait_for(lambda: "TIMEOUT" in sh("sacct", "-n", "-X", "-P", "-D", "-o", "State", "-j", job).stdout, 240, "TIMEOUT")
    done = tmp_path / "runs" / "fu" / "DONE"
    wait_for(done.is_file, 300, "runs/fu/DONE")
    assert done.read_text().startswith("fu: 1 run — 1 done; report: ok"), done.read_text()
    run_dir = next((tmp_path / "runs" / "fu").glob("*/failures.jsonl")).parent
    (f,) = [json.loads(x) for x in (run_dir / "failures.jsonl").read_text().splitlines()]
    assert f["kind"] == "died" and "TIMEOUT" in f["error"], f
    log = (tmp_path / "runs" / "fu" / "jobs" / f"then-{follow}.out").read_text()
    assert "still in flight: waiting for job" in log, log
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    ledger(faults=1, recovered=1, lost=len({2, 4, 6} - set(steps)), duplicates=len(steps) - len(set(steps)))
    assert steps == [2, 4, 6]


def test_then_none_only_writes_done(tmp_path):
    from depthwidth.launch.followup import parse

    assert parse("none") == [] and parse("report, fit") == ["report", "fit"]
    env = _env(tmp_path, depths="[1]")
    p = run_dw("sweep", "fu", "--then", "none", env=env)
    assert p.returncode == 0, p.stderr
    done = (tmp_path / "runs" / "fu" / "DONE").read_text()
    assert done.startswith("fu: 1 run — 1 done; no actions; ") and "follow-up (no action) ran" in p.stdout
