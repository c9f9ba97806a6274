"""``dw sync NAME``: offline W&B segments of a sweep -> ``wandb sync``.

The segments are real (W&B offline, written by the tracker).  The upload
itself needs a W&B server, which cannot exist here: ``fake_upload`` stands in
for ``wandb sync`` and, like it, marks each uploaded file ``.wandb.synced``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from depthwidth.core.errors import BadInput
from tests.helpers import REPO, assert_bad_input
from tests.test_tracking import wandb_env


@pytest.fixture
def sweep_runs(tmp_path, monkeypatch):
    import wandb

    from depthwidth.config.compose import compose
    from depthwidth.track.tracker import make_tracker

    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    env = wandb_env(tmp_path, DW_RUNS=str(tmp_path / "runs"))
    for k, v in env.items():
        if k.startswith(("WANDB_", "DW_")) or k == "NETRC":
            monkeypatch.setenv(k, v)
    cfg = compose(["tracker=wandb", "run.sweep=tiny"])
    doc = {"model": {"depth": 2, "width": 64, "shape": "uniform"}, "run": {"sweep": "tiny", "seed": 1}}
    try:
        for rid, starts in (("aaaaaaaaaaaa", [0, 10]), ("bbbbbbbbbbbb", [0])):
            d = tmp_path / "runs" / "tiny" / rid
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
    return env


def fake_upload(calls):
    def upload(files, parallel):
        calls.append((list(files), parallel))
        for f in files:
            open(f + ".synced", "w").close()
        return 0
    return upload


def test_sync_uploads_each_segment_once(sweep_runs):
    from depthwidth.cli.sync import sync_sweep

    calls = []
    plan = sync_sweep("tiny", dry_run=True, syncer=fake_upload(calls))
    assert plan["runs"] == 2 and plan["to_sync"] == 3 and calls == []
    with pytest.raises(BadInput, match="WANDB_API_KEY"):  # nothing to log in with
        sync_sweep("tiny", syncer=fake_upload(calls))
    os.environ["WANDB_API_KEY"] = "0" * 40
    try:
        res = sync_sweep("tiny", parallel=3, syncer=fake_upload(calls))
        again = sync_sweep("tiny", syncer=fake_upload(calls))
    finally:
        del os.environ["WANDB_API_KEY"]
    assert res["synced_now"] == 3 and len(calls) == 1
    files, parallel = calls[0]
    assert parallel == 3 and len(files) == 3
    a = [f for f in files if "run-aaaaaaaaaaaa" in f]
    assert len(a) == 2 and a == sorted(a)  # one run's segments in start order
    assert again["to_sync"] == 0 and len(calls) == 1  # already synced: skipped


def test_sync_cli(sweep_runs):
    def dw(*args):
        return subprocess.run([sys.executable, "-m", "depthwidth", *args], cwd=REPO, env=sweep_runs,
                              capture_output=True, text=True, timeout=120)

    p = dw("sync", "tiny", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["to_sync"] == 3
    assert "no W&B API key" in assert_bad_input(dw("sync", "tiny"))
    assert "no sweep 'nope'" in assert_bad_input(dw("sync", "nope"))
    assert "--parallel" in assert_bad_input(dw("sync", "tiny", "-n", "0"))
