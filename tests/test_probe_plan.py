"""Measured throughput: ``dw sweep NAME --dry-run --probe`` times real steps of the sweep's smallest
and largest runs here, records them in runs/NAME/probe.json, and the plan's hours come from them (a
later dry run reads the record back); the dry run says which figures are measured, which assumed."""

from __future__ import annotations

import json
import math

import pytest

from depthwidth.sweep import probe as probes
from tests.helpers import sweep_store, assert_bad_input, run_dw

SWEEP = """
    groups: {model: depth_delusion, data: pydoc}
    fixed: {model.width: 64, train.seq_len: 32, train.batch_size: 8, train.steps: 200, train.threads: 1,
            train.budgets: [800], optim.schedule: wsd, probe.every: 50, probe.at: []}
    axes:
      model.depth: [1, 2, 4]
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    env = sweep_store(root, "pr", SWEEP)
    p = run_dw("sweep", "pr", "launcher=local", "--dry-run", "--probe", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return root, env, json.loads(p.stdout)


def test_the_probe_times_the_smallest_and_largest_runs_and_the_plan_uses_it(probed):
    root, env, doc = probed
    rec = json.loads((root / "runs" / "pr" / "probe.json").read_text())
    assert rec == doc["probe"] and rec["device"] == "cpu"
    assert [p["depth"] for p in rec["points"]] == [1, 4]  # smallest and largest FLOPs per step
    for p in rec["points"]:
        assert p["tokens_per_s"] == pytest.approx(p["tokens_per_step"] / p["step_s"])
        assert p["mfu"] == pytest.approx(p["tokens_per_s"] * p["flops_per_token"] / 1e11)
        assert p["start_s"] > 0 and p["setup_s"] > 0 and p["eval_s"] > 0 and p["ckpt_s"] > 0
    for r in doc["runs"]:
        sec = probes.run_seconds(rec["points"], r)
        assert r["time"] == "measured" and r["wall_hours"] == pytest.approx(sec["total"] / 3600)
        assert r["seconds"]["steps"] == pytest.approx(r["steps_planned"] * sec["step_s"])
        assert r["events"] == {"evals": 2, "ckpts": 2, "probes": 4, "entropy": 0, "analysis": 0}
    small, mid, large = doc["runs"]
    assert small["seconds"]["steps"] == pytest.approx(small["steps_planned"] * rec["points"][0]["step_s"])
    assert large["seconds"]["steps"] == pytest.approx(large["steps_planned"] * rec["points"][1]["step_s"])
    # two local workers taking the runs in order (run 2 where run 0 ended), plus one process start
    starts = max(p["start_s"] for p in rec["points"]) / 3600
    w = [r["wall_hours"] for r in doc["runs"]]
    slot = sorted(w[:2])  # runs 0 and 1 start at once; run 2 where the first of them ends
    assert doc["schedule"]["calendar_hours"] == pytest.approx(max(slot[0] + w[2], slot[1]) + starts)


def test_a_later_dry_run_reads_the_record_back_and_says_what_is_measured(probed):
    root, env, doc = probed
    again = json.loads(run_dw("sweep", "pr", "launcher=local", "--dry-run", "--json", env=env).stdout)
    assert [r["wall_hours"] for r in again["runs"]] == [r["wall_hours"] for r in doc["runs"]]
    p = run_dw("sweep", "pr", "launcher=local", "--dry-run", env=env)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("measured:"))
    assert line.startswith("measured: 3 of 3 runs' hours from the probe of") and "tokens/s, MFU" in line
    assert "CPU-hours as measured by the probe" in p.stdout
    gpu = run_dw("sweep", "pr", "launcher=slurm", "launcher.gpus_per_node=1", "--dry-run", env=env)
    assert gpu.returncode == 0 and "assumed: the probe of" in gpu.stdout and "at MFU 40%" in gpu.stdout


def test_probe_is_refused_without_a_dry_run_or_on_another_device(probed):
    root, env, doc = probed
    assert "--probe" in assert_bad_input(run_dw("sweep", "pr", "--probe", env=env))
    line = assert_bad_input(
        run_dw("sweep", "pr", "launcher=slurm", "launcher.gpus_per_node=1", "--dry-run", "--probe", env=env)
    )
    assert "the runs train on cuda" in line


def test_pieces_interpolate_log_linearly_in_flops_per_step_and_scale_beyond():
    pts = [
        {"flops_per_step": 1e6, "step_s": 0.01, "setup_s": 1.0},
        {"flops_per_step": 1e8, "step_s": 0.1, "setup_s": 2.0},
    ]
    assert probes.piece(pts, "step_s", 1e7) == pytest.approx(math.sqrt(0.01 * 0.1))
    assert probes.piece(pts, "step_s", 1e9) == pytest.approx(1.0)  # in proportion beyond the largest
    assert probes.piece(pts, "step_s", 1e3) == 0.01  # never faster than the smallest
    assert probes.piece(pts, "setup_s", 1e9) == 2.0  # set-up: as the largest's
