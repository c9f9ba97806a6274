"""A Ctrl-C of one run leaves the local workers running, ``dw status`` shows the worker and PID of each
running run, and ``dw stop NAME RUN_ID`` checkpoints and stops the runs one chooses.  Real workers
(launcher=local), held at a gate (tests/gate/) so no signal races a run's end."""

from __future__ import annotations

import json

import pytest

from depthwidth.launch import scheduler
from tests.helpers import assert_bad_input, dw, gate_env, open_gate, run_dw
from tests.test_launch import status, tiny_env, wait_for


def test_stopping_one_run_leaves_both_local_workers_running(tmp_path):
    env = tiny_env(tmp_path, steps=12, widths="[32, 64]", depths="[1, 2]")  # 4 runs, one task each
    gate = tmp_path / "gate"
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=2", "--json", env={**env, **gate_env(gate, 6)})
    assert p.returncode == 0, p.stderr
    wait_for(lambda: len(list(gate.glob("at-6-*"))) == 2, 120, "both workers at the gate")
    pids = {int(f.name.rsplit("-", 1)[1]) for f in gate.glob("at-6-*")}
    st = status(env)
    running = [r for r in st["runs"] if r["state"] == "running"]
    assert len(running) == 2 and {r["pid"] for r in running} == pids
    assert sorted(r["worker"] for r in running) == ["local 0", "local 1"]
    table = dw("status", "tiny", env=env).stdout
    assert "worker" in table and all(str(pid) in table for pid in pids)

    one, other = running
    pending = next(r["run_id"] for r in st["runs"] if r["state"] == "pending")
    assert "not a run of sweep tiny" in assert_bad_input(dw("stop", "tiny", "nosuchrun", env=env))
    q = dw("stop", "tiny", one["run_id"], pending, "--json", env=env)
    assert q.returncode == 0, q.stderr
    res = {r["run_id"]: r for r in json.loads(q.stdout)["runs"]}
    assert res[one["run_id"]]["stopped"] and f"pid {one['pid']}" in res[one["run_id"]]["how"]
    assert not res[pending]["stopped"] and res[pending]["how"].startswith("not running (pending)")

    def stopped():
        r = next(x for x in status(env)["runs"] if x["run_id"] == one["run_id"])
        return r if r["state"] == "preempted" else None

    r = wait_for(stopped, 120, "the stopped run to checkpoint")
    assert r["reason"] == "SIGINT at step 7"
    sub = next((tmp_path / "runs" / "tiny" / "jobs").iterdir())

    def tasks_of(pid):  # a task not yet claimed is queued and has no pid (launch/backend.py's submit)
        return [t for t in (json.loads(f.read_text()) for f in sub.glob("task-*.json")) if t.get("pid") == pid]

    # the worker that trained it goes on to the next task (before: it exited); the other is still held
    wait_for(lambda: len(tasks_of(one["pid"])) > 1, 120, "the stopped run's worker to claim its next task")
    assert scheduler.pid_alive(other["pid"])
    assert "going on to the next task" in (sub / f"worker-{one['worker'].split()[1]}.log").read_text()
    open_gate(gate)
    w = dw("status", "tiny", "--watch", "--interval", "0.5", "--timeout", "240", env=env)
    assert w.returncode == 0, w.stderr
    states = {x["run_id"]: x["state"] for x in status(env)["runs"]}
    assert states.pop(one["run_id"]) == "preempted" and set(states.values()) == {"done"}
    assert states[other["run_id"]] == "done"
    assert len(tasks_of(one["pid"])) + len(tasks_of(other["pid"])) == 4  # every task run by one of the two


@pytest.mark.slurm
def test_dw_stop_under_slurm_checkpoints_the_run_through_its_own_signal_path(slurm_cluster, tmp_path):
    """scancel --signal=INT on the run's array task: the run checkpoints, ends preempted, the task is not
    requeued; --retry-failed resumes it from the checkpoint and it ends done."""
    from tests.helpers import at_gate
    from tests.test_launch_slurm import metric_steps, submit

    env = tiny_env(tmp_path, steps=40)
    gate = tmp_path / "gate"  # the run waits before step 8 until the stop's SIGINT reaches it
    out = submit({**env, **gate_env(gate, 8)}, "--only", "model.depth=1")
    rid = out["submitted"][0]["run_id"]
    wait_for(lambda: at_gate(gate, 8) == 1, 120, "the run training, at step 8")
    (r,) = status(env)["runs"]
    assert r["state"] == "running" and r["worker"] and r["pid"]
    q = run_dw("stop", "tiny", rid, env=env)
    assert q.returncode == 0, q.stderr
    assert f"SIGINT to job {out['jobs'][0]}" in q.stdout
    r = wait_for(lambda: (x := status(env)["runs"][0])["state"] == "preempted" and x, 120, "the run preempted")
    assert r["reason"] == "SIGINT at step 9"
    again = submit(env, "--retry-failed", "--only", "model.depth=1")
    assert [x["run_id"] for x in again["submitted"]] == [rid]
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 1 and s, 240, "the resumed run done")
    assert metric_steps(st["runs"][0]["run_dir"]) == list(range(4, 41, 4))
