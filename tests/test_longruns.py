"""Month-long runs planned as a person would: the 30-model grid's calendar per run counts requeue
restarts, queue waits (a stated assumption) and checkpoint writes; ``--max-days`` proposes the fewest
nodes per run that finish each run in time, each checked as the submission would; evaluations are
in the hours; one line says when a sweep trains one seed per configuration."""

from __future__ import annotations

import json

import pytest

from depthwidth.sweep import longruns
from tests.helpers import assert_bad_input, dw, sweep_store

SEEDS = """
    groups: {model: depth_delusion, data: pydoc}
    fixed: {model.width: 64, train.seq_len: 32, train.batch_size: 8, train.steps: 10}
    axes: {model.depth: [1, 2]}
    seeds: [1, 2]
"""
ARGS = ["sweep", "depth_delusion", "launcher=slurm", "--dry-run", "--no-data-check"]


@pytest.fixture(scope="module")
def planned():
    p = dw(*ARGS, "--max-days", "14", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_calendar_per_run_counts_restarts_queue_waits_and_checkpoint_writes(planned):
    for x in planned["runs"]:
        io = longruns.IO_BYTES_PER_S * x["nodes"]
        restart = longruns.RESTART_S / 3600 + x["ckpt_bytes"] / io / 3600
        writes = x["events"]["ckpts"] * x["ckpt_bytes"] / io / 3600
        want = x["wall_hours"] + x["requeues"] * (restart + longruns.QUEUE_WAIT_H) + writes
        assert x["run_hours"] == pytest.approx(want, rel=1e-12)
    big = planned["runs"][28]  # 26 x 4608, 7.09B: 515 h of training on one node of 8 GPUs
    assert big["requeues"] == 514 and big["run_hours"] > 2 * big["wall_hours"]


def test_max_days_proposes_the_fewest_nodes_that_finish_each_run_in_time(planned):
    props = {p["index"]: p for p in planned["long_runs"]["proposals"]}
    assert set(props) == {20, 21, 26, 27, 28, 29} and planned["long_runs"]["unmet"] == []
    for i, p in props.items():
        x = planned["runs"][i]
        assert x["run_hours"] > 14 * 24 >= p["run_hours"]
        assert p["wall_hours"] == pytest.approx(x["wall_hours"] / p["nodes"])
        fewer = longruns.run_calendar(x, p["nodes"] - 1, longruns.QUEUE_WAIT_H, longruns.RESTART_S)
        assert fewer["run_hours"] > 14 * 24 or p["nodes"] - 1 == 3  # 3 nodes: 256 sequences do not divide over 24
    for i, x in enumerate(planned["runs"]):
        assert (x.get("nodes_proposed") is not None) == (i in props)
    text = dw(*ARGS, "--max-days", "14").stdout
    assert "--max-days 14: 6 run(s) need more nodes to finish in time: run 20 4 nodes" in text
    assert "with those nodes: ≈" in text and "queue wait 1 h per requeue, assumed" in text


def test_one_seed_per_configuration_is_said_and_evaluations_are_in_the_hours(planned, tmp_path):
    text = dw(*ARGS).stdout
    assert "one seed per configuration (30 runs, seed 42): seed noise is not estimated" in text
    env = sweep_store(tmp_path, "two", SEEDS)
    seeded = json.loads(dw("sweep", "two", "--dry-run", "--json", env=env).stdout)
    assert len(seeded["runs"]) == 4 and not any(n.startswith("one seed") for n in seeded["notes"])
    demo = json.loads(dw("sweep", "demo", "--dry-run", "--json").stdout)
    for x in demo["runs"]:
        assert x["flops_eval"] == pytest.approx(3 * 8 * 512 * x["flops_per_token"] / 3)  # 3 budgets, 8 batches
        secs = (x["flops_planned"] + x["flops_eval"]) / (0.4 * 1e11)
        if x.get("time") == "assumed":
            assert x["device_hours"] == pytest.approx(secs / 3600)
    assert "--max-days" in assert_bad_input(dw("sweep", "demo", "--max-days", "3"))
