"""Successive halving of tuning groups (``tune: {..., halving: true}``, launch/halving.py): each
group's runs compared at their first budget, the worse half ``pruned`` there, deterministically,
whichever launcher runs them and however often they are requeued."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from tests.helpers import dw_in_process, run_dw

DOC = {
    "groups": {"model": "vwt", "data": "pydoc"},
    "fixed": {
        "model.heads": 4,
        "model.width": 32,
        "model.quantum": 8,
        "model.shape": "uniform",
        "train.seq_len": 32,
        "train.batch_size": 4,
        "train.steps": 10,
        "train.budgets": [512],  # step 4: the WSD decay branch the group is compared at
        "optim.schedule": "wsd",
        "train.log_every": 1,
        "train.threads": 1,
        "train.eval_batches": 1,
        "probe.every": 0,
        "probe.at": [],
    },
    "axes": {"model.depth": [1, 2]},
    "tune": {"optim.lr": [1e-4, 1e-3, 3e-3, 1e-2], "halving": True},
}


@pytest.fixture
def sweeps(tmp_path, monkeypatch):
    d = tmp_path / "sweeps"
    d.mkdir()
    (d / "hv.yaml").write_text(yaml.safe_dump(DOC))
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    return d


def _status(capsys, name="hv"):
    code, out, err = dw_in_process(capsys, "status", name, "--json")
    assert code == 0, err
    return json.loads(out)


def _rung_losses(runs_dir, name="hv"):
    """run id -> (group, its held-out loss at its first budget), from the runs' own summaries."""
    out = {}
    for p in (runs_dir / name).glob("*/summary.json"):
        s = json.loads(p.read_text())
        out[s["run_id"]] = s["budgets"][0]["val_loss"]
    return out


def _decisions(runs_dir, name="hv"):
    return {p.stem: json.loads(p.read_text())["decision"] for p in sorted((runs_dir / name / "halving").glob("*.json"))}


def test_the_decision_ranks_by_loss_prunes_the_worse_half_and_counts_a_diverged_run_worst():
    from depthwidth.launch.halving import decide

    reps = {"a": {"val_loss": 3.0}, "b": {"val_loss": 2.0}, "c": {"val_loss": None}, "d": {"val_loss": 2.5}}
    assert decide(["a", "b", "c", "d"], reps) == {
        "ranked": ["b", "d", "a", "c"],
        "keep": ["b", "d"],
        "prune": ["a", "c"],
    }
    five = {k: {"val_loss": v} for k, v in zip("vwxyz", [1.0, 1.0, 3.0, math.nan, 2.0])}
    assert decide(list("zyxwv"), five) == {  # ties by run id; of 5 the 2 worst go
        "ranked": ["v", "w", "z", "x", "y"],
        "keep": ["v", "w", "z"],
        "prune": ["x", "y"],
    }


