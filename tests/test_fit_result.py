"""The fit's result is typed (#35): fit.json read and written through fit/result.py, its verdicts
decided once by dw fit and only read by the report."""

from __future__ import annotations

import json

import pytest

from depthwidth.fit.result import FitDocument, Verdicts, with_verdicts
from tests.helpers import dw_in_process


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    from depthwidth.fit.pipeline import run_fit
    from depthwidth.simulate import simulate

    root = tmp_path_factory.mktemp("runs")
    simulate("demo", name="demo-sim", root=str(root), seed=1)
    doc = run_fit("demo-sim", root=str(root), law="depth-delusion", bootstrap=20, write=True)
    return root, doc


def test_fit_json_round_trips_through_the_typed_result(fitted):
    root, doc = fitted
    on_disk = json.loads((root / "demo-sim" / "fit.json").read_text())
    res = FitDocument.from_json(on_disk)
    assert res.law == "depth-delusion" and res.n_runs == 12 and res.where == ["shape=uniform"]
    assert isinstance(res.verdicts, Verdicts) and "planted" in res.sections and "compare" not in res.sections
    assert res.to_json() == on_disk  # every key back, none added


def test_dw_fit_stores_the_verdicts_its_rules_decide(fitted):
    _, doc = fitted
    stored = doc["verdicts"]
    bare = {k: v for k, v in doc.items() if k != "verdicts"}
    assert stored == Verdicts.decide(bare).to_json()
    assert stored["notes"][0] == doc["identification"]["line"]  # the D_crit ladder's line first
    assert stored["label"] == "depth-delusion[log]" and stored["planted"].startswith("planted world (")
    # a fit.json written before verdicts were stored: decided when read, by the same rules
    old = FitDocument.from_json(bare)
    assert old.verdicts.to_json() == stored
    read = FitDocument.from_json  # what the report reads (report/load.py)
    assert read(bare).verdicts.notes == stored["notes"] and read(doc).verdicts.notes == stored["notes"]


def test_the_report_prints_the_stored_verdicts_and_decides_none(fitted, tmp_path, capsys, monkeypatch):
    root, doc = fitted
    monkeypatch.setenv("DW_RUNS", str(root))
    edited = with_verdicts(doc)
    edited["verdicts"]["notes"] = ["D_crit located: as stored in fit.json", *edited["verdicts"]["notes"][1:]]
    edited["verdicts"]["planted"] = "planted world: as stored in fit.json"
    edited["verdicts"]["figure"]["label"] = "the law as stored in fit.json"
    (root / "demo-sim" / "fit.json").write_text(json.dumps(edited))
    code, out, err = dw_in_process(capsys, "report", "demo-sim", "--plots", str(tmp_path / "plots"))
    assert code == 0, err
    text = (tmp_path / "plots" / "report.md").read_text()
    assert "D_crit located: as stored in fit.json" in text and "planted world: as stored in fit.json" in text
    assert "the law as stored in fit.json" in text  # the loss-vs-depth figure's caption: the stored figure record


def test_what_the_figure_draws_is_decided_at_fit_time_and_read_back(fitted):
    """fit.json's ``verdicts.figure`` and ``truth_line`` (#35): decided by dw fit (fit/verdicts.py's
    ``drawn`` and ``truth_line``), as JSON; a fit.json of the older rules (version 2, without them)
    has them decided when read, the same."""
    from depthwidth.fit.result import VERDICTS_VERSION
    from depthwidth.fit.verdicts import drawn, truth_line

    _, doc = fitted
    stored = doc["verdicts"]
    bare = {k: v for k, v in doc.items() if k != "verdicts"}
    assert stored["figure"] == json.loads(json.dumps(drawn(bare))) and stored["truth_line"] == truth_line(bare)
    assert stored["figure"]["style"] in ("solid", "dashed") and stored["version"] == VERDICTS_VERSION == 4
    older = {**doc, "verdicts": {k: v for k, v in stored.items() if k not in ("figure", "truth_line")} | {"version": 2}}
    read = FitDocument.from_json(older).verdicts  # what the report reads (report/load.py)
    assert read.figure == stored["figure"] and read.truth_line == stored["truth_line"]
    assert FitDocument.from_json(older).verdicts.to_json() == stored


def test_the_readme_says_the_stored_lines(fitted, tmp_path, monkeypatch):
    from depthwidth.report.load import load
    from depthwidth.report.readme import section
    from depthwidth.report.tables import build

    root, doc = fitted
    monkeypatch.setenv("DW_RUNS", str(root))
    edited = with_verdicts(doc)
    edited["verdicts"]["truth_line"] = "as stored: the claim not identified"
    edited["verdicts"]["figure"]["label"] = "the law as stored"
    text = section(build(load("demo-sim", root=str(root))), "fig.png", None, fit=FitDocument.from_json(edited))
    assert "**As stored: the claim not identified.**" in text
    assert "![Loss vs depth per width, with the law as stored](fig.png)" in text


