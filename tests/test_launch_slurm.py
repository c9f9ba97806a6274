"""launcher=slurm (through submitit) against the real single-node cluster (fixture ``slurm_cluster``).

Only jobs these tests submitted are signalled, requeued or cancelled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import at_gate, gate_env, run_dw, start_gate_env
from tests.test_launch import status, tiny_env, wait_for

pytestmark = pytest.mark.slurm


def submit(env, *args):
    p = run_dw("sweep", "tiny", "launcher=slurm", *args, "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def sacct(cluster, array_id):
    out = cluster.sh("sacct", "-n", "-X", "-D", "-P", "-o", "JobID,State", "-j", array_id).stdout
    return [tuple(ln.split("|")) for ln in out.splitlines() if ln.strip()]


def sub_dir(tmp_path):
    (d,) = (tmp_path / "runs" / "tiny" / "jobs").iterdir()
    return d


def task_logs(tmp_path):
    return "".join(p.read_text() for p in (tmp_path / "runs" / "tiny" / "jobs").glob("*/submitit/*_log.out"))


def metric_steps(run_dir):
    from pathlib import Path

    return [json.loads(ln)["step"] for ln in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if ln.strip()]


def logged_steps(run_dir, at_least):
    try:
        steps = metric_steps(run_dir)
    except (OSError, ValueError):
        return False
    return bool(steps) and steps[-1] >= at_least


def test_a_three_run_sweep_is_one_array_and_every_run_completes(slurm_cluster, tmp_path):
    env = tiny_env(tmp_path, steps=4, depths="[1, 2, 3]")
    out = submit(env)
    array = out["jobs"][0].split("_")[0]
    # it returned once sbatch answered, not when the jobs ended (an event, not a wall-clock bound)
    assert sorted(sacct(slurm_cluster, array)) != [(f"{array}_{i}", "COMPLETED") for i in range(3)]
    assert out["jobs"] == [f"{array}_0", f"{array}_1", f"{array}_2"] and len(out["submitted"]) == 3
    # it went through submitit: its folder holds the sbatch file and one pickled SweepTask(tasks.json)(i) per task
    import submitit
    from submitit.core.utils import DelayedSubmission

    from depthwidth.launch.slurm import SweepTask

    folder = sub_dir(tmp_path) / "submitit"
    sh = (folder / f"{array}_submission.sh").read_text()
    assert "#SBATCH --array=0-2%" in sh and "#SBATCH --requeue" in sh and "submitit.core._submit" in sh
    for i, j in enumerate(out["jobs"]):
        d = DelayedSubmission.load(folder / f"{j}_submitted.pkl")
        assert isinstance(d.function, SweepTask) and d.args == (i,)
        assert d.function.tasks_file == str(sub_dir(tmp_path) / "tasks.json")
        assert d._timeout_countdown >= 10_000  # time-limit requeues never run out
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 3 and s, 120, "3 runs done")
    for r in st["runs"]:
        assert r["attempts"] == 1 and r["progress"] == 1.0 and r["final_val_loss"] is not None
        assert metric_steps(r["run_dir"]) == [4]
    want = [(j, "COMPLETED") for j in out["jobs"]]
    wait_for(lambda: sorted(sacct(slurm_cluster, array)) == want, 120, "the array's 3 tasks COMPLETED")
    jobs = [submitit.SlurmJob(folder=folder, job_id=j) for j in out["jobs"]]  # submitit's own view of them
    assert [job.result() for job in jobs] == [{"task": i, "rc": 0} for i in range(3)]
    again = submit(env)
    assert again["submitted"] == [] and again["skipped"] == {"done": 3}
    # dw eval SWEEP ... launcher=slurm: the three finished runs' evaluations as one more array
    pytest.importorskip("lm_eval")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    rows = [{"q": "def f(x):", "choices": [" return x", " zzzz"], "gold": 0}] * 3
    (tasks / "slurm_mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tasks / "slurm_mc.yaml").write_text(
        f"task: slurm_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tasks / 'slurm_mc.jsonl'}\n"
        'test_split: test\noutput_type: multiple_choice\ndoc_to_text: "{{q}}"\ndoc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{gold}}"\nmetric_list:\n  - metric: acc\nmetadata:\n  version: 1.0\n'
    )
    argv = ["eval", "tiny", "--tasks", "slurm_mc", "--include-path", str(tasks), "--bootstrap-iters", "0"]
    p = run_dw(*argv, "launcher=slurm", "--json", env=env)
    assert p.returncode == 0, p.stderr
    ev = json.loads(p.stdout)
    assert len(ev["submitted"]) == 3 and len({j["job_id"].split("_")[0] for j in ev["submitted"]}) == 1
    p = run_dw(*argv, "launcher=slurm", "--json", env=env)  # queued, running or done: nothing twice
    assert p.returncode == 0 and json.loads(p.stdout)["submitted"] == [], p.stderr
    docs = [Path(r["run_dir"]) / "eval.json" for r in st["runs"]]
    wait_for(lambda: all(d.is_file() for d in docs), 300, "3 eval.json written by the eval array")
    for d in docs:
        assert 0.0 <= json.loads(d.read_text())["tasks"]["slurm_mc"]["metrics"]["acc"]["value"] <= 1.0
    assert status(env)["counts"]["done"] == 3  # the runs' own records are untouched by their evaluations


@pytest.mark.slow
def test_requeue_and_preemption_signal_resume_from_the_checkpoint(slurm_cluster, tmp_path):
    """Task 0: `scontrol requeue` (SIGTERM; SLURM requeues).  Task 1: SIGUSR2 to the
    job's steps, as `--signal=USR2@N` sends it before the time limit (train()
    checkpoints, the task requeues itself).  Both resume in the same run directory
    with one continuous metrics history."""
    env = tiny_env(tmp_path, steps=100)
    gate = tmp_path / "gate"  # both runs wait before step 20 until their signal reaches them
    out = submit({**env, **gate_env(gate, 20)})
    assert len(out["jobs"]) == 2
    j_requeue, j_signal = sorted(out["jobs"])
    wait_for(lambda: at_gate(gate, 20) == 2, 120, "both runs training, at step 20")
    slurm_cluster.sh("scontrol", "requeue", j_requeue)
    slurm_cluster.sh("scancel", "--signal=USR2", j_signal)
    wait_for(lambda: all(r["attempts"] == 2 for r in status(env)["runs"]), 120, "both runs restarted")
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 2 and s, 240, "both runs done")
    for r in st["runs"]:
        assert r["attempts"] == 2
        steps = metric_steps(r["run_dir"])
        assert steps == list(range(4, 101, 4)), "one continuous history, no gap, no repeat"
        text = task_logs(tmp_path)
        assert f"[{r['run_id']}] resuming run {r['run_id']} from step" in text
    assert "Job is pending" not in text  # the SIGUSR2 task requeued itself only, not its array
    assert f"requeue {j_signal}: ok" in text and "SIGUSR2: checkpointed at step" in text
    assert "Calling checkpoint method" not in text  # train() handled the signal, not submitit
    records = sacct(slurm_cluster, j_requeue.split("_")[0])
    assert (j_requeue, "REQUEUED") in records and (j_signal, "REQUEUED") in records


def test_a_cancelled_run_shows_cancelled_and_retry_failed_completes_it(slurm_cluster, tmp_path):
    env = tiny_env(tmp_path, steps=100)
    gate = tmp_path / "gate"  # the run waits before step 8 until the cancel's SIGTERM reaches it
    out = submit({**env, **gate_env(gate, 8)}, "--only", "model.depth=1")
    (job,), rid = out["jobs"], out["submitted"][0]["run_id"]
    wait_for(lambda: at_gate(gate, 8) == 1, 120, "the run training, at step 8")
    slurm_cluster.sh("scancel", job)
    st = wait_for(lambda: (s := status(env))["runs"][0]["state"] == "cancelled" and s, 120, "cancelled in dw status")
    p = run_dw("status", "tiny", env=env)
    assert "cancelled" in p.stdout and "1 cancelled" in p.stdout
    assert submit(env, "--only", "model.depth=1")["submitted"] == []  # not without --retry-failed
    again = submit(env, "--retry-failed", "--only", "model.depth=1")
    assert [x["run_id"] for x in again["submitted"]] == [rid] and again["jobs"] != [job]
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 1 and s, 240, "the retried run done")
    assert st["runs"][0]["attempts"] == 2 and st["runs"][0]["jobs"] == [job, again["jobs"][0]]
    assert metric_steps(st["runs"][0]["run_dir"]) == list(range(4, 101, 4))


def test_pack_puts_four_runs_in_two_array_tasks(slurm_cluster, tmp_path):
    """Also: a SIGUSR2 while no run trains yet (task 0 still importing) is submitit's:
    it checkpoints the SweepTask call, requeues task 0 only, and the rerun completes."""
    env = tiny_env(tmp_path, steps=4, widths="[32, 64]")
    gate = tmp_path / "gate"  # task 0 waits, with submitit's handlers installed, before its first run trains
    out = submit({**env, **start_gate_env(gate, 0)}, "pack=2")
    assert len(out["submitted"]) == 4 and len(out["jobs"]) == 2
    array = out["jobs"][0].split("_")[0]
    log0 = sub_dir(tmp_path) / "submitit" / f"{array}_0_0_log.out"
    wait_for(lambda: list(gate.glob("at-start-*")), 120, "task 0 started, before its first run")
    slurm_cluster.sh("scancel", "--signal=USR2", f"{array}_0")
    wait_for(lambda: status(env)["counts"]["done"] == 4, 180, "4 runs done")
    want = [(f"{array}_0", "COMPLETED"), (f"{array}_0", "REQUEUED"), (f"{array}_1", "COMPLETED")]
    wait_for(lambda: sorted(sacct(slurm_cluster, array)) == want, 120, "2 array tasks COMPLETED, task 0 requeued once")
    text = log0.read_text()
    assert "Calling checkpoint method" in text and f"Requeued job {array}_0" in text
