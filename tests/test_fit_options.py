"""One run-table loader (track/run_source.py) and one ``FitOptions`` for dw fit, dw fit --match and the report."""

import pytest

from depthwidth.core.errors import BadInput
from depthwidth.fit.laws import get_law
from depthwidth.fit.options import FitOptions
from depthwidth.fit.pipeline import fit_document, run_fit
from depthwidth.track.run_source import RunSource
from tests import report_store as rs
from tests.planted import PLANTED, planted_table


def _table():
    return planted_table(get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.005)


def test_options_as_one_value_or_as_keywords_give_the_same_fit():
    df = _table()
    opts = FitOptions(law="chinchilla", bootstrap=0, max_starts=50, seed=3)
    a = run_fit(runs=df, options=opts, write=False)
    b = run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=50, seed=3, write=False)
    assert a["params"] == b["params"] and a["warnings"] == b["warnings"]
    c = run_fit(runs=df, options=opts, max_starts=20, write=False)  # a keyword overrides the options
    assert c["starts"]["total"] <= 20 < a["starts"]["total"]
    with pytest.raises(TypeError):
        run_fit(runs=df, options=opts, no_such_option=1, write=False)


def test_a_fit_document_names_the_options_it_was_fitted_with():
    df = planted_table(get_law("depth-delusion", dcrit="power"), PLANTED["depth-delusion[power]"], noise=0.005, seed=2)
    df["shape"] = "uniform"
    opts = FitOptions(law="depth-delusion", dcrit="power", where=["shape=uniform"], bootstrap=0, max_starts=50)
    doc = run_fit(runs=df, options=opts, write=False)
    back = FitOptions.of_document(doc)
    assert back.identity() == opts.identity() == {"law": "depth-delusion[power]", "where": ["shape=uniform"]}
    assert (back.law, back.dcrit, back.irreducible) == ("depth-delusion", "power", False)
    assert FitOptions.of_document({"law": "depth-delusion"}).label == "depth-delusion[log]"  # before options: log


def test_every_option_is_checked_before_anything_is_read(tmp_path):
    for bad_opts, flag in (
        (FitOptions(bootstrap=-1), "--bootstrap"),
        (FitOptions(dcrit="cubic"), "--dcrit"),
        (FitOptions(compare="chinchilla,kaplan"), "--compare"),
        (FitOptions(approach="2"), "--approach"),
        (FitOptions(c_ref=-1.0), "--c-ref"),
        (FitOptions(max_starts=0), "--max-starts"),
    ):
        with pytest.raises(BadInput, match=flag):  # the table does not exist: the option fails first
            run_fit(runs=tmp_path / "missing.csv", options=bad_opts)


def test_one_loader_reads_a_sweep_and_the_same_table_as_a_file_alike(tmp_path):
    rs.build(tmp_path, "t")
    sweep = RunSource("t", root=tmp_path).load()
    assert sweep.sweep_dir == tmp_path / "t" and sweep.label == "sweep t" and len(sweep.df)
    sweep.df.to_csv(tmp_path / "t.csv", index=False)
    table = RunSource(runs=tmp_path / "t.csv").load()
    assert table.sweep_dir is None and table.label == str(tmp_path / "t.csv")
    assert list(table.df.columns) == list(sweep.df.columns)
    assert table.df["loss"].tolist() == pytest.approx(sweep.df["loss"].tolist(), nan_ok=True)
    mapped = RunSource(runs=sweep.df.rename(columns={"loss": "final"}), columns="loss=final").load()
    assert mapped.label == "DataFrame" and mapped.df["loss"].tolist() == table.df["loss"].tolist()
    # the report reads the sweep through the same loader
    from depthwidth import report

    data = report.load("t", root=tmp_path)
    assert len(data.points) == int(sweep.df["loss"].notna().sum())


