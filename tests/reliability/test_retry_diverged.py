"""A retry that can help: --retry-failed leaves diverged runs alone (the same config, seed
and data diverge again); --retry-diverged with an override that changes the run starts it
afresh under a new run id, linked to the old one in the manifest and in dw status.
Real runs through the debug launcher; the divergence is real (lr 1e4, no clipping)."""

from __future__ import annotations

import json

from depthwidth.core.atomic import read_jsonl
from tests.helpers import assert_bad_input, run_dw
from tests.test_launch import status, tiny_env

BLOWUP = ["optim.lr=1e4", "optim.grad_clip=0", "optim.warmup=0"]


def _sweep(env, *args):
    p = run_dw("sweep", "tiny", *BLOWUP, *args, "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_diverged_runs_are_retried_only_with_a_change_and_under_a_new_id(tmp_path, ledger):
    env = tiny_env(tmp_path)
    first = _sweep(env)
    old = {x["run_id"] for x in first["submitted"]}
    assert status(env)["counts"]["diverged"] == 2

    again = _sweep(env, "--retry-failed")
    assert again["submitted"] == [] and again["skipped"] == {"diverged": 2}
    assert "--retry-diverged" in again["notes"][0]

    manifest = tmp_path / "runs" / "tiny" / "manifest"
    before = manifest.read_text()
    p = run_dw("sweep", "tiny", *BLOWUP, "--retry-diverged", "optim.lr=1e4", "--json", env=env)
    line = assert_bad_input(p)
    assert "--retry-diverged" in line and "change the run" in line
    assert manifest.read_text() == before  # nothing submitted

    fixed = _sweep(env, "--retry-diverged", "optim.lr=1e-3")
    new = {x["run_id"] for x in fixed["submitted"]}
    assert len(new) == 2 and not new & old
    st = {r["run_id"]: r for r in status(env)["runs"]}
    assert {st[r]["state"] for r in old} == {"diverged"} and {st[r]["state"] for r in new} == {"done"}
    assert {st[r]["retried_as"] for r in old} == new and {st[r]["retry_of"] for r in new} == old
    for r in new:
        assert st[st[r]["retry_of"]]["retried_as"] == r and "optim.lr=0.001" in st[r]["overrides"]
    subs = [e for e in read_jsonl(manifest) if e["event"] == "submit"]
    assert sorted(e.get("retry_of") or "" for e in subs) == sorted(["", ""] + list(old))
    text = run_dw("status", "tiny", env=env).stdout
    assert text.count("retry of") == 2 and text.count("retried as") == 2

    assert _sweep(env, "--retry-diverged", "optim.lr=1e-3")["submitted"] == []  # once only
    subs = [e["run_id"] for e in read_jsonl(manifest) if e["event"] == "submit"]
    ledger(
        faults=2, recovered=sum(st[r]["state"] == "done" for r in new), lost=0, duplicates=len(subs) - len(set(subs))
    )
