"""Measured throughput: ``dw sweep NAME --dry-run --probe`` times real steps of the sweep's smallest
and largest runs here, records them in runs/NAME/probe.json, and the plan's hours come from them (a
later dry run reads the record back); the dry run says which figures are measured, which assumed."""

from __future__ import annotations

import json
import math

import pytest

from depthwidth.sweep import probe as probes
from depthwidth.train import timing
from tests.helpers import assert_bad_input, dw, sweep_store

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
    p = dw("sweep", "pr", "launcher=local", "--dry-run", "--probe", "--json", env=env)
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
        assert p["setup_again_s"] > 0  # a second set-up in the same process, timed apart
        # the steady step: at least 10 steps and MIN_TIMED_S of them (or the cap), each on its core
        assert p["steps_timed"] >= 10
        assert p["timed_s"] >= timing.MIN_TIMED_S or p["steps_timed"] == timing.MAX_TIMED_STEPS
        assert 0.0 <= p["waited"] <= 1.0 and 0 < p["step_s"] <= p["step_wall_s"]  # each step: wall less its wait
    for r in doc["runs"]:
        sec = probes.run_seconds(rec["points"], r)
        assert r["time"] == "measured" and r["wall_hours"] == pytest.approx(sec["total"] / 3600)
        assert r["seconds"]["steps"] == pytest.approx(r["steps_planned"] * sec["step_s"])
        # a run's set-up as a later run of a worker's process; the first's extra is the process's
        assert r["seconds"]["setup"] == pytest.approx(
            probes.piece(rec["points"], "setup_again_s", probes.flops_per_step(r))
        )
        assert r["start_s"] == pytest.approx(probes.process_seconds(rec["points"]))
        assert r["events"] == {"evals": 2, "ckpts": 2, "probes": 4, "entropy": 0, "analysis": 0}
    small, mid, large = doc["runs"]
    assert small["seconds"]["steps"] == pytest.approx(small["steps_planned"] * rec["points"][0]["step_s"])
    assert large["seconds"]["steps"] == pytest.approx(large["steps_planned"] * rec["points"][1]["step_s"])
    # two local workers taking the runs in order (run 2 where run 0 ended), plus one process start and
    # first set-up's one-time extra (each worker pays it once, at the same time)
    starts = probes.process_seconds(rec["points"]) / 3600
    assert starts == pytest.approx(max(p["start_s"] + p["setup_s"] - p["setup_again_s"] for p in rec["points"]) / 3600)
    w = [r["wall_hours"] for r in doc["runs"]]
    slot = sorted(w[:2])  # runs 0 and 1 start at once; run 2 where the first of them ends
    assert doc["schedule"]["calendar_hours"] == pytest.approx(max(slot[0] + w[2], slot[1]) + starts)


def test_a_later_dry_run_reads_the_record_back_and_says_what_is_measured(probed):
    root, env, doc = probed
    again = json.loads(dw("sweep", "pr", "launcher=local", "--dry-run", "--json", env=env).stdout)
    assert [r["wall_hours"] for r in again["runs"]] == [r["wall_hours"] for r in doc["runs"]]
    p = dw("sweep", "pr", "launcher=local", "--dry-run", env=env)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("measured:"))
    assert line.startswith("measured: 3 of 3 runs' hours from the probe of") and "tokens/s, MFU" in line
    assert "timed steps, each on its core" in line and "assumed: each run has its threads' cores to itself" in line
    assert "first set-up's one-time extra" in line and "once per process" in line
    assert "CPU-hours as measured by the probe" in p.stdout
    gpu = dw("sweep", "pr", "launcher=slurm", "launcher.gpus_per_node=1", "--dry-run", env=env)
    assert gpu.returncode == 0 and "assumed: the probe of" in gpu.stdout and "at MFU 40%" in gpu.stdout


def test_probe_is_refused_without_a_dry_run_or_on_another_device(probed):
    root, env, doc = probed
    assert "--probe" in assert_bad_input(dw("sweep", "pr", "--probe", env=env))
    line = assert_bad_input(
        dw("sweep", "pr", "launcher=slurm", "launcher.gpus_per_node=1", "--dry-run", "--probe", env=env)
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


def test_a_step_is_counted_on_its_core_less_its_wait_for_one():
    assert timing.on_core(0.1, 0.03) == pytest.approx(0.07)
    assert timing.on_core(0.1, 0.0) == 0.1
    assert timing.on_core(0.01, 0.02) == 0.0  # never negative
    d = timing.run_delay()
    assert d is None or d >= 0.0


def test_a_process_pays_its_start_and_first_set_ups_extra_once_and_each_run_a_later_set_up():
    pts = [
        {"flops_per_step": 1e6, "step_s": 0.01, "start_s": 1.5, "setup_s": 2.0, "setup_again_s": 0.2},
        {"flops_per_step": 1e8, "step_s": 0.1, "start_s": 1.0, "setup_s": 2.5, "setup_again_s": 0.3},
    ]
    for p in pts:
        p.update(first_s=0.0, eval_s=0.0, probe_s=0.0, entropy_s=0.0, ckpt_s=0.0, analysis_s=0.0)
    assert probes.process_seconds(pts) == pytest.approx(max(1.5 + 1.8, 1.0 + 2.2))
    row = {
        "flops_per_token": 1e6 / 4,
        "tokens_per_step": 4,
        "steps_planned": 100,
        "events": {"evals": 1, "ckpts": 1, "probes": 0, "entropy": 0, "analysis": 0},
    }
    sec = probes.run_seconds(pts, row)
    assert sec["setup"] == 0.2 and sec["total"] == pytest.approx(0.2 + 100 * 0.01)
    # a record written before setup_again_s was measured: the set-up in full, the start alone once
    old = [{k: v for k, v in p.items() if k != "setup_again_s"} for p in pts]
    assert probes.run_seconds(old, row)["setup"] == 2.0
    assert probes.process_seconds(old) == 1.5
