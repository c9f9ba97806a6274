"""Three requeues of one run on the real cluster, one of them inside a WSD decay branch:
one continuous metrics history, and the final numbers of the same run trained without
preemption, and one W&B run (tracker=wandb, offline: its four segments, read by
W&B's own reader, hold every step once, in order; tests/test_wandb_sync.py uploads
such segments with the real ``wandb sync``).  Each SIGUSR2 is sent while the run waits at a gate before that step
(tests/gate: it goes on once the signal reached it), so no signal races the run."""

from __future__ import annotations

import json

import pytest

from depthwidth.track.wandb_log import history_steps
from tests.helpers import at_gate, gate_env, run_dw
from tests.test_launch import tiny_env, wait_for
from tests.test_launch_slurm import metric_steps, status, submit, task_logs
from tests.test_tracking import segments, wandb_env

pytestmark = pytest.mark.slurm
TPS = 4 * 32  # tiny_env: batch 4 x seq 32
# the budget of 200 steps decays over its last 100: its branch forks at step 100 of 240
WSD = ["optim.schedule=wsd", "optim.warmup=4", "optim.decay_fraction=0.5", f"train.budgets=[{200 * TPS}]"]


def test_three_requeues_one_in_a_branch_give_the_unpreempted_run(slurm_cluster, tmp_path, ledger):
    env = tiny_env(tmp_path, steps=240, widths="[32]", depths="[2]")
    env = wandb_env(tmp_path, **env)  # no W&B key: tracker=wandb logs offline
    gate = tmp_path / "gate"
    out = submit({**env, **gate_env(gate, 20, 100, 160)}, *WSD, "tracker=wandb")
    ((job,), (rid,)) = out["jobs"], [x["run_id"] for x in out["submitted"]]
    d = tmp_path / "runs" / "tiny" / rid
    starts = lambda: status(env)["runs"][0]["attempts"]  # noqa: E731
    try:
        for k, at in enumerate((20, 100, 160)):  # 100: the fork; the gate holds the branch's first step
            wait_for(lambda: at_gate(gate, at) == 1 and starts() == k + 1, 300, f"attempt {k + 1} at step {at}")
            slurm_cluster.sh("scancel", "--signal=USR2", job)
        st = wait_for(lambda: (s := status(env))["counts"]["done"] == 1 and s, 600, "the run done")
        # summary.json says done before W&B closes its last segment: wait for the job to end itself
        # (a scancel now would cut the segment's last rows)
        wait_for(
            lambda: not slurm_cluster.sh("squeue", "-h", "-j", job, check=False).stdout.strip(), 300, "the job to end"
        )
    finally:
        slurm_cluster.sh("scancel", job, check=False)
    text = task_logs(tmp_path)
    assert st["runs"][0]["attempts"] == 4 and text.count("exiting for requeue") == 3
    assert "(in the decay branch to step 200); exiting for requeue" in text  # one stop inside the branch
    assert "resuming the decay branch to step 200 at step" in text  # ... continued where it stopped

    ref = tmp_path / "ref"
    overrides = [o for o in st["runs"][0]["overrides"] if not o.startswith(("run.dir=", "tracker="))]
    p = run_dw("train", *overrides, f"run.dir={ref}", env=env)
    assert p.returncode == 0, p.stderr
    steps, want = metric_steps(d), metric_steps(ref)
    ledger(faults=3, recovered=1, lost=len(set(want) - set(steps)), duplicates=len(steps) - len(set(steps)))
    assert steps == want == list(range(4, 241, 4))  # one continuous history, no gap, no repeat
    a, b = (json.loads((x / "summary.json").read_text()) for x in (ref, d))
    assert b["budgets"] == a["budgets"] and b["final_val_loss"] == a["final_val_loss"]
    # one W&B run across the four attempts: four offline segments of run id rid whose history,
    # read by W&B's own reader, continues from segment to segment: every step once, in order
    segs = segments(d)
    assert len(segs) == 4 and {f.name for f in segs} == {f"run-{rid}.wandb"}
    wb = [s for f in segs for s in history_steps(f)]
    ledger(faults=0, recovered=0, lost=len(set(want) - set(wb)), duplicates=len(wb) - len(set(wb)))
    assert wb == want
