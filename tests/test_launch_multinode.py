"""One run over two nodes of a real SLURM cluster (fixture ``slurm_cluster_2n``:
two slurmd daemons on this machine): FSDP2 over 2 nodes × 1 process, requeued
by SIGUSR2 mid-run, resumed from its sharded checkpoint, finished as one run."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import at_gate, dw, gate_env, run_dw
from tests.test_launch import wait_for
from tests.test_launch_slurm import logged_steps, metric_steps

pytestmark = pytest.mark.slurm

SWEEP = """description: one FSDP run over two nodes
fixed: {model.depth: 2, model.width: 64, train.batch_size: 8, train.seq_len: 32, train.steps: 100,
        train.log_every: 4, train.ckpt_every: 40, train.threads: 1, probe.every: 0, train.eval_batches: 2,
        optim.schedule: constant, optim.warmup: 0, train.parallel: fsdp}
seeds: [1]
"""


def test_a_two_node_fsdp_run_survives_usr2_and_matches_one_process(slurm_cluster_2n, tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "two.yaml").write_text(SWEEP)
    env = {**slurm_cluster_2n, "DW_SWEEPS": str(tmp_path / "sweeps"), "DW_RUNS": str(tmp_path / "runs")}
    gate = tmp_path / "gate"  # both processes wait before step 60 until the signal reaches them
    p = run_dw(
        "sweep",
        "two",
        "launcher=slurm",
        "launcher.nodes=2",
        "launcher.tasks_per_node=1",
        "--json",
        env={**env, **gate_env(gate, 60)},
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (job,) = out["jobs"]
    (sub,) = (tmp_path / "runs" / "two" / "jobs").iterdir()
    assert "#SBATCH --nodes=2" in next((sub / "submitit").glob("*_submission.sh")).read_text()
    run_dir = tmp_path / "runs" / "two" / out["submitted"][0]["run_id"]
    wait_for(lambda: at_gate(gate) == 2, 300, "both processes of the 2-node run at step 60 (past a checkpoint)")
    assert logged_steps(run_dir, 60)
    p = run_dw("status", "two", "--json", env=env)
    assert json.loads(p.stdout)["runs"][0]["state"] == "running"
    subprocess.run(["scancel", "--signal=USR2", job], env={**os.environ, **env}, check=True)

    def status():
        return json.loads(dw("status", "two", "--json", env=env).stdout)["runs"][0]  # in-process: polled

    wait_for(lambda: status()["attempts"] == 2, 300, "the run requeued and restarted")
    st = wait_for(lambda: (s := status())["state"] == "done" and s, 300, "the run done")
    assert st["attempts"] == 2
    assert metric_steps(run_dir) == list(range(4, 101, 4)), "one continuous history, no gap, no repeat"
    logs = "".join(f.read_text() for f in (sub / "submitit").glob("*_log.out"))
    assert "layout: 2 processes, fsdp" in logs and "SIGUSR2: checkpointed at step 61" in logs
    assert "resuming run" in logs and f"requeue {job}: ok" in logs
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["plan"]["processes"] == 2 and summary["plan"]["mode"] == "fsdp"
    assert {f.name for f in (run_dir / "ckpt" / "step_00000100").glob("*.distcp")} == {"__0_0.distcp", "__1_0.distcp"}
    # the same run on one process, here: the same losses within fp32 all-reduce noise
    task = json.loads((sub / "tasks.json").read_text())["tasks"][0][0]
    args = [o for o in task["overrides"] if not o.startswith(("run.dir=", "run.sweep="))]
    one = tmp_path / "one"
    p = run_dw("train", *args, f"run.dir={one}")
    assert p.returncode == 0, p.stderr
    a = [json.loads(x) for x in (one / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], abs=1e-4)
    assert summary["final_val_loss"] == pytest.approx(
        json.loads((one / "summary.json").read_text())["final_val_loss"], abs=1e-4
    )