@pytest.mark.parametrize(
    "tune,fixed,word",
    [
        ({"optim.lr": [1e-3, 1e-2], "halving": "yes"}, {}, "tune.halving"),
        ({"halving": True}, {}, "besides halving"),
        ({"optim.lr": [1e-3, 1e-2], "halving": True}, {"train.budgets": []}, "train.budgets"),
    ],
)
def test_bad_halving_is_one_line_and_exit_2(sweeps, capsys, tune, fixed, word):
    (sweeps / "bad.yaml").write_text(yaml.safe_dump({**DOC, "fixed": {**DOC["fixed"], **fixed}, "tune": tune}))
    code, out, err = dw_in_process(capsys, "sweep", "bad", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and word in err, err


def test_pack_is_refused_with_halving(sweeps, capsys):
    code, out, err = dw_in_process(capsys, "sweep", "hv", "pack=2", "--dry-run")
    assert code == 2 and "pack" in err and "halving" in err, err


def test_after_the_first_budget_exactly_the_worse_half_of_each_group_is_pruned(sweeps, capsys, tmp_path):
    """Trained for real (debug launcher: one run after another, so every run but each group's last
    parks and is released): per group of 4, the 2 with the highest loss at the first budget are
    ``pruned`` there and the others done; --retry-failed resubmits nothing; dw status and dw report
    say what halving saved."""
    code, out, err = dw_in_process(capsys, "sweep", "hv", "--json")
    assert code == 0 and len(json.loads(out)["submitted"]) == 8, err
    st = _status(capsys)
    assert st["counts"]["done"] == 4 and st["counts"]["pruned"] == 4, st["counts"]
    runs_dir = tmp_path / "runs"
    rung = _rung_losses(runs_dir)
    by_group: dict = {}
    for r in st["runs"]:
        by_group.setdefault(r["group"], []).append(r)
    assert len(by_group) == 2
    for rows in by_group.values():
        ranked = sorted(rows, key=lambda r: (rung[r["run_id"]], r["run_id"]))
        assert [r["state"] for r in ranked] == ["done", "done", "pruned", "pruned"]
        for r in ranked[2:]:  # stopped at the first budget: the fork of its decay branch, not later
            assert r["tokens"] < 512 and r["flops_saved"] > 0
    dec = _decisions(runs_dir)
    assert {g: set(d["prune"]) for g, d in dec.items()} == {
        g: {r["run_id"] for r in rows if r["state"] == "pruned"} for g, rows in by_group.items()
    }
    h = st["halving"]
    saved = sum(r["flops_saved"] for r in st["runs"] if r["state"] == "pruned")
    assert h["decided"] == h["groups"] == 2 and h["pruned"] == 4 and h["flops_saved"] == pytest.approx(saved)
    assert 0.2 < h["saved_fraction"] < 0.5  # 4 of 8 runs stopped at 3 of 10 steps (and no second decay branch)
    code, out, err = dw_in_process(capsys, "status", "hv")
    assert "halving: 2 of 2 groups decided, 4 runs pruned" in out, out
    code, out, err = dw_in_process(capsys, "sweep", "hv", "--retry-failed", "--json")
    assert code == 0 and json.loads(out)["submitted"] == [], out
    code, out, err = dw_in_process(capsys, "report", "hv", "--format", "json")
    assert code == 0, err
    tab = json.loads(out)["tables"]["halving"]
    assert len(tab["rows"]) == 2 and all(r["state"] == "decided" for r in tab["rows"])
    assert any("4 runs pruned" in n for n in tab["notes"])


def test_a_requeue_in_the_middle_of_halving_resumes_with_the_same_decisions(sweeps, capsys, tmp_path, monkeypatch):
    """Half of every group trained first (--only): they park and wait, and neither --retry-failed nor a
    second look decides for them.  The rest then completes the groups, whose deciders release the
    parked runs; the first submission's loop has ended, so they show ``preempted`` (checkpointed, no
    job) and --retry-failed resumes them: every decision is the one an uninterrupted sweep makes."""
    # the uninterrupted sweep, in a store of its own
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "whole"))
    code, out, err = dw_in_process(capsys, "sweep", "hv", "--json")
    assert code == 0, err
    want = _decisions(tmp_path / "whole")
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    for lr in ("0.0001", "0.01"):  # half of each group
        code, out, err = dw_in_process(capsys, "sweep", "hv", "--only", f"optim.lr={lr}", "--json")
        assert code == 0 and len(json.loads(out)["submitted"]) == 2, err
    first = {r["run_id"] for r in _status(capsys)["runs"]}
    st = _status(capsys)
    assert st["counts"]["waiting"] == 4 and st["halving"]["decided"] == 0, st["counts"]
    code, out, err = dw_in_process(capsys, "sweep", "hv", "--retry-failed", "--only", "optim.lr=0.01", "--json")
    assert code == 0 and json.loads(out)["submitted"] == [], out  # waiting is not failed
    for lr in ("0.001", "0.003"):  # the other half: the groups decide
        code, out, err = dw_in_process(capsys, "sweep", "hv", "--only", f"optim.lr={lr}", "--json")
        assert code == 0 and len(json.loads(out)["submitted"]) == 2, err
    st = _status(capsys)
    released = [r for r in st["runs"] if r["run_id"] in first]
    assert {r["state"] for r in released} <= {"preempted", "pruned", "done"} and st["counts"]["waiting"] == 0
    code, out, err = dw_in_process(capsys, "sweep", "hv", "--retry-failed", "--json")
    assert code == 0, err
    st = _status(capsys)
    assert st["counts"]["done"] == 4 and st["counts"]["pruned"] == 4, st["counts"]
    got = _decisions(tmp_path / "runs")
    assert {g: (d["ranked"], d["prune"]) for g, d in got.items()} == {
        g: (d["ranked"], d["prune"]) for g, d in want.items()
    }
    pruned = {r["run_id"] for r in st["runs"] if r["state"] == "pruned"}
    assert pruned == {rid for d in want.values() for rid in d["prune"]}


