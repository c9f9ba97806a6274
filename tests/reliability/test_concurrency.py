"""Concurrency on one sweep store: eight writers appending to one manifest while
``dw status`` reads it, and eight ``dw sweep`` invocations of one sweep at once
(local launcher).  Real processes, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from depthwidth.core.atomic import read_jsonl
from tests.helpers import REPO, run_dw
from tests.test_launch import status, tiny_env, wait_for

WRITERS, BATCHES = 8, 40

WRITER = """
import sys
from depthwidth.core import store
w = int(sys.argv[1])
for b in range(int(sys.argv[2])):
    n = 1 + (w + b) % 4
    # up to ~80 KB per batch: larger than any I/O buffer, so a torn or interleaved write would show
    store.append_events("s", [{"event": "submit", "run_id": f"w{w}b{b}e{i}", "job_id": f"local-x_{w}",
                               "launcher": "local", "pad": "x" * (2000 * ((w * 7 + b * 3 + i) % 40))}
                              for i in range(n)])
"""


def test_eight_writers_lose_nothing_and_status_reads_throughout(tmp_path, ledger):
    env = dict(os.environ, PYTHONPATH=str(REPO), DW_RUNS=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(BATCHES)], env=env, cwd=REPO)
        for w in range(WRITERS)
    ]
    reads = 0
    while any(p.poll() is None for p in procs) or reads < 3:  # read while they write
        if (tmp_path / "s" / "manifest").exists():
            p = run_dw("status", "s", "--json", env={"DW_RUNS": str(tmp_path)})
            assert p.returncode == 0, p.stderr
            json.loads(p.stdout)
            reads += 1
    assert all(p.wait() == 0 for p in procs)
    want = {
        f"w{w}b{b}e{i}": 2000 * ((w * 7 + b * 3 + i) % 40)
        for w in range(WRITERS)
        for b in range(BATCHES)
        for i in range(1 + (w + b) % 4)
    }
    lines = (tmp_path / "s" / "manifest").read_text().splitlines()
    rows = [json.loads(x) for x in lines]  # every line parses: none torn, none interleaved
    seen = Counter(r["run_id"] for r in rows)
    lost = sum(1 for k in want if k not in seen)
    dups = sum(c - 1 for c in seen.values())
    ledger(faults=WRITERS, recovered=0, lost=lost, duplicates=dups)
    assert lost == 0 and dups == 0 and len(rows) == len(want)
    assert all(len(r["pad"]) == want[r["run_id"]] for r in rows)  # and none cut short


def test_eight_concurrent_sweeps_submit_every_run_exactly_once(tmp_path, ledger):
    env = {**tiny_env(tmp_path, steps=4, depths="[1, 2, 3, 4]"), "PYTHONPATH": str(REPO)}
    full = dict(os.environ, **env)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "depthwidth", "sweep", "tiny", "launcher=local", "launcher.workers=1", "--json"],
            env=full,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    submitted = Counter(x["run_id"] for o in outs for x in o["submitted"])
    subs = Counter(e["run_id"] for e in read_jsonl(tmp_path / "runs" / "tiny" / "manifest") if e["event"] == "submit")
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 4 and s, 240, "the 4 runs done")
    ledger(faults=8, recovered=0, lost=4 - len(subs), duplicates=sum(c - 1 for c in subs.values()))
    assert len(submitted) == 4 and set(submitted.values()) == {1} and subs == submitted
    assert sum(1 for o in outs if o["submitted"]) == 1  # one invocation submitted; seven found them queued
    assert all(r["attempts"] == 1 for r in st["runs"])
