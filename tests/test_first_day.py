"""A researcher's first day (report, fit and store side): traps that misled a new user.

The hand-written store of tests/report_store.py, plus what a one-off invocation leaves behind:
a run of another configuration in a grid cell, and runs planned but never started."""

from __future__ import annotations

import json

import pytest

from depthwidth.core.atomic import append_jsonl, write_json
from tests import report_store as rs
from tests.helpers import assert_bad_input, dw, run_dw


def _one_off(root, name="t"):
    """``dw sweep t train.steps=1000 --only 'model.width=64'`` after the sweep: a 1000-step 2x64
    run beside the 300-step one (same seed), and a never-started 6x64 run of that invocation."""
    d = root / name
    s = rs.summary("u2x64-long", 2, 64, 1)
    s["final_val_loss"] = s["budgets"][-1]["val_loss"] = 1.5  # much lower: trained 3x longer
    write_json(d / "u2x64-long" / "summary.json", s)
    ovr = ["model.depth=2", "model.width=64", "model.shape=uniform", "run.seed=1", "train.steps=1000"]
    append_jsonl(
        d / "manifest",
        [
            {
                "event": "submit",
                "run_id": "u2x64-long",
                "overrides": ovr,
                "run_dir": str(d / "u2x64-long"),
                "launcher": "local",
                "job_id": "local-y_0",
                "label": "grid",
                "ref": None,
                "tokens_total": 10000,
                "index": 0,
            },
            {"event": "start", "run_id": "u2x64-long", "job_id": "local-y_0", "restart": 0},
            {
                "event": "submit",
                "run_id": "never",
                "overrides": [*ovr[:1], "model.width=64", "model.depth=6", "train.steps=1000"],
                "run_dir": str(d / "never"),
                "launcher": "local",
                "job_id": "local-y_1",
                "label": "grid",
                "ref": None,
                "tokens_total": 10000,
                "index": 1,
            },
        ],
    )
    write_json(d / "jobs" / "y" / "task-0.json", {"job_id": "local-y_0", "state": "completed"})


@pytest.fixture
def store(tmp_path):
    rs.build(tmp_path, "t")
    _one_off(tmp_path)
    return tmp_path


def _report(root, name="t"):
    from depthwidth import report

    return report.build(name, root=str(root))


def test_a_one_off_run_is_never_averaged_into_the_sweeps_cell(store):
    rep = _report(store)
    grid = {(r["depth"], r["width"]): r for r in rep["tables"]["loss_grid"].rows}
    cell = grid[(2, 64)]
    assert cell["seeds"] == 1 and cell["sd"] is None and cell["loss"] == rs.loss_of(2, 64, 1)  # before: averaged
    assert grid[(6, 64)]["state"] == "done"  # the never-started one-off does not stand in for the done run
    apart = rep["tables"]["apart"].rows
    assert [(r["run"], r["state"], r["differs"]) for r in apart] == [
        ("u2x64-long", "done", "train.steps=1000"),
        ("never", "lost", "train.steps=1000"),
    ]
    assert "dw forget t RUN_ID" in rep["tables"]["apart"].notes[0]


def test_dw_forget_leaves_runs_out_and_keeps_the_record(store):
    env = {"DW_RUNS": str(store)}
    st = json.loads(dw("status", "t", "--json", env=env).stdout)
    assert {r["run_id"]: r["state"] for r in st["runs"]}["never"] == "lost"
    p = dw("forget", "t", "--state", "lost", "u2x64-long", "--reason", "one-off", env=env)
    assert p.returncode == 0, p.stderr
    assert "forgot 2 runs of t" in p.stdout
    st = json.loads(dw("status", "t", "--json", env=env).stdout)
    ids = {r["run_id"] for r in st["runs"]}
    assert "never" not in ids and "u2x64-long" not in ids and st["counts"]["lost"] == 0
    assert (store / "t" / "u2x64-long" / "summary.json").exists()  # nothing deleted
    events = [json.loads(x) for x in (store / "t" / "manifest").read_text().splitlines()]
    assert [e["run_id"] for e in events if e["event"] == "forget"] == ["u2x64-long", "never"]
    assert "apart" not in _report(store)["tables"]  # the report no longer sees it either
    from depthwidth.track.run_source import run_table

    assert "u2x64-long" not in set(run_table(store / "t")["run"])  # nor dw fit


