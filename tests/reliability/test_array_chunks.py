"""Array chunking on the real cluster, whose MaxArraySize is 8 (scripts/slurm_cluster.sh):
a 30-run sweep goes in as four arrays (8+8+8+6), all in one manifest, tracked by one
``dw status``, cancelled and retried as one sweep.  The jobs are held (``--begin`` an
hour ahead) so nothing trains: only submission and bookkeeping are under test."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from depthwidth.core.atomic import read_jsonl
from tests.helpers import run_dw
from tests.test_launch import tiny_env, wait_for
from tests.test_launch_slurm import status

pytestmark = pytest.mark.slurm
HOLD = "launcher.additional={begin: now+1hour}"


def _submit(env, *args):
    p = run_dw("sweep", "tiny", "launcher=slurm", HOLD, *args, "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _arrays(jobs):
    return Counter(j.split("_")[0] for j in jobs)


def test_thirty_runs_go_in_as_four_arrays_of_one_sweep(slurm_cluster, tmp_path, ledger):
    env = tiny_env(tmp_path, steps=4, depths="[" + ", ".join(str(d) for d in range(1, 31)) + "]")
    out = _submit(env)
    arrays = _arrays(out["jobs"])
    try:
        assert len(out["submitted"]) == 30 and sorted(arrays.values()) == [6, 8, 8, 8]
        st = status(env)
        assert st["total"] == 30 and st["counts"]["pending"] == 30
        assert {r["job_id"] for r in st["runs"]} == set(out["jobs"])
        text = run_dw("sweep", "tiny", "launcher=slurm", HOLD, env=env)  # nothing new: all pending
        assert text.returncode == 0 and "nothing to submit (30 pending)" in text.stdout
    finally:
        slurm_cluster.sh("scancel", *arrays)
    wait_for(lambda: status(env)["counts"]["cancelled"] == 30, 120, "30 runs cancelled")
    again = _submit(env, "--retry-failed")
    arrays2 = _arrays(again["jobs"])
    try:
        assert len(again["submitted"]) == 30 and sorted(arrays2.values()) == [6, 8, 8, 8]
        assert not set(arrays2) & set(arrays)
        st = status(env)
        assert st["counts"]["pending"] == 30 and all(len(r["jobs"]) == 2 for r in st["runs"])
        p = run_dw(
            "sweep",
            "tiny",
            "launcher=slurm",
            HOLD,
            "launcher.max_array_size=20",
            "--only",
            "model.depth=1",
            "--retry-failed",
            env=env,
        )
        assert p.returncode == 0 and "nothing to submit" in p.stdout
    finally:
        slurm_cluster.sh("scancel", *arrays2)
    subs = Counter(e["run_id"] for e in read_jsonl(tmp_path / "runs" / "tiny" / "manifest") if e["event"] == "submit")
    ledger(faults=0, recovered=0, lost=30 - len(subs), duplicates=sum(c - 2 for c in subs.values()))
    assert len(subs) == 30 and set(subs.values()) == {2}  # each run: its first job and its one retry
    from depthwidth.launch.slurm import max_array_size

    assert max_array_size({}) == 8  # read from the cluster (scontrol show config)
    assert max_array_size({"max_array_size": 5}) == 5