def test_the_loader_takes_exactly_one_source_and_refuses_mixed_tables(tmp_path):
    with pytest.raises(BadInput, match="a sweep name and --runs"):
        RunSource("t", runs="t.csv")
    with pytest.raises(BadInput, match="--project"):
        RunSource(kind="wandb")
    df = _table()
    df["simulated"] = [i % 2 == 0 for i in range(len(df))]  # planted rows beside trained ones, in a file too
    with pytest.raises(BadInput, match="simulated"):
        RunSource(runs=df).load()


def test_dw_fit_prints_the_reports_compute_optimal_table(capsys):
    from depthwidth.cli.fit import render
    from depthwidth.report.fit_view import optimal_table

    res = fit_document(runs=_table(), law="chinchilla", bootstrap=0, max_starts=50, write=False)
    render(res)
    out = " ".join(capsys.readouterr().out.split())  # a title wider than its table wraps
    assert optimal_table(res).title in out and "N* ∝ C^x" in out


def test_dw_fit_prints_the_reports_tables_of_the_fit_and_nothing_of_its_own(capsys):
    """One rendering: every table dw fit prints is report/fit_view.py's, the one dw report shows."""
    from depthwidth.cli.fit import render
    from depthwidth.report.fit_view import fit_tables

    res = fit_document(runs=_table(), law="chinchilla", bootstrap=20, max_starts=50, pins="alpha=0.34", write=False)
    render(res)
    out = " ".join(capsys.readouterr().out.split())
    T = fit_tables(res)
    assert {"fit", "fit_identification", "fit_optimal"} <= set(T)
    for t in T.values():
        if t.rows and not t.key.startswith("dcrit"):  # chinchilla has no D_crit: dw fit leaves those out
            assert " ".join(t.title.split()) in out, t.key
    flags = {r["quantity"]: r.get("flags") for r in T["fit"].rows}
    assert flags["alpha"] == "pinned" and "pinned" in out  # the flags column, in both
    assert "D_crit at the sweep's widths" not in out


def test_every_fit_option_has_one_home_that_the_flags_the_dataclass_and_config_show_read():
    """fit/defaults.py lists each option once; FitOptions' fields and defaults, dw fit's flags and
    dw config show fit are made from it (before: ten defaults written again as literals in cli/fit.py)."""
    import typer.main

    from depthwidth.cli.app import app
    from depthwidth.fit.defaults import FIT, rows
    from depthwidth.track.run_source import SOURCE_OPTIONS

    assert FitOptions.names() == tuple(FIT)
    assert {k: getattr(FitOptions(), k) for k in FIT} == {k: o.default for k, o in FIT.items()}
    cmd = typer.main.get_command(app).commands["fit"]
    params = {p.name: p for p in cmd.params if p.opts[0].startswith("--")}
    for o in [*FIT.values(), *SOURCE_OPTIONS]:
        p = params[o.name]
        assert p.opts == list(o.flags) and p.help == o.help
        assert p.default == o.default or (o.kind is list and p.default is None)
    assert params["level"].opts == ["--ci"] and params["delta"].opts == ["--huber-delta"]
    assert [r["key"] for r in rows()] == [f"fit.{k}" for k in FIT]


def test_run_fit_match_and_report_take_one_source_object_or_its_keywords(tmp_path):
    """The source's options are declared once (RunSource: SOURCE_OPTIONS); run_fit (the match too:
    match=True) and report.load take a RunSource or those keywords, not seven arguments each."""
    import inspect

    from depthwidth import report

    for fn in (run_fit, report.load):
        assert not {"runs", "columns", "root", "project", "group"} & set(inspect.signature(fn).parameters)
    df = _table()
    src = RunSource(runs=df)
    a = run_fit(src, law="chinchilla", bootstrap=0, max_starts=50, write=False)
    b = run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=50, write=False)
    assert a["params"] == b["params"]
    with pytest.raises(TypeError):
        run_fit(src, runs=df, write=False)  # a source and source keywords together
    rs.build(tmp_path, "t")
    assert len(report.load(RunSource("t", root=tmp_path)).points) == len(report.load("t", root=tmp_path).points)