def test_forget_refuses_what_may_still_run_and_unknown_ids(tmp_path):
    rs.build(tmp_path, "t", pending=True)
    env = {"DW_RUNS": str(tmp_path)}
    line = assert_bad_input(dw("forget", "t", "p2x96", env=env))
    assert "'p2x96'" in line and "pending" in line
    assert "a run of sweep t" in assert_bad_input(dw("forget", "t", "nosuch", env=env))
    assert "--state" in assert_bad_input(dw("forget", "t", "--state", "running", env=env))
    assert "nothing" in assert_bad_input(dw("forget", "t", env=env))
    assert not any('"forget"' in x for x in (tmp_path / "t" / "manifest").read_text().splitlines())


def test_the_papers_sections_come_last_on_a_sweep_of_ones_own(tmp_path):
    """A sweep with no published reference: GPT-3/PaLM D_crit rows, the published-loss table and the
    VWT claims fold under one heading after the sweep's own tables."""
    from depthwidth.report.render import PAPER_HEADING, render_markdown

    rs.build(tmp_path, "mine")
    ev = [json.loads(x) for x in (tmp_path / "mine" / "manifest").read_text().splitlines()]
    for e in ev:
        e["ref"] = None
    (tmp_path / "mine" / "manifest").write_text("".join(json.dumps(e) + "\n" for e in ev))
    rep = _report(tmp_path, "mine")
    assert rep["papers_grid"] is False
    md = render_markdown(rep)
    head = md.index(f"## {PAPER_HEADING}")
    assert md.index("Published numbers beside ours") > head and md.index("D_crit extrapolated") > head
    assert md.index("## Held-out loss (nats/token), depth × width") < head  # the sweep's own numbers first
    rs.build(tmp_path, "t")  # a published reference: the papers' grid, nothing folded
    assert _report(tmp_path, "t")["papers_grid"] is True and PAPER_HEADING not in render_markdown(
        _report(tmp_path, "t")
    )


def test_dw_fit_does_not_silently_replace_the_fit_the_report_shows(tmp_path):
    from depthwidth.simulate import simulate

    simulate("demo", name="mine", root=tmp_path, seed=0)
    env = {"DW_RUNS": str(tmp_path)}
    p = dw(
        "fit",
        "mine",
        "--law",
        "depth-delusion",
        "--where",
        "shape=uniform",
        "--bootstrap",
        "0",
        "--max-starts",
        "200",
        env=env,
    )
    assert p.returncode == 0, p.stderr
    before = (tmp_path / "mine" / "fit.json").read_text()
    _production_models_dw_fit_cannot_reach_are_one_line(json.loads(before))
    # dw fit NAME with no --law: chinchilla on every run would replace it (before: silently)
    line = assert_bad_input(dw("fit", "mine", "--bootstrap", "0", env=env))
    assert "holds a depth-delusion[log] fit of shape=uniform" in line and "--force" in line
    assert (tmp_path / "mine" / "fit.json").read_text() == before
    # the same law and filter again replaces it; --force replaces it with another
    assert (
        dw(
            "fit",
            "mine",
            "--law",
            "depth-delusion",
            "--where",
            "shape=uniform",
            "--bootstrap",
            "0",
            "--max-starts",
            "200",
            env=env,
        ).returncode
        == 0
    )
    p = dw("fit", "mine", "--bootstrap", "0", "--max-starts", "200", "--force", env=env)
    # chinchilla has no shape term: by default it is fitted on the uniform runs, and says so (#34)
    assert p.returncode == 0 and "runs of other width shapes" in p.stdout, p.stdout
    doc = json.loads((tmp_path / "mine" / "fit.json").read_text())
    assert doc["law"] == "chinchilla" and doc["where"] == ["shape=uniform"]
    from depthwidth import report

    note = report.build("mine", root=str(tmp_path))["tables"]["fit"].notes[0]
    assert note.startswith("the fit shown: chinchilla of shape=uniform, N = total, made ")


def test_shapes_off_their_parameter_match_are_named_in_a_warning(tmp_path):
    rs.build(tmp_path, "t")  # the store's shapes are not matched: 16·Σw² differs from the uniform 4×64
    t = _report(tmp_path)["tables"]["shapes"]
    ratios = {r["shape"]: r["params_ratio"] for r in t.rows if r["shape"] != "uniform"}
    off = [s for s, x in ratios.items() if abs(x - 1) > 0.01]
    assert off and t.notes[0].startswith("warning: not matched in parameters: ")
    for s in off:
        assert f"{s} {ratios[s]:.3f}×" in t.notes[0]


