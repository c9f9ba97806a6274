"""Manifest + run directories + scheduler -> run states (no training here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from depthwidth.core import store
from depthwidth.launch import slurm
from depthwidth.launch import status
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput
from tests.helpers import assert_bad_input, dw, REPO


@pytest.mark.parametrize(
    "summary, sched, started, want",
    [
        ("done", "running", True, "done"),
        ("diverged", None, False, "diverged"),
        (None, "pending", False, "pending"),
        ("preempted", "pending", True, "preempted"),  # checkpointed, requeued, waiting
        ("running", "running", True, "running"),
        (None, "running", False, "pending"),  # packed task: this run's turn has not come
        (None, "running", True, "running"),
        ("failed", "running", False, "failed"),
        ("running", "cancelled", True, "cancelled"),
        ("preempted", "cancelled", True, "cancelled"),
        ("running", "failed", True, "failed"),
        ("preempted", "preempted", True, "preempted"),
        ("running", "completed", True, "failed"),  # the job ended but the run did not finish
        ("failed", None, True, "failed"),
        ("running", None, True, "lost"),  # the scheduler forgot it, the run did not end
        (None, None, False, "lost"),
    ],
)
def test_run_state(summary, sched, started, want):
    s = {"status": summary} if summary else None
    assert status.run_state(s, sched, started) == want


def test_sacct_array_ids_are_expanded():
    assert slurm.expand_array("12_[0-3,7%2]") == ["12_0", "12_1", "12_2", "12_3", "12_7"]
    assert slurm.expand_array("12_5") == ["12_5"] and slurm.expand_array("99") == ["99"]


def _fake_sweep(root, name, n, launcher="local", states=None):
    """n runs submitted as local tasks; run i gets summary/metrics per ``states``."""
    states = states or {}
    sub = root / name / "jobs" / "sub"
    sub.mkdir(parents=True)
    events = []
    for i in range(n):
        rid = f"run{i:05d}"
        rd = root / name / rid
        jid = f"{launcher}-sub_{i}"
        events.append(
            {
                "event": "submit",
                "run_id": rid,
                "job_id": jid,
                "launcher": launcher,
                "run_dir": str(rd),
                "overrides": [f"model.depth={i}"],
                "tokens_total": 1000,
                "params": 10,
            }
        )
        st = states.get(i, "done")
        task = {"job_id": jid, "state": "completed"}
        if st in ("done", "failed", "diverged", "running"):
            events.append({"event": "start", "run_id": rid, "job_id": jid})
            rd.mkdir(parents=True)
            write_json(
                rd / "summary.json",
                {
                    "run_id": rid,
                    "status": st,
                    "tokens": 1000 if st == "done" else 400,
                    "tokens_total": 1000,
                    "last_loss": 3.0,
                },
            )
            (rd / "metrics.jsonl").write_text(json.dumps({"step": 4, "tokens": 400, "loss": 3.25}) + "\n")
        if st == "running":
            task = {"job_id": jid, "state": "running", "pid": os.getpid()}
        elif st == "lost":
            task = {"job_id": jid, "state": "running", "pid": 2**22 + 12345}
        elif st == "pending":
            task = {"job_id": jid, "state": "queued"}
            write_json(sub / "worker-0.json", {"pid": os.getpid(), "state": "running"})
        write_json(sub / f"task-{i}.json", task)
    store.append_events(name, events)
    return events


def test_status_joins_manifest_run_dirs_and_tasks(tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    _fake_sweep(tmp_path, "s", 6, states={1: "failed", 2: "running", 3: "lost", 4: "pending", 5: "diverged"})
    st = status.status("s")
    by = {r["run_id"]: r for r in st["runs"]}
    assert [by[f"run0000{i}"]["state"] for i in range(6)] == [
        "done",
        "failed",
        "running",
        "lost",
        "pending",
        "diverged",
    ]
    assert by["run00000"]["progress"] == 1.0 and by["run00002"]["tokens"] == 400
    assert by["run00002"]["last_loss"] == 3.25 and by["run00002"]["attempts"] == 1
    assert by["run00004"]["attempts"] == 0
    assert st["counts"]["done"] == 1 and st["total"] == 6
    assert status.summary_line(st).startswith("s: 6 runs — 1 pending, 1 running, 1 done")


def test_status_reads_the_store_it_is_given_not_the_environment(tmp_path, monkeypatch):
    """``status(name, root)``: the report asks about its own --root; before, it swapped $DW_RUNS around the call."""
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "store"))
    _fake_sweep(tmp_path / "store", "s", 5, states={1: "failed", 2: "running", 3: "lost", 4: "pending"})
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "elsewhere"))
    st = status.status("s", root=tmp_path / "store")
    assert [r["state"] for r in st["runs"]] == ["done", "failed", "running", "lost", "pending"]  # task files too
    assert os.environ["DW_RUNS"] == str(tmp_path / "elsewhere")
    with pytest.raises(BadInput, match="no sweep 's' in .*elsewhere"):
        status.status("s")


def test_attempts_count_restarts_and_resubmissions(tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    store.append_events(
        "s",
        [
            {"event": "start", "run_id": "a", "job_id": "7_0"},  # a task may start before dw writes its submit line
            {"event": "submit", "run_id": "a", "job_id": "7_0", "launcher": "slurm"},
            {"event": "start", "run_id": "a", "job_id": "7_0"},  # requeued
            {"event": "submit", "run_id": "a", "job_id": "9_0", "launcher": "slurm"},
            {"event": "start", "run_id": "a", "job_id": "9_0"},
        ],
    )
    r = store.manifest_runs(store.read_manifest("s"))["a"]
    assert r["attempts"] == 3 and r["jobs"] == ["7_0", "9_0"] and r["job_id"] == "9_0" and r["started"]


def test_manifest_is_append_only(tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    store.append_events("s", [{"event": "submit", "run_id": "a", "job_id": "1"}])
    first = store.manifest_path("s").read_bytes()
    store.append_events("s", [{"event": "start", "run_id": "a", "job_id": "1"}])
    assert store.manifest_path("s").read_bytes().startswith(first)
    with open(store.manifest_path("s"), "a") as f:
        f.write('{"event": "sta')  # a torn last line (crash mid-append) is ignored
    assert len(store.read_manifest("s")) == 2


def test_slurm_status_is_one_sacct_call(tmp_path, monkeypatch):
    """A fake sacct on PATH records its calls: 1,000 runs over 3 arrays -> one call."""
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    (bin_ / "sacct").write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {log}\n'
        'echo "100_0|COMPLETED"; echo "100_1|CANCELLED by 0"; echo "100_2|RUNNING"; echo "100_[3-399%8]|PENDING"\n'
        'echo "101_0|REQUEUED"; echo "101_0|PENDING"\n'
    )
    (bin_ / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    events = []
    for i in range(1000):
        jid = f"{100 + i // 400}_{i % 400}"
        events.append(
            {
                "event": "submit",
                "run_id": f"r{i}",
                "job_id": jid,
                "launcher": "slurm",
                "run_dir": str(tmp_path / "s" / f"r{i}"),
                "tokens_total": 10,
            }
        )
    events.append({"event": "start", "run_id": "r2", "job_id": "100_2"})
    store.append_events("s", events)
    rd = tmp_path / "s" / "r400"
    rd.mkdir(parents=True)
    write_json(rd / "summary.json", {"run_id": "r400", "status": "preempted"})
    st = status.status("s")
    assert log.read_text().count("\n") == 1 and "-j 100,101,102" in log.read_text()
    states = [r["state"] for r in st["runs"]]
    assert states[:4] == ["lost", "cancelled", "running", "pending"]  # 100_0 ended without its run folder
    assert "does not exist" in st["runs"][0]["reason"]
    assert states[399] == "pending" and states[400] == "preempted" and states[800] == "lost"


def test_status_cli_table_json_and_no_torch(tmp_path, monkeypatch):
    env = {"DW_RUNS": str(tmp_path)}
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    _fake_sweep(tmp_path, "s", 3, states={1: "failed"})
    p = dw("status", "s", env=env)
    assert p.returncode == 0, p.stderr
    assert "run00001" in p.stdout and "failed" in p.stdout and "s: 3 runs — 2 done, 1 failed" in p.stdout
    p = dw("status", "s", "--json", env=env)
    doc = json.loads(p.stdout)
    assert doc["counts"]["failed"] == 1 and len(doc["runs"]) == 3
    code = (
        "import sys\nfrom depthwidth.cli import main\ntry:\n    main(['status', 's'])\nexcept SystemExit:\n    pass\n"
        "print('MODS', 'torch' in sys.modules, 'hydra' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env={**os.environ, **env}
    ).stdout
    assert out.strip().endswith("MODS False False")


def test_status_of_an_unknown_sweep_is_bad_input(tmp_path):
    line = assert_bad_input(dw("status", "nope", env={"DW_RUNS": str(tmp_path)}))
    assert "nope" in line


def test_a_large_sweep_renders_every_row(tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    _fake_sweep(tmp_path, "big", 250, states={7: "failed"})
    p = dw("status", "big", env={"DW_RUNS": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    body = [ln for ln in p.stdout.splitlines() if ln.startswith("│ run")]
    assert len(body) == 250 and "│ failed " in body[7] and "big: 250 runs — 249 done, 1 failed" in p.stdout


def test_the_controller_wins_where_accounting_lags_it(monkeypatch):
    """sacct (slurmdbd) hears of a start or a requeue after slurmctld does: a task sacct still calls
    PENDING that squeue shows RUNNING is running (CI: `dw status` said pending of a run training at a
    gate); a task squeue no longer holds keeps sacct's record; one squeue call, for those arrays only."""
    calls = []

    def fake(cmd, timeout=None, text=True):
        calls.append(cmd[0])
        out = {
            "sacct": "7_0|PENDING\n7_1|COMPLETED\n7_2|REQUEUED\n8_0|RUNNING\n",
            "squeue": "7_0|RUNNING\n",
        }[cmd[0]]
        if cmd[0] == "squeue":
            assert cmd[cmd.index("-j") + 1] == "7,9"  # 7: PENDING and REQUEUED; 9: not in sacct yet; not 8
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(slurm, "_call", fake)
    got = slurm.slurm_states(["7_0", "7_1", "7_2", "8_0", "9_0"])
    assert got == {"7_0": "RUNNING", "7_1": "COMPLETED", "7_2": "REQUEUED", "8_0": "RUNNING"}
    assert calls == ["sacct", "squeue"]
