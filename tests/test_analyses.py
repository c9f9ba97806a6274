"""The optional analyses of a fit: one module each (fit/analyses/), listed in one registry; dw fit
runs them, and dw fit and the report show each module's own tables without deciding anything again."""

import math
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
        assert callable(m.section) and (e.option is not None or e.when is not None)  # no option: the data decide
        assert e.when is None or hasattr(analyses.Context(), e.when)  # a Context field or property
        assert e.when is None or not hasattr(m, "wanted")  # decided in its registry line, not on import
        assert callable(m.tables)  # its tables: the module's own
    assert sections == {
        "tuning",
        "compare",
        "holdout",
        "isoflop",
        "sensitivity",
        "downstream",
        "planted",
        "gradient_persistence",
        "match",
        "lr_law",
    }


def test_an_analysis_figure_is_data_its_module_makes_and_the_report_draws():
    """``figures(fit, ...)``: {name: core/figures.py Figure, or why it is not drawn}; fit/ imports no
    plotting library (report/figs.py ``draw`` does), and an analysis without figures has none."""
    import subprocess
    from types import SimpleNamespace

    from depthwidth.core.figures import Figure

    code = (
        "import sys; from depthwidth.fit import analyses; "
        "[m.figures(None) for m in analyses.modules() if hasattr(m, 'figures')]; "
        "assert 'matplotlib' not in sys.modules, 'fit/ imported matplotlib'"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
    assert analyses.figures(None, "holdout") == {}  # no figure of its own
    assert analyses.figures(None, "isoflop") == {
        "isoflop_profiles": "no isoflop in fit.json (dw fit NAME --approach isoflop)"
    }
    probes = [  # per width a run whose gradient norms decay from the top layer with tau = W^0.5
        {"run": f"r{w}", "width": w, "shape": "uniform", "status": "done", "probes": [{"step": 1000, "grad_norm": g}]}
        for w in (64, 128, 256)
        for g in [{"block": [math.exp(-(7 - layer) / w**0.5) for layer in range(8)]}]
    ]
    fig = analyses.figures(None, "gradient_persistence", probes=probes)
    assert list(fig) == ["grad_profiles", "tau_vs_width"] and isinstance(fig["grad_profiles"], Figure)
    tau = fig["tau_vs_width"]
    assert isinstance(tau, Figure) and tau.file == "tau_vs_width.png"
    assert "W^0.50" in tau.panels[0].series[1].style["label"]  # the least-squares line without a fit's law
    b = {"C": 1e18, "points": [[4, 3.1], [8, 3.0], [16, 3.05]], "x_range": [4, 16], "fit_ln_loss": [0.1, 0, 1.1]}
    b |= {"fit_centre": 2.0, "identified": True, "x_opt": 8.0, "x_opt_ci": [None, 12.0], "loss_opt": 3.0}
    iso = {"axis": "depth", "level": 0.95, "budgets": [b], "power_laws": {}}
    (fig,) = analyses.figures(SimpleNamespace(sections={"isoflop": iso}), "isoflop").values()
    assert [s.kind for s in fig.panels[0].series] == ["plot", "plot", "errorbar", "plot"]  # the open side's arrow
    from depthwidth.report import figs

    drawn = figs.draw(figs._plt(), fig)
    assert len(drawn.axes) == 2 and drawn.axes[0].get_xscale() == "log"


def test_a_new_analysis_is_one_module_and_one_registry_line(monkeypatch, capsys):
    """A toy analysis registered by name, its tables its own:
    its section lands in fit.json, the line it decides in fit.json's verdicts, and its table in what
    dw fit prints and dw report shows, with no other change."""
    toy = types.ModuleType("tests._toy_analysis")
    toy.SECTION, toy.OPTIONS = "_toy_analysis", ("seed",)
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


def test_lr_laws_are_an_analysis_of_the_registry_whose_document_is_its_own(tmp_path, capsys):
    """--law lr is one module of the registry (fit/analyses/lr_law.py) whose document is its own
    (lr_fit.json beside fit.json, instead of a law fit): run_fit(law="lr") returns it, its body the
    statistics' (fit/tuning.py lr_fits) of the runs --where kept with the module's verdict lines before
    the points, the same document as before (tuning.lr_law, key for key); fit_document refuses it; dw fit
    --law lr prints the module's table with the stored lines and writes lr_fit.json beside a sweep's fit.json."""
    import json
    import math

    import numpy as np
    import pandas as pd
    import pytest

    from depthwidth.core.errors import BadInput
    from depthwidth.fit.analyses import lr_law
    from depthwidth.fit.files import jsonable
    from depthwidth.fit.options import FitOptions
    from depthwidth.fit.pipeline import fit_document
    from depthwidth.fit.tuning import lr_verdicts, lr_fits
    from depthwidth.fit.tuning import lr_law as stats_lr_law
    from tests.helpers import dw_in_process

    assert analyses.own(FitOptions(law="lr")) is lr_law and analyses.own(FitOptions(law="chinchilla")) is None
    rng = np.random.default_rng(1)
    rows = []
    for d in (2, 4, 8):
        for w in (128, 256, 512):
            opt = 3e-3 * (d / 4) ** -0.5
            for lr in [1e-4 * 10 ** (k / 2) for k in range(6)]:
                y = 3.0 * math.exp(0.04 * (math.log10(lr / opt)) ** 2 + rng.normal(0, 0.001))
                rows.append(
                    {"run": f"d{d}w{w}_{lr:g}", "group": f"d{d}w{w}", "optim.lr": lr, "params": 12 * d * w * w}
                    | {"depth": d, "width": w, "tokens": 1e9, "loss": y}
                )
    df = pd.DataFrame(rows)
    doc = run_fit(runs=df, law="lr", level=0.9, seed=3, where=["width=256"], write=False)
    assert doc["schema"] == lr_law.SCHEMA == "dw.fit/1" and doc["where"] == ["width=256"] and doc["used"] == 3
    kept = df[df["width"] == 256]
    body = jsonable(stats_lr_law(kept, 0.9, 3))
    assert json.dumps({k: doc[k] for k in body}) == json.dumps(body)  # key for key, in order: lr_fit.json unchanged
    assert list(body)[-2:] == ["verdicts", "points"] and "verdicts" not in lr_fits(kept, 0.9, 3)
    assert doc["verdicts"] == lr_law.verdicts(doc)["lines"] == lr_verdicts(doc)
    assert {"params", "sections", "derived"}.isdisjoint(doc)  # not a law fit
    with pytest.raises(BadInput, match="--law lr writes lr_fit.json, not a fit document: run_fit"):
        fit_document(runs=df, law="lr", write=False)

    full = run_fit(runs=df, law="lr", write=False)
    (t,) = lr_law.tables(full).values()
    assert t.key == "fit_lr" and len(t.rows) == 5 and t.notes[1:] == full["verdicts"]
    assert any(v.startswith("lr* falls with depth") for v in full["verdicts"])
    df.to_csv(tmp_path / "t.csv", index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(tmp_path / "t.csv"), "--law", "lr", "--no-write")
    assert code == 0, err
    assert "Learning-rate laws" in out and all(v.split(":")[0] in out for v in full["verdicts"])


def test_tuning_is_an_analysis_of_the_registry_and_an_older_fit_json_reads_the_same():
    """A tuned sweep's fit.json ``tuning`` is made by fit/analyses/tuning.py from the picks pipeline.py
    made before the fit (they chose the table) and the untuned table, its fixed-value fit through the
    refit pipeline.py passes in (ctx.refit): the same section as a fit at that value made by hand, its
    line first among the warnings.  The section now follows ``replicates`` in fit.json; a fit.json
    written before (``tuning`` first) reads as it was written and shows the same tables."""
    import json

    from depthwidth.fit.analyses import tuning
    from depthwidth.fit.tuning import comparison, fixed_value, line, picks
    from tests.test_tuning import _tuned_table

    df, _ = _tuned_table(2, n_groups=12)
    doc = run_fit(runs=df, law="chinchilla", bootstrap=20, max_starts=100, write=False)
    t = doc["tuning"]
    assert t["groups"] == 12 and t["points_in_table"] == 60 and t["points_fitted"] == 12
    assert doc["warnings"][0] == line(t)
    value = fixed_value(picks(df))
    lean = {"holdout": None, "compare": None, "sensitivity": False, "approach": "3", "tuned": None, "metric": None}
    rows = df[df["optim.lr"] == value].drop(columns=["group"]).reset_index(drop=True)
    fixed = run_fit(runs=rows, law="chinchilla", bootstrap=20, max_starts=100, write=False, **lean)
    assert t["fixed"] == json.loads(json.dumps(comparison(doc, fixed, "optim.lr", value)))
    assert list(doc).index("tuning") > list(doc).index("replicates")  # registry order: after the fit's own

    keys = list(doc)
    keys.remove("tuning")
    keys.insert(keys.index("replicates"), "tuning")
    old = {k: doc[k] for k in keys}  # as dw fit wrote it before: tuning before replicates
    new_doc, old_doc = FitDocument.from_json(doc), FitDocument.from_json(old)
    assert list(old_doc.to_json()) == [k for k in keys if k != "written"]  # read as written, in its order
    assert old_doc.sections["tuning"] == new_doc.sections["tuning"] == t
    shown = [{k: (tb.title, tb.display(), tb.notes) for k, tb in tuning.tables(d).items()} for d in (new_doc, old_doc)]
    assert shown[0] == shown[1] and list(shown[0]) == ["fit_tuning", "fit_tuned_vs_fixed"]
    assert shown[0]["fit_tuned_vs_fixed"][2] == [t["fixed"]["line"]]


def test_an_analysis_the_data_ask_for_runs_only_where_they_do(tmp_path):
    """Tuning, planted and gradient persistence are asked for by no option but by the data (their
    registry line's ``when``): a tuned sweep's picks, a store dw simulate planted, runs that wrote
    probes.jsonl.  Where the data do not ask, the fit imports nothing of them."""
    import subprocess

    from depthwidth.simulate import simulate

    store = simulate("demo", name="demo-sim", root=str(tmp_path), seed=1)
    sweep = tmp_path / "demo-sim"
    table = planted_table(get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.005)
    ctx = analyses.Context(clean=table.assign(simulated=True), opts=None, sweep_dir=sweep)
    ctx.opts = types.SimpleNamespace(**{e.option: None for e in analyses.REGISTRY if e.option})
    assert store and [e.section for e in analyses.REGISTRY if e.runs(ctx)] == ["planted", "gradient_persistence"]
    probes = list(sweep.glob("*/probes.jsonl"))
    assert probes
    for f in probes:
        f.unlink()
    ctx.clean = table  # not a simulated run among them
    ctx.picks = ["a pick"]
    assert [e.section for e in analyses.REGISTRY if e.runs(ctx)] == ["tuning"]
    code = (
        "import sys; from depthwidth.fit.pipeline import run_fit; from depthwidth.fit.laws import get_law; "
        "from tests.planted import PLANTED, planted_table; "
        "df = planted_table(get_law('chinchilla'), PLANTED['chinchilla'], kind='chinchilla', noise=0.005); "
        "doc = run_fit(runs=df, law='chinchilla', bootstrap=0, max_starts=50, write=False); "
        "names = {m.rsplit('.', 1)[-1] for m in sys.modules if m.startswith('depthwidth.fit.analyses.')}; "
        "data = {'tuning', 'planted', 'gradient_persistence'}; "
        "print(sorted(data & set(doc) | (data - {'planted'}) & names))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # no data asked for them: no section, tuning's and persistence's modules not imported
