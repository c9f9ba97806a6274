"""``dw fit --runs FILE``: formats, column mapping, JSON keys, and every bad input -> exit 2."""

import json

import numpy as np
import pandas as pd
import pytest

from depthwidth.track.run_source import read_table
from tests.planted import PLANTED, planted_table
from depthwidth.fit.laws import get_law
from tests.helpers import assert_bad_input, dw_in_process, run_dw


_dw = dw_in_process


@pytest.fixture(scope="module")
def table():
    law = get_law("width-depth")
    df = planted_table(law, PLANTED["width-depth"], noise=0.003)
    # name the columns the way another suite would (Gemstones-like)
    return df.rename(columns={"loss": "final_loss", "params": "params_active_precise", "run": "run_name"})


@pytest.fixture(scope="module")
def files(table, tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    table.to_csv(d / "t.csv", index=False)
    table.to_json(d / "t.jsonl", orient="records", lines=True)
    table.to_parquet(d / "t.parquet")
    return d


MAP = "loss=final_loss,params=params_active_precise,run=run_name"


def test_three_formats_read_the_same_table(files, table):
    frames = [read_table(files / f"t.{ext}") for ext in ("csv", "jsonl", "parquet")]
    for f in frames:
        assert list(f.columns) == list(table.columns)
        assert np.allclose(f["final_loss"], table["final_loss"])


def test_fit_runs_file_json_keys(files, capsys):
    code, out, err = _dw(
        capsys,
        "fit",
        "--runs",
        str(files / "t.jsonl"),
        "--columns",
        MAP,
        "--law",
        "width-depth",
        "--bootstrap",
        "0",
        "--json",
        "--max-starts",
        "200",
    )
    assert code == 0, err
    res = json.loads(out)
    for k in ("law", "n", "params", "ci", "r2", "rmse", "objective", "excluded", "derived"):
        assert k in res
    assert res["n"] == 189 and res["n_runs"] == 63 and res["r2"] > 0.999
    assert res["params"]["a_w"] == pytest.approx(PLANTED["width-depth"]["a_w"], abs=0.03)
    assert res["ci"]["a_w"] is None and any("no intervals" in w for w in res["warnings"])
    co = res["derived"]["compute_optimal"]
    assert co["N_exponent"] == pytest.approx(co["D_exponent"] + 2 * co["W_exponent"])
    assert not (files / "fit.json").exists()  # a --runs fit writes only with --out


def test_out_writes_the_same_document(files, tmp_path, capsys):
    out_file = tmp_path / "sub" / "fit.json"
    code, out, err = _dw(
        capsys,
        "fit",
        "--runs",
        str(files / "t.csv"),
        "--columns",
        MAP,
        "--law",
        "chinchilla",
        "--bootstrap",
        "0",
        "--json",
        "--out",
        str(out_file),
        "--max-starts",
        "200",
    )
    assert code == 0, err
    assert json.loads(out_file.read_text())["params"] == json.loads(out)["params"]


def _bad(capsys, *argv) -> str:
    code, out, err = _dw(capsys, *argv)
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert out == ""
    return lines[0]


def test_missing_columns_are_named(files, capsys):
    line = _bad(capsys, "fit", "--runs", str(files / "t.csv"), "--law", "width-depth")  # loss not mapped
    assert "missing columns" in line and "loss" in line
    tab = pd.read_csv(files / "t.csv").drop(columns=["depth"])
    p = files / "nodepth.csv"
    tab.to_csv(p, index=False)
    line = _bad(capsys, "fit", "--runs", str(p), "--columns", MAP, "--law", "width-depth")
    assert "missing columns for law width-depth: depth" in line


def test_unknown_law_column_and_compare(files, capsys):
    assert "--law" in _bad(capsys, "fit", "--runs", str(files / "t.csv"), "--columns", MAP, "--law", "kaplan")
    line = _bad(capsys, "fit", "--runs", str(files / "t.csv"), "--columns", "lost=final_loss")
    assert "lost" in line and "params, tokens, loss" in line
    line = _bad(capsys, "fit", "--runs", str(files / "t.csv"), "--columns", "loss=no_such_column")
    assert "no_such_column" in line
    assert "--compare" in _bad(
        capsys, "fit", "--runs", str(files / "t.csv"), "--columns", MAP, "--compare", "chinchilla,kaplan"
    )


def test_fewer_points_than_parameters(files, capsys):
    tab = pd.read_csv(files / "t.csv").iloc[:4]
    p = files / "tiny.csv"
    tab.to_csv(p, index=False)
    line = _bad(capsys, "fit", "--runs", str(p), "--columns", MAP, "--law", "width-depth")
    assert "at least as many points as free parameters" in line


@pytest.mark.parametrize("col", ["final_loss", "tokens", "width"])
def test_non_positive_values_where_a_log_is_taken(files, capsys, col):
    tab = pd.read_csv(files / "t.csv")
    tab.loc[5, col] = 0.0 if col != "final_loss" else -1.0
    p = files / f"neg_{col}.csv"
    tab.to_csv(p, index=False)
    line = _bad(capsys, "fit", "--runs", str(p), "--columns", MAP, "--law", "width-depth")
    assert "logarithm" in line and "row 5" in line


def test_non_finite_rows_are_excluded_and_listed(files, capsys):
    tab = pd.read_csv(files / "t.csv")
    tab.loc[[0, 1], "final_loss"] = np.nan
    tab.loc[2, "final_loss"] = np.inf
    p = files / "nan.csv"
    tab.to_csv(p, index=False)
    code, out, err = _dw(
        capsys,
        "fit",
        "--runs",
        str(p),
        "--columns",
        MAP,
        "--law",
        "width-depth",
        "--bootstrap",
        "0",
        "--json",
        "--max-starts",
        "200",
    )
    assert code == 0, err
    res = json.loads(out)
    assert res["n"] == len(tab) - 3
    assert sum(e["points"] for e in res["excluded"]) == 3
    assert all(e["reason"] == "non-finite loss" for e in res["excluded"])


def test_other_bad_arguments(files, tmp_path, capsys):
    f = str(files / "t.csv")
    assert "exactly one of NAME, --runs FILE or --source wandb" in _bad(capsys, "fit")
    assert "a sweep name and --runs (allowed: exactly one of" in _bad(capsys, "fit", "toy", "--runs", f)
    assert "--runs" in _bad(capsys, "fit", "--runs", str(tmp_path / "nope.csv"))
    (tmp_path / "t.xlsx").write_text("x")
    assert ".csv" in _bad(capsys, "fit", "--runs", str(tmp_path / "t.xlsx"))
    assert "--bootstrap" in _bad(capsys, "fit", "--runs", f, "--bootstrap", "-1")
    assert "--ci" in _bad(capsys, "fit", "--runs", f, "--ci", "1.5")
    assert "--pin" in _bad(capsys, "fit", "--runs", f, "--columns", MAP, "--pin", "alpha")
    assert "parameters of chinchilla" in _bad(capsys, "fit", "--runs", f, "--columns", MAP, "--pin", "kappa=2")
    assert "sweep" in _bad(capsys, "fit", "nosuchsweep", "--root", str(tmp_path))


def test_bad_input_writes_nothing(tmp_path, capsys):
    from tests.test_fit_store import make_store

    sweep = make_store(tmp_path / "runs", seeds=1, probes=False)
    _bad(capsys, "fit", "toy", "--root", str(tmp_path / "runs"), "--law", "depth-delusion", "--pin", "kappa=-3")
    _bad(capsys, "fit", "toy", "--root", str(tmp_path / "runs"), "--compare", "width-depth,nope")
    assert not (sweep / "fit.json").exists()


def test_bad_input_in_a_real_process(files):
    p = run_dw("fit", "--runs", str(files / "t.csv"), "--law", "nope")
    assert "--law" in assert_bad_input(p)


def test_where_filters_rows(files, tmp_path, capsys):
    import json as _json

    import pandas as pd

    from depthwidth.cli import main

    df = pd.read_csv(files / "t.csv")
    df["shape"] = ["uniform"] * (len(df) - 3) + ["x"] * 3
    f = tmp_path / "shaped.csv"
    df.to_csv(f, index=False)
    main(
        [
            "fit",
            "--runs",
            str(f),
            "--columns",
            MAP,
            "--where",
            "shape=uniform",
            "--bootstrap",
            "0",
            "--max-starts",
            "50",
            "--json",
            "--law",
            "width-depth",
        ]
    )
    res = _json.loads(capsys.readouterr().out)
    assert res["n"] == len(df) - 3 and res["where"] == ["shape=uniform"]
    assert "--where" in _bad(capsys, "fit", "--runs", str(f), "--columns", MAP, "--where", "colour=red")
    assert "--where" in _bad(capsys, "fit", "--runs", str(f), "--columns", MAP, "--where", "shape=triangle")
