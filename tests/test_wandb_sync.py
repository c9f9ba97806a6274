"""``dw sync NAME``: offline W&B segments of a sweep -> ``wandb sync``.

The segments are real (W&B offline, written by the tracker) and so is the
upload: dw runs the real ``wandb sync``.  Only the W&B server cannot exist
here: tests/wandb_server.py stands in for it over HTTP and records what
arrived (history rows per run id).  W&B itself writes the ``.wandb.synced``
marker next to each segment it uploaded; dw skips those next time.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

from pathlib import Path

import pytest

from depthwidth.core.errors import BadInput
from tests.helpers import REPO, assert_bad_input
from tests.helpers import dw as dw_in_process
from tests.test_tracking import wandb_env
from tests.wandb_server import WandbServer


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Two runs' real offline segments (run a: two starts, b: one), written once per module."""
    import wandb

    from depthwidth.config.compose import compose
    from depthwidth.track.tracker import make_tracker

    root = tmp_path_factory.mktemp("wandb-sweep")
    env = wandb_env(root, DW_RUNS=str(root / "runs"))
    with pytest.MonkeyPatch.context() as mp:
        for k in [k for k in os.environ if k.startswith("WANDB_")]:
            mp.delenv(k)
        for k, v in env.items():
            if k.startswith(("WANDB_", "DW_")) or k == "NETRC":
                mp.setenv(k, v)
        cfg = compose(["tracker=wandb", "run.sweep=tiny"])
        doc = {"model": {"depth": 2, "width": 64, "shape": "uniform"}, "run": {"sweep": "tiny", "seed": 1}}
        try:
            for rid, starts in (("aaaaaaaaaaaa", [0, 10]), ("bbbbbbbbbbbb", [0])):
                d = root / "runs" / "tiny" / rid
                d.mkdir(parents=True)
                for i, start in enumerate(starts):
                    t = make_tracker(cfg, d, rid, doc, log=print)
                    t.rewind(start)
                    t.log({"step": start + 5, "tokens": 1, "loss": 1.0})
                    t.flush()
                    t.finish({"status": "preempted" if i < len(starts) - 1 else "done"})
                    wandb.teardown()  # as at process exit
        finally:
            wandb.teardown()
    return root / "runs"


@pytest.fixture
def sweep_runs(pristine, tmp_path, monkeypatch):
    """A fresh copy of the segments for each test, and its environment (set here too)."""
    shutil.copytree(pristine, tmp_path / "runs", symlinks=True)
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    env = wandb_env(tmp_path, DW_RUNS=str(tmp_path / "runs"))
    for k, v in env.items():
        if k.startswith(("WANDB_", "DW_")) or k == "NETRC":
            monkeypatch.setenv(k, v)
    return env


def _synced(env) -> list[str]:
    return sorted(str(p) for p in (Path(env["DW_RUNS"]) / "tiny").rglob("*.wandb.synced"))


def test_real_wandb_sync_uploads_each_segment_once_and_marks_it(sweep_runs, monkeypatch):
    from depthwidth.cli.sync import sync_sweep

    plan = sync_sweep("tiny", dry_run=True)
    assert plan["runs"] == 2 and plan["to_sync"] == 3
    with pytest.raises(BadInput, match="WANDB_API_KEY"):  # nothing to log in with
        sync_sweep("tiny")
    with WandbServer() as srv:
        monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
        monkeypatch.setenv("WANDB_BASE_URL", srv.url)
        res = sync_sweep("tiny", parallel=3)
        again = sync_sweep("tiny")
    assert res["synced_now"] == 3 and res["not_synced"] == [] and len(_synced(sweep_runs)) == 3
    # one W&B run per dw run; the two segments of run a (a restart at step 10) continue it, in order
    assert srv.steps("aaaaaaaaaaaa") == [5, 15] and srv.steps("bbbbbbbbbbbb") == [5]
    assert srv.history("aaaaaaaaaaaa")[1]["loss"] == 1.0
    assert srv.completed == {"aaaaaaaaaaaa": True, "bbbbbbbbbbbb": True}
    assert {u["name"] for u in srv.upserts} == {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}
    assert again["to_sync"] == 0 and again["synced_now"] == 0  # W&B's markers: nothing sent twice
    assert [s["state"] for s in again["segments"]] == ["synced"] * 3


def test_sync_to_a_server_that_refuses_fails_and_marks_nothing(sweep_runs):
    """The real ``wandb sync`` against a local address that refuses connections: it exits 0
    but writes no marker; dw sync counts the markers, exits 1 and says to run it again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    # W&B retries a refused server for minutes by default; one retry keeps the test short
    env = {
        **sweep_runs,
        "WANDB_API_KEY": "0" * 40,
        "WANDB_BASE_URL": f"http://127.0.0.1:{port}",
        "WANDB_X_GRAPHQL_RETRY_MAX": "1",
        "WANDB_X_GRAPHQL_RETRY_WAIT_MAX_SECONDS": "1",
    }
    p = subprocess.run(
        [sys.executable, "-m", "depthwidth", "sync", "tiny"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "connection refused" in p.stderr.lower()  # W&B's own message reaches the user
    assert "0 of 3 segments synced" in p.stderr and "run dw sync tiny again" in p.stderr
    assert _synced(sweep_runs) == []


def test_sync_cli(sweep_runs):
    def dw(*args):
        return dw_in_process(*args, env=sweep_runs, replace_env=True)

    p = dw("sync", "tiny", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["to_sync"] == 3
    assert "no W&B API key" in assert_bad_input(dw("sync", "tiny"))
    assert "no sweep 'nope'" in assert_bad_input(dw("sync", "nope"))
    assert "--parallel" in assert_bad_input(dw("sync", "tiny", "-n", "0"))