@pytest.mark.slurm
def test_on_slurm_parked_tasks_are_held_and_released_by_their_group(slurm_cluster, tmp_path):
    """The real cluster, one group of 4 with at most 2 tasks at once: the first two park (their tasks
    requeued held, freeing the slots), the last two decide and release them; every run ends done or
    pruned with the decisions of the same sweep run by the debug launcher."""
    d = tmp_path / "sweeps"
    d.mkdir()
    doc = {**DOC, "axes": {"model.depth": [1]}}
    (d / "hv.yaml").write_text(yaml.safe_dump(doc))
    env = {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")}
    p = run_dw("sweep", "hv", "launcher=slurm", "launcher.array_parallelism=2", "--json", env=env)
    assert p.returncode == 0, p.stderr
    p = run_dw("status", "hv", "--watch", "--timeout", "240", "--interval", "1", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    st = json.loads(run_dw("status", "hv", "--json", env=env).stdout)
    assert st["counts"]["done"] == 2 and st["counts"]["pruned"] == 2, st["counts"]
    got = _decisions(tmp_path / "runs")
    env_debug = {**env, "DW_RUNS": str(tmp_path / "debug")}
    assert run_dw("sweep", "hv", "--json", env=env_debug).returncode == 0
    assert {g: dd["ranked"] for g, dd in got.items()} == {
        g: dd["ranked"] for g, dd in _decisions(tmp_path / "debug").items()
    }
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / "hv" / "jobs").glob("*/submitit/*_log.out"))
    assert logs.count("waiting at step") >= 2, logs[-3000:]


def test_a_wave_never_splits_a_halving_group():
    """Under a queue limit (launch/limits.py waves) a parked member is held in the queue until its
    siblings report: a sibling in a later wave would wait for ever, so waves end where groups do."""
    from depthwidth.launch.limits import cut, halving_groups, largest_group

    tasks = [[{"halving": {"group": g}}] if g else [{}] for g in ["a", "a", "a", "b", "b", None, "c", "c"]]
    groups = halving_groups(tasks)
    assert groups == ["a", "a", "a", "b", "b", None, "c", "c"] and largest_group(groups) == 3
    assert [cut(groups, w) for w in range(9)] == [0, 0, 0, 3, 3, 5, 6, 6, 8]
    assert (
        cut(halving_groups([[{"halving": {"group": "a"}}, {"halving": {"group": "a"}}]] * 2), 1) == 1
    )  # packed: no group


def test_members_that_will_never_report_are_read_from_their_summaries(tmp_path, monkeypatch):
    """A member done before halving was turned on reports its first budget from its summary; one that
    failed for good (the retry policy gave up: ``failures`` in its summary) counts as the worst; the
    last member's report then decides, and a parked member is released."""
    from depthwidth.core import store
    from depthwidth.launch.halving import Gate, group_file

    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    sweep = store.sweep_dir("s")
    for rid, summ in {
        "a": {"status": "done", "budgets": [{"tokens": 512, "step": 4, "val_loss": 3.0}]},
        "b": {"status": "failed", "failures": 2, "reason": "deterministic failure: X"},
    }.items():
        (sweep / rid).mkdir(parents=True)
        (sweep / rid / "summary.json").write_text(json.dumps({"run_id": rid, **summ}))
    spec = {"group": "g", "members": ["a", "b", "c", "d"]}
    d = tmp_path / "jobs"
    d.mkdir()
    (d / "task-0.json").write_text(json.dumps({"state": "running"}))
    (d / "task-0.claim").write_text("1")
    where = {"launcher": "debug", "job_id": "j_0", "tasks_file": str(d / "tasks.json"), "index": 0}
    assert Gate("s", spec, "c", where)({"tokens": 512, "step": 4, "val_loss": 2.5}) == "park"
    assert Gate("s", spec, "c", where).park()
    assert json.loads((d / "task-0.json").read_text())["state"] == "parked"
    assert Gate("s", spec, "d", {"launcher": "debug", "job_id": "j_1"})({"tokens": 512, "val_loss": 2.0}) == "go"
    doc = store.read_json(group_file("s", "g"))
    assert doc["decision"]["ranked"] == ["d", "c", "a", "b"] and doc["decision"]["prune"] == ["a", "b"]
    assert doc["reports"]["a"]["read"] == "summary" and doc["reports"]["b"]["diverged"]
    assert json.loads((d / "task-0.json").read_text())["state"] == "queued" and not (d / "task-0.claim").exists()
    assert doc["parked"] == {}


def test_the_other_ranks_do_as_rank_0_says_of_an_attempt(tmp_path, monkeypatch):
    from depthwidth.launch import retry

    monkeypatch.setenv("SLURM_RESTART_COUNT", "3")
    key = retry.attempt_key("12_4")
    assert key == "12_4#3"
    retry.note_attempt(tmp_path, "12_4#2", True)
    retry.note_attempt(tmp_path, key, False)
    assert retry.wait_attempt(tmp_path, key) is False and retry.wait_attempt(tmp_path, "12_4#2") is True
