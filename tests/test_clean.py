"""``dw clean``: the checkpoints of a sweep's done runs go, every other run's stay (tiny CPU runs).

One sweep is trained once for the module, and its tests are the steps of its life, in file order:

- 1x32 and 2x32 finish (``done``, debug launcher) with ``train.analyze_at_end`` (their analysis.json
  is written) and ``train.eval_tasks=[lambada_openai]``, whose end-of-run evaluation fails because
  lm-eval cannot be imported (a shim first on PYTHONPATH: a machine without the harness), so their
  eval.json is still wanted;
- 3x32 and 4x32 run on two local workers, each held before step 11 by the test gate (tests/gate):
  3x32 stays ``running`` until a later test lets it finish, 4x32 gets Ctrl-C, checkpoints step 11 and
  is ``preempted``.

Checkpoints every 4 steps, all kept (``train.keep_ckpts=10``): a done run holds steps 4, 8 and 12.
Every state is reached by dw's own mechanisms; the one file removed by hand is an analysis.json
(``test_keep_none_...``: a run whose end-of-run analysis never got written).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from depthwidth.core.store import read_manifest
from depthwidth.launch.scheduler import pid_alive
from depthwidth.train import checkpoint
from depthwidth.train.analysis import find_checkpoint
from tests.helpers import REPO, assert_bad_input, dw, dw_in_process, gate_env, open_gate, run_dw

SWEEP = """\
groups: {model: vwt, data: pydoc}
fixed: {model.heads: 4, model.shape: uniform, train.seq_len: 32, train.batch_size: 4, train.steps: 12,
        train.log_every: 4, train.ckpt_every: 4, train.keep_ckpts: 10, train.threads: 1, train.eval_batches: 2,
        probe.every: 0, probe.at: []}
axes: {model.width: [32], model.depth: [1, 2, 3, 4]}
"""
GATE = 10  # the local runs wait here: checkpoints 4 and 8 written, step 11 not yet taken


def _wait(pred, timeout: float, what: str):
    import time

    t0 = time.monotonic()
    while not (v := pred()):
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.2)
    return v


class Sweep:
    def __init__(self, root: Path):
        self.root, self.gate = root, root / "gate"
        (root / "sweeps").mkdir(parents=True)
        (root / "sweeps" / "tiny.yaml").write_text(SWEEP)
        self.env = {"DW_SWEEPS": str(root / "sweeps"), "DW_RUNS": str(root / "runs")}

    def status(self) -> dict:
        p = dw("status", "tiny", "--json", env=self.env)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def clean(self, *argv: str) -> dict:
        """``dw clean tiny ARGV --json`` in a process of its own, which must never import torch."""
        code = (
            "import sys\nfrom depthwidth.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nassert 'torch' not in sys.modules, 'torch was imported'\n"
        )
        p = subprocess.run(
            [sys.executable, "-c", code, "clean", "tiny", *argv, "--json"],
            cwd=REPO,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout)

    def ckpt(self, depth: int) -> Path:
        return Path(self.dirs[depth]) / "ckpt"

    def files(self, depth: int) -> dict:
        """Every file of the run's checkpoints -> (size, mtime): what "untouched" compares."""
        out = {}
        for top, _, names in os.walk(self.ckpt(depth)):
            for n in names:
                st = os.lstat(os.path.join(top, n))
                out[os.path.relpath(os.path.join(top, n), self.ckpt(depth))] = (st.st_size, st.st_mtime_ns)
        return out


def _freed(before: dict, after: dict) -> int:
    """The bytes of the files that are gone."""
    return sum(size for f, (size, _) in before.items() if f not in after)