def test_from_another_folder_dw_finds_the_checkouts_store_instead_of_starting_a_second(tmp_path):
    """Sweep files and conf/ are found from any folder; the store is ./runs.  A sweep whose store
    lies in the checkout's runs/ is not silently started again elsewhere (it would retrain every run)."""
    import os
    import shutil
    import uuid

    from tests.helpers import REPO
    from tests.test_launch import tiny_env

    name = f"co-{uuid.uuid4().hex[:8]}"
    env = tiny_env(tmp_path)
    (tmp_path / "sweeps" / f"{name}.yaml").write_text((tmp_path / "sweeps" / "tiny.yaml").read_text())
    env.pop("DW_RUNS")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    there = REPO / "runs" / name  # the checkout's own store of this sweep (runs/ is git-ignored)
    there.mkdir(parents=True)
    try:
        append_jsonl(there / "manifest", {"event": "submit", "run_id": "r0", "job_id": "1", "ts": 0})
        clean = {k: v for k, v in os.environ.items() if k != "DW_RUNS"}
        full = {**clean, **env}
        from tests.helpers import dw as dw_in_process

        def dw(*a):
            return dw_in_process(*a, cwd=elsewhere, env=full, replace_env=True)

        line = assert_bad_input(dw("sweep", name))
        assert (
            f"sweep {name} has its store at {there}; submitting from here would start a second one in "
            f"{elsewhere / 'runs'}"
            in line
            and f"DW_RUNS={REPO / 'runs'}" in line
        )
        assert not (elsewhere / "runs").exists()  # nothing written
        dry = dw("sweep", name, "--dry-run")
        assert dry.returncode == 0 and f"has its store at {there}" in dry.stderr
        line = assert_bad_input(dw("status", name))
        assert f"no sweep {name!r} in {elsewhere / 'runs'}; its store is {there}: run dw from {REPO}" in line
    finally:
        shutil.rmtree(there)


def test_dw_fit_says_which_runs_have_not_ended(store, tmp_path):
    from depthwidth.core.errors import BadInput
    from depthwidth.fit.pipeline import run_fit

    write_json(store / "t" / "u2x64-long" / "summary.json", {**rs.summary("u2x64-long", 2, 64, 1), "status": "running"})
    res = run_fit("t", root=str(store), law="chinchilla", bootstrap=0, max_starts=5, write=False)
    assert (
        f"fitted on the runs that have ended; not yet in this fit: 1 started, 1 not started: "
        f"DW_RUNS={store} dw status t (refit when they end)"
    ) in res["warnings"]
    d = tmp_path / "early" / "e"  # nothing ended yet
    append_jsonl(
        d / "manifest",
        [
            {
                "event": "submit",
                "run_id": r,
                "run_dir": str(d / r),
                "overrides": [],
                "launcher": "local",
                "job_id": f"j_{i}",
            }
            for i, r in enumerate(("a", "b"))
        ],
    )
    append_jsonl(d / "manifest", [{"event": "start", "run_id": "a", "job_id": "j_0", "restart": 0}])
    with pytest.raises(BadInput, match=r"^sweep e has no finished run yet \(1 started, 1 not started: DW_RUNS="):
        run_fit("e", root=str(tmp_path / "early"), law="chinchilla", bootstrap=0, write=False)


def _production_models_dw_fit_cannot_reach_are_one_line(res):
    """dw fit's D_crit table on one's own small grid: the papers' production models it cannot reach
    are named in one caption line, not as rows of "not identified" (before: a row per model)."""
    import io

    from rich.console import Console

    from depthwidth.cli import fit as cli_fit
    from depthwidth.fit.result import FitDocument, with_verdicts

    for m in ("GPT-3", "PaLM-540B"):
        res["identification"]["dcrit_range"][f"dcrit[{m}]"] = {"identified": False}
    res = with_verdicts(res)  # decided again, as dw fit decides them (fit.json's verdicts: what readers print)
    buf = io.StringIO()
    real = cli_fit.console
    cli_fit.console = lambda *a, **k: Console(file=buf, width=200)
    try:
        cli_fit.render(FitDocument.from_json(res))
    finally:
        cli_fit.console = real
    out = " ".join(buf.getvalue().split())
    assert "not identified this far from the sweep's widths: GPT-3, PaLM-540B (fit.json keeps them)" in out
    assert "Llama-3-70B" in out and not [ln for ln in buf.getvalue().splitlines() if "GPT-3" in ln and "12288" in ln]


