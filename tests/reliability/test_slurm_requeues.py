"""Three requeues of one run on the real cluster, one of them inside a WSD decay branch:
one continuous metrics history, and the final numbers of the same run trained without
preemption.  Each SIGUSR2 is sent only once the previous attempt is training again
(an event: its metrics file grew past the step it resumed from)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_dw
from tests.test_launch import tiny_env, wait_for
from tests.test_launch_slurm import logged_steps, metric_steps, status, submit, task_logs

pytestmark = pytest.mark.slurm
TPS = 4 * 32  # tiny_env: batch 4 x seq 32
# the budget of 400 steps decays over its last 200: its branch forks at step 200 of 500
WSD = ["optim.schedule=wsd", "optim.warmup=4", "optim.decay_fraction=0.5", f"train.budgets=[{400 * TPS}]"]


def test_three_requeues_one_in_a_branch_give_the_unpreempted_run(slurm_cluster, tmp_path, ledger):
    env = tiny_env(tmp_path, steps=500, widths="[128]", depths="[4]")
    out = submit(env, *WSD)
    ((job,), (rid,)) = out["jobs"], [x["run_id"] for x in out["submitted"]]
    d = tmp_path / "runs" / "tiny" / rid
    starts = lambda: status(env)["runs"][0]["attempts"]  # noqa: E731
    try:
        for k, at in enumerate((40, 200, 320)):  # 200: the fork's metrics line; the branch trains next
            wait_for(lambda: starts() == k + 1 and logged_steps(d, at), 300, f"attempt {k + 1} at step {at}")
            slurm_cluster.sh("scancel", "--signal=USR2", job)
        st = wait_for(lambda: (s := status(env))["counts"]["done"] == 1 and s, 600, "the run done")
    finally:
        slurm_cluster.sh("scancel", job, check=False)
    text = task_logs(tmp_path)
    assert st["runs"][0]["attempts"] == 4 and text.count("exiting for requeue") == 3
    assert "(in the decay branch to step 400); exiting for requeue" in text  # one stop inside the branch
    assert "resuming the decay branch to step 400 at step" in text  # ... continued where it stopped

    ref = tmp_path / "ref"
    overrides = [o for o in st["runs"][0]["overrides"] if not o.startswith("run.dir=")]
    p = run_dw("train", *overrides, f"run.dir={ref}", env=env)
    assert p.returncode == 0, p.stderr
    steps, want = metric_steps(d), metric_steps(ref)
    ledger(faults=3, recovered=1, lost=len(set(want) - set(steps)), duplicates=len(steps) - len(set(steps)))
    assert steps == want == list(range(4, 501, 4))  # one continuous history, no gap, no repeat
    a, b = (json.loads((x / "summary.json").read_text()) for x in (ref, d))
    assert b["budgets"] == a["budgets"] and b["final_val_loss"] == a["final_val_loss"]