def _steps(doc: dict) -> dict:
    return {r["run_id"]: (r["kept"], r["deleted"]) for r in doc["runs"]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    s = Sweep(tmp_path_factory.mktemp("clean"))
    shim = s.root / "no-lm-eval" / "lm_eval"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('lm-eval is not installed here (tests/test_clean.py)')\n")
    local = run_dw(
        "sweep",
        "tiny",
        "launcher=local",
        "launcher.workers=2",
        "--only",
        "model.depth=[34]",
        "--json",
        env={**s.env, **gate_env(s.gate, GATE)},
    )
    assert local.returncode == 0, local.stderr
    try:
        done = run_dw(
            "sweep",
            "tiny",
            "--only",
            "model.depth=[12]",
            "train.analyze_at_end=true",
            "train.eval_tasks=[lambada_openai]",
            env={**s.env, "PYTHONPATH": f"{shim.parent}{os.pathsep}{REPO}"},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _wait(lambda: len(list(s.gate.glob(f"at-{GATE}-*"))) == 2, 120, "both local runs at the gate")
        rows = {r["depth"]: r for r in s.status()["runs"]}
        s.ids = {d: r["run_id"] for d, r in rows.items()}
        s.dirs = {d: r["run_dir"] for d, r in rows.items()}
        pids = {e["run_id"]: e["pid"] for e in read_manifest("tiny", root=s.root / "runs") if e["event"] == "start"}
        s.worker = pids[s.ids[3]]
        os.kill(pids[s.ids[4]], signal.SIGINT)  # the worker this fixture started
        _wait(lambda: not pid_alive(pids[s.ids[4]]), 60, "the 4x32 worker to exit")
        states = {r["depth"]: r["state"] for r in s.status()["runs"]}
        assert states == {1: "done", 2: "done", 3: "running", 4: "preempted"}, states
        for d in (1, 2):
            assert (Path(s.dirs[d]) / "analysis.json").is_file() and not (Path(s.dirs[d]) / "eval.json").exists()
        assert checkpoint.list_steps(s.ckpt(3)) == [4, 8] and checkpoint.list_steps(s.ckpt(4)) == [4, 8, 11]
        s.preempted = s.files(4)
        yield s
    finally:
        open_gate(s.gate)
        for w in s.root.glob("runs/tiny/jobs/*/worker-*.json"):
            pid = json.loads(w.read_text()).get("pid")
            _wait(lambda: not pid_alive(pid), 60, "the local workers to exit")


def test_dry_run_says_what_would_go_and_deletes_nothing(sweep, capsys, monkeypatch):
    before = {d: sweep.files(d) for d in (1, 2, 3, 4)}
    doc = sweep.clean("--dry-run")
    assert doc["dry_run"] and doc["keep"] == "final"
    assert _steps(doc) == {
        sweep.ids[1]: ([12], [4, 8]),
        sweep.ids[2]: ([12], [4, 8]),
        sweep.ids[3]: ([4, 8], []),
        sweep.ids[4]: ([4, 8, 11], []),
    }
    after = {d: sweep.files(d) for d in (1, 2, 3, 4)}
    assert after == before
    want = sum(size for d in (1, 2) for f, (size, _) in before[d].items() if not f.startswith("step_00000012"))
    assert doc["total"]["bytes"] == want and doc["total"]["checkpoints"] == 4
    assert doc["total"]["left_alone"] == {"preempted": 1, "running": 1}
    monkeypatch.setenv("DW_RUNS", sweep.env["DW_RUNS"])
    code, out, err = dw_in_process(capsys, "clean", "tiny", "--dry-run")
    assert code == 0, err
    assert all(sweep.ids[d] in out for d in (1, 2, 3, 4)) and "left alone: running" in out
    assert "would free " in out and "in 2 runs (4 checkpoints); kept 2 checkpoints; left alone 2 runs not done" in out
    assert {d: sweep.files(d) for d in (1, 2, 3, 4)} == before


def test_bad_input_exits_2_with_one_line_and_deletes_nothing(sweep, capsys, monkeypatch):
    before = {d: sweep.files(d) for d in (1, 2, 3, 4)}
    monkeypatch.setenv("DW_RUNS", sweep.env["DW_RUNS"])

    def bad(*argv):
        code, out, err = dw_in_process(capsys, "clean", *argv)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err + out, (code, err)
        return lines[0]

    line = assert_bad_input(run_dw("clean", "tiny", "--keep", "last", env=sweep.env))  # one real process
    assert "--keep" in line and "'last'" in line and "final | none" in line
    line = bad("nosuch")
    assert "'nosuch'" in line and "tiny" in line  # names the sweeps there are
    assert "--keep none" in bad("tiny", "--force")
    assert "--frobnicate" in bad("tiny", "--frobnicate")
    assert {d: sweep.files(d) for d in (1, 2, 3, 4)} == before


def test_keep_final_deletes_done_runs_older_checkpoints_only(sweep):
    before = {d: sweep.files(d) for d in (1, 2, 3, 4)}
    doc = sweep.clean()
    after = {d: sweep.files(d) for d in (1, 2, 3, 4)}
    assert after[3] == before[3] and after[4] == before[4] == sweep.preempted  # same files, same mtimes
    for d in (1, 2):
        assert sorted(p.name for p in sweep.ckpt(d).iterdir()) == ["step_00000012"]
        assert after[d] == {f: v for f, v in before[d].items() if f.startswith("step_00000012")}
        step, path = find_checkpoint(sweep.dirs[d], "final")
        assert step == 12 and checkpoint.verify(path) is None
    rows = {r["run_id"]: r for r in doc["runs"]}
    assert [rows[sweep.ids[d]]["bytes"] for d in (1, 2)] == [_freed(before[d], after[d]) for d in (1, 2)]
    assert doc["total"]["bytes"] == sum(_freed(before[d], after[d]) for d in (1, 2)) > 0
    assert (doc["total"]["runs"], doc["total"]["checkpoints"], doc["total"]["kept"]) == (2, 4, 2)
    again = sweep.clean()
    assert again["total"]["bytes"] == 0 and again["total"]["checkpoints"] == 0


def test_a_crash_mid_delete_leaves_no_checkpoint_and_the_next_clean_finishes_it(sweep, monkeypatch):
    """The running run finishes; a dw clean killed while it removes the run's first checkpoint (Ctrl-C
    in shutil.rmtree, one file gone) leaves only a hidden .deleting-step_00000004, which no reader
    lists; the next dw clean removes it with the checkpoint it had not reached."""
    from depthwidth.sweep import clean as lib

    open_gate(sweep.gate)
    _wait(lambda: not pid_alive(sweep.worker), 120, "the 3x32 run to finish")
    assert {r["depth"]: r["state"] for r in sweep.status()["runs"]}[3] == "done"
    before = sweep.files(3)
    real = lib.shutil.rmtree

    def killed(path, *a, **kw):
        (Path(path) / "extra.pt").unlink()
        raise KeyboardInterrupt

    monkeypatch.setenv("DW_RUNS", sweep.env["DW_RUNS"])
    monkeypatch.setattr(lib.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        lib.clean("tiny")
    monkeypatch.setattr(lib.shutil, "rmtree", real)
    names = sorted(p.name for p in sweep.ckpt(3).iterdir())
    assert names == [".deleting-step_00000004", "step_00000008", "step_00000012"]
    assert checkpoint.list_steps(sweep.ckpt(3)) == [8, 12] and find_checkpoint(sweep.dirs[3])[0] == 12
    doc = sweep.clean()
    (row,) = [r for r in doc["runs"] if r["run_id"] == sweep.ids[3]]
    assert row["leftovers"] == [".deleting-step_00000004"] and (row["kept"], row["deleted"]) == ([12], [8])
    assert sorted(p.name for p in sweep.ckpt(3).iterdir()) == ["step_00000012"]
    leftover = sum(v[0] for f, v in before.items() if f.startswith("step_00000004/") and f != "step_00000004/extra.pt")
    assert row["bytes"] == leftover + sum(v[0] for f, v in before.items() if f.startswith("step_00000008/"))
    assert sweep.clean()["total"]["bytes"] == 0 and sweep.files(4) == sweep.preempted


def test_keep_none_spares_what_analyze_or_eval_still_need_unless_forced(sweep, capsys, monkeypatch):
    (Path(sweep.dirs[1]) / "analysis.json").unlink()  # as if its end-of-run analysis was never written
    before = {d: sweep.files(d) for d in (1, 2, 3)}
    doc = sweep.clean("--keep", "none")
    rows = {r["run_id"]: r for r in doc["runs"]}
    assert rows[sweep.ids[1]]["needed_by"] == ["analyze", "eval"] and rows[sweep.ids[2]]["needed_by"] == ["eval"]
    assert rows[sweep.ids[1]]["note"] == "kept: still needed by analyze and eval"
    assert _steps(doc)[sweep.ids[1]] == _steps(doc)[sweep.ids[2]] == ([12], [])
    assert _steps(doc)[sweep.ids[3]] == ([], [12]) and not any(sweep.ckpt(3).iterdir())
    assert doc["total"]["bytes"] == sum(v[0] for v in before[3].values()) and doc["total"]["kept_needed"] == 2
    assert sweep.files(1) == before[1] and sweep.files(2) == before[2] and sweep.files(4) == sweep.preempted
    monkeypatch.setenv("DW_RUNS", sweep.env["DW_RUNS"])
    code, out, _ = dw_in_process(capsys, "clean", "tiny", "--keep", "none", "--dry-run")
    assert code == 0 and "kept: still needed by analyze and eval" in out and "--force deletes them" in out
    forced = sweep.clean("--keep", "none", "--force")
    assert _steps(forced)[sweep.ids[1]] == _steps(forced)[sweep.ids[2]] == ([], [12])
    assert forced["total"]["bytes"] == sum(v[0] for d in (1, 2) for v in before[d].values())
    assert not any(any(sweep.ckpt(d).iterdir()) for d in (1, 2)) and sweep.files(4) == sweep.preempted
    assert sweep.clean("--keep", "none", "--force")["total"]["bytes"] == 0