def test_the_report_says_when_runs_ended_after_the_fit_it_shows(tmp_path):
    import os
    import time

    from depthwidth.fit.pipeline import run_fit

    rs.build(tmp_path, "t")
    run_fit("t", root=str(tmp_path), law="chinchilla", bootstrap=0, max_starts=5)
    assert not _report(tmp_path)["tables"]["fit"].notes[0].startswith("warning: ")
    later = time.time() + 3600  # this run's summary.json written after the fit: it ended since
    os.utime(tmp_path / "t" / "u4x64s1" / "summary.json", (later, later))
    note = _report(tmp_path)["tables"]["fit"].notes[0]
    assert note.startswith("warning: 1 run ended after this fit was made (") and note.endswith("refit with dw fit t")


def test_too_few_points_yet_says_which_runs_are_still_to_come(tmp_path):
    from depthwidth.core.errors import BadInput
    from depthwidth.fit.pipeline import run_fit

    d = tmp_path / "e"
    append_jsonl(
        d / "manifest",
        [
            {
                "event": "submit",
                "run_id": r,
                "run_dir": str(d / r),
                "overrides": [],
                "launcher": "local",
                "job_id": f"j_{i}",
            }
            for i, r in enumerate(("a", "b"))
        ],
    )
    write_json(d / "a" / "summary.json", rs.summary("a", 2, 32, 1))  # one run ended: too few points
    with pytest.raises(BadInput, match=r"^bad value for points: \d+ \(allowed: .*\); not yet ended: 1 not started: "):
        run_fit("e", root=str(tmp_path), law="chinchilla", bootstrap=0, write=False)


def test_an_exponent_of_a_column_the_sweep_never_varies_is_not_identified():
    import pandas as pd

    from depthwidth.fit.verdicts import identification
    from depthwidth.fit.laws import get_law

    law = get_law("chinchilla")
    t = pd.DataFrame(
        {
            "run": list("abcde"),
            "params": [1e6, 2e6, 4e6, 8e6, 16e6],
            "tokens": [20480.0] * 5,
            "loss": [4.0, 3.8, 3.6, 3.5, 3.4],
        }
    )
    got = identification(t, law, {"alpha": 1.97, "beta": 0.455}, ci={"alpha": [1.0, 3.0], "beta": [0.2, 0.9]})
    assert got["line"] == (
        "alpha and beta identified: no, because every point has the same tokens (2.05e+04): "
        "beta cannot be told from the constant"
    )  # before: "yes ... intervals clear of 0"


def test_status_knows_a_pending_runs_shape_from_its_submission(tmp_path):
    """A pending uniform run's shape column: before, blank until its summary.json (the preset's
    default shape is in no override); now from the submission's manifest event."""
    from tests.helpers import gate_env, open_gate
    from tests.test_launch import status, tiny_env, wait_for

    env = tiny_env(tmp_path)  # two runs on one local worker: the second waits while the gate holds the first
    gate = tmp_path / "gate"
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=1", "--json", env={**env, **gate_env(gate, 2)})
    assert p.returncode == 0, p.stderr
    try:
        wait_for(lambda: any(gate.glob("at-2-*")), 120, "the first run at the gate")
        runs = {r["state"]: r for r in status(env)["runs"]}
        assert (
            runs["pending"]["shape"] == "uniform" and runs["pending"]["depth"] == 2 and runs["pending"]["width"] == 32
        )
    finally:
        open_gate(gate)
    wait_for(lambda: status(env)["counts"]["done"] == 2, 300, "both runs done")


def test_optima_derived_from_an_unidentified_claim_say_so():
    from depthwidth.fit.result import FitDocument
    from depthwidth.report.fit_view import optimal_tables

    fit = {
        "law": "",
        "params": {},
        "derived": {
            "compute_optimal": {
                "N_exponent": 0.008,
                "T_exponent": 0.992,
                "c_ref": 1e21,
                "ci": {},
                "constraint": "C = 6NT",
            }
        },
        "identification": {  # read whole when the document is (every verdict decided): what every fit has
            "runs": 8,
            "points": 8,
            "ranges": {},
            "optimum": {},
            "dcrit_range": {},
            "claim": {"parameter": "alpha and beta", "identified": False, "because": "x"},
        },
    }
    t = optimal_tables({}, FitDocument.from_json(fit))["fit_optimal"]  # its verdicts decided when read
    assert t.notes[0] == (
        "warning: derived from alpha and beta, which the fit does not identify (x): these optima "
        "are not identified either"
    )
    fit["identification"]["claim"]["identified"] = True
    assert not optimal_tables({}, FitDocument.from_json(fit))["fit_optimal"].notes
