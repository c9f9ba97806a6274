"""The optional analyses of a fit: one module each (fit/analyses/), listed in one registry; dw fit
runs them, and dw fit and the report show each module's own tables without deciding anything again."""

import sys
import types

from depthwidth.core.tables import Col, Table
from depthwidth.fit import analyses
from depthwidth.fit.defaults import FIT
from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.result import FitDocument
from tests.planted import PLANTED, planted_table


def test_every_registered_analysis_declares_its_section_options_and_tables():
    sections = set()
    for e, m in zip(analyses.REGISTRY, analyses.modules()):
        assert m.SECTION == e.section and m.SECTION not in sections
        assert e.option is None or e.option in FIT
        sections.add(m.SECTION)
        assert set(m.OPTIONS) <= set(FIT), (m.__name__, m.OPTIONS)  # its flags: fit/defaults.py
        assert callable(m.section) and (e.option is not None or callable(m.wanted))  # no option: wanted decides
        assert callable(m.tables)  # its tables: the module's own
    assert sections == {
        "compare",
        "holdout",
        "isoflop",
        "sensitivity",
        "downstream",
        "planted",
        "gradient_persistence",
        "match",
    }


def test_a_new_analysis_is_one_module_and_one_registry_line(monkeypatch, capsys):
    """A toy analysis registered by name, its tables its own:
    its section lands in fit.json, the line it decides in fit.json's verdicts, and its table in what
    dw fit prints and dw report shows, with no other change."""
    toy = types.ModuleType("tests._toy_analysis")
    toy.SECTION, toy.OPTIONS = "_toy_analysis", ("seed",)
    toy.wanted = lambda ctx: True
    toy.section = lambda ctx: {"runs": int(ctx.clean["run"].nunique())}
    toy.verdicts = lambda fit: {"lines": ["the toy says hello"]}
    toy.tables = lambda fit: {
        "fit_toy": Table(
            "fit_toy",
            "Toy",
            [Col("runs", "runs")],
            [fit.sections["_toy_analysis"]],
            analyses.said(fit, "_toy_analysis")["lines"],
        )
    }
    monkeypatch.setitem(sys.modules, "tests._toy_analysis", toy)
    monkeypatch.setattr(analyses, "REGISTRY", (*analyses.REGISTRY, analyses.Entry("tests._toy_analysis")))
    df = planted_table(get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.005)
    doc = run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=50, write=False)
    assert doc["_toy_analysis"] == {"runs": df["run"].nunique()}
    assert doc["verdicts"]["analyses"] == {"_toy_analysis": {"lines": ["the toy says hello"]}}  # decided by dw fit
    typed = FitDocument.from_json(doc)  # what dw fit prints and dw report reads
    assert analyses.tables(typed)["fit_toy"].rows == [doc["_toy_analysis"]]
    from depthwidth.report.fit_view import fit_tables

    assert fit_tables(typed)["fit_toy"].notes == ["the toy says hello"]  # dw fit and dw report show it
    from depthwidth.cli.fit import render

    render(typed)
    assert "the toy says hello" in capsys.readouterr().out
    assert "compare" not in doc and "holdout" not in doc  # the others ran only where asked for


def test_match_is_an_analysis_of_the_registry_whose_document_is_its_own(tmp_path, capsys):
    """--match is one module of the registry (fit/analyses/match.py) whose document is its own
    (match.json beside fit.json, instead of a law fit): run_fit(match=True) returns it, its body the
    statistics' (fit/match.py flops_to_match) of the runs --where kept; no law fit runs it and
    fit_document refuses it; dw fit --match prints the module's tables, its verdict line under them."""
    import json

    import pytest

    from depthwidth.core.errors import BadInput
    from depthwidth.fit.analyses import match
    from depthwidth.fit.files import jsonable
    from depthwidth.fit.match import flops_to_match
    from depthwidth.fit.options import FitOptions
    from depthwidth.fit.pipeline import fit_document
    from tests.helpers import dw_in_process
    from tests.planted import match_table

    assert analyses.own(FitOptions()) is None and analyses.own(FitOptions(match=True)) is match
    df = match_table(seed=3)
    doc = run_fit(runs=df, match=True, bootstrap=30, seed=2, where=["seed=0"], write=False)
    assert doc["schema"] == match.SCHEMA == "dw.match/1" and doc["where"] == ["seed=0"]
    body = jsonable(flops_to_match(df[df["seed"] == 0], bootstrap=30, seed=2).to_dict())
    assert json.dumps({k: doc[k] for k in body}) == json.dumps(body)  # key for key, in order
    assert {"law", "params", "verdicts"}.isdisjoint(doc)  # not a law fit
    with pytest.raises(BadInput, match="--match writes match.json, not a fit document"):
        fit_document(runs=df, match=True, write=False)

    T = match.tables(doc)
    assert list(T) == ["flops_curves", "flops_match"] and len(T["flops_match"].rows) == len(doc["rows"])
    (line,) = match.verdicts(doc)["lines"]
    assert line.startswith("×unif < 1: the shape needs less than the uniform model")
    assert f"dw fit --match; {line}" in T["flops_match"].notes
    df.to_csv(tmp_path / "t.csv", index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(tmp_path / "t.csv"), "--match", "--bootstrap", "0")
    assert code == 0, err
    assert "FLOPs to match uniform" in out and "×unif < 1: the shape needs less than the uniform model" in out