def test_dw_fit_returns_the_typed_result_and_the_report_loads_one(fitted, tmp_path):
    """``fit_document`` is what ``dw fit`` prints (``run_fit``: the same as a dict, ``written`` last);
    fit.json is its ``to_json``, and ``dw report`` reads it back into a FitDocument, every field equal."""
    from depthwidth.fit.pipeline import fit_document
    from depthwidth.report.load import load

    root, doc = fitted
    assert list(doc)[-1] == "written" and doc["written"] == str(root / "demo-sim" / "fit.json")
    out = tmp_path / "fit.json"
    typed = fit_document("demo-sim", root=str(root), law="depth-delusion", bootstrap=20, out=out)
    assert isinstance(typed, FitDocument) and typed.written == str(out)
    assert json.loads(out.read_text()) == typed.to_json() and "written" not in typed.to_json()
    assert typed.as_dict() == {**typed.to_json(), "written": str(out)}
    differ = {"seconds", "provenance", "written"}  # a second fit: its time, wall clock and file differ
    assert {k: v for k, v in typed.as_dict().items() if k not in differ} == {
        k: v for k, v in doc.items() if k not in differ
    }
    data = load("demo-sim", root=str(root), fit_path=out)
    assert isinstance(data.fit, FitDocument) and data.fit == typed  # every field (written: not compared)
    assert data.fit.verdicts.notes == doc["verdicts"]["notes"]  # read as stored


def test_a_fit_json_with_gradient_persistence_in_derived_is_read_as_its_section(fitted):
    """fit.json written before gradient persistence was an analysis of its own kept it in ``derived``:
    FitDocument.from_json (the one place) reads it as the section, and every table and the tau(W)
    figure's points come out the same."""
    from depthwidth.fit.analyses.gradient_persistence import tau_points
    from depthwidth.report.fit_view import fit_tables

    root, doc = fitted
    new = {k: v for k, v in doc.items() if k != "written"}
    gp = new["gradient_persistence"]
    assert gp["tau_law"] and gp["dcrit_by_width"] and "gradient_persistence" not in new["derived"]
    old = {k: v for k, v in new.items() if k != "gradient_persistence"}
    old["derived"] = {**new["derived"], "gradient_persistence": gp}  # where dw fit wrote it before
    for stored in (old, {k: v for k, v in old.items() if k != "verdicts"}):  # with its verdicts, and without
        typed, was = FitDocument.from_json(new), FitDocument.from_json(stored)
        assert was.sections["gradient_persistence"] == gp and was.derived == typed.derived
        assert was.to_json() == typed.to_json()  # written back in the new form
        widths = [int(w) for w in gp["dcrit_by_width"]]
        a, b = fit_tables(typed, widths), fit_tables(was, widths)
        assert list(a) == list(b)
        for k in a:
            assert (a[k].title, a[k].rows, a[k].notes) == (b[k].title, b[k].rows, b[k].notes), k
        assert any(r["quantity"] == "τ(W) ∝ W^p: p" for r in b["fit"].rows)
        assert all(r["censored"] is not None for r in b["dcrit_widths"].rows)  # the 1/e column: from the section
        assert tau_points(was) == tau_points(typed)


def test_a_version_3_fit_json_has_its_optima_bound_by_its_claim_when_read():
    """Version 3 stored W_opt as identified beside a claim that was not (the demo's W_opt = 141,619 from
    widths 32-96): read now, its verdicts are decided again and the optima follow the claim."""
    doc = {
        "law": "depth-delusion",
        "params": {},
        "derived": {"compute_optimal": {"D_opt": 3.2, "W_opt": 141618.9, "c_ref": 1e21, "ci": {}}},
        "identification": {
            "runs": 12,
            "points": 36,
            "ranges": {},
            "optimum": {"D_opt": {"value": 3.2, "identified": True}, "W_opt": {"value": 141618.9, "identified": True}},
            "dcrit_range": {},
            "claim": {"parameter": "D_crit", "identified": False, "because": "x"},
        },
    }
    stored = with_verdicts(doc)["verdicts"]
    assert {k: v["identified"] for k, v in stored["optimum"].items()} == {"D_opt": False, "W_opt": False}
    old = {**doc, "verdicts": {**stored, "optimum": doc["identification"]["optimum"], "version": 3}}
    read = FitDocument.from_json(old).verdicts
    why = "derived from D_crit, which the fit does not identify"
    assert read.optimum == {k: {"value": None, "identified": False, "because": why} for k in ("D_opt", "W_opt")}
