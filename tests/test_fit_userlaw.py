"""User-defined laws (``dw fit --law FILE.yaml``, fit/userlaw.py + fit/expr.py): a planted law
given as a file is fitted back inside its intervals through the real CLI; the same model written
by hand reproduces the built-in chinchilla fit; the expression language's derivatives are exact;
a law leaving its domain is a bad start, not a crash; every mistake in a law file is one line,
exit 2."""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pandas as pd
import pytest
from helpers import dw_in_process

from depthwidth.core.errors import BadInput
from depthwidth.fit.engine import fit_law
from depthwidth.fit.laws import Law, get_law
from depthwidth.fit.options import FitOptions
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.userlaw import law_of_label, load_law

TRUTH = {"E": 1.7, "A": 400.0, "B": 410.0, "alpha": 0.34, "beta": 0.28}
SIGMA = 0.01  # nats of Gaussian noise on each loss

LAW_YAML = """\
name: two-terms
formula: "E + A*N**(-alpha) + B*D**(-beta)"
columns: {N: params, D: tokens}
params:
  E: {bounds: [0.01, 10], start: [0.5, 1, 2], log: true}
  A: {bounds: [1, 1e8], start: [10, 100, 1000], log: true}
  B: {bounds: [1, 1e8], start: [10, 100, 1000], log: true}
  alpha: {bounds: [0, 2], start: [0.2, 0.5, 1]}
  beta: {bounds: [0, 2], start: [0.2, 0.5, 1]}
"""

GOOD_PARAMS = """\
params:
  E: {bounds: [0.01, 10], log: true}
  A: {bounds: [1, 1e8], log: true}
  alpha: {bounds: [0, 2]}
"""


def planted_table(seed: int = 0) -> pd.DataFrame:
    """40 runs: 8 sizes x 5 token budgets of the planted law, Gaussian noise of SIGMA nats."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, (n, d) in enumerate(itertools.product(np.geomspace(1e7, 1e9, 8), np.geomspace(1e9, 1e11, 5))):
        loss = TRUTH["E"] + TRUTH["A"] * n ** -TRUTH["alpha"] + TRUTH["B"] * d ** -TRUTH["beta"]
        rows.append({"run": f"r{i}", "params": n, "tokens": d, "loss": loss + rng.normal(0, SIGMA)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("userlaw")
    planted_table().to_csv(d / "table.csv", index=False)
    (d / "law.yaml").write_text(LAW_YAML, encoding="utf-8")
    return d


def test_a_planted_law_given_as_a_file_is_fitted_back_inside_its_intervals(files, capsys):
    out = files / "fit.json"
    code, stdout, err = dw_in_process(
        capsys,
        "fit",
        "--runs",
        str(files / "table.csv"),
        "--law",
        str(files / "law.yaml"),
        "--bootstrap",
        "200",
        "--out",
        str(out),
    )
    assert code == 0, err
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["law"] == "two-terms" and res["r2"] > 0.999
    assert res["bootstrap"]["converged"] >= 190
    for k, v in TRUTH.items():
        lo, hi = res["ci"][k]
        assert lo <= v <= hi, (k, v, lo, hi, res["params"][k])
    # reproducible: the file's bytes, text and normalised form are in the provenance
    law = res["provenance"]["law"]
    assert law["sha256"] == hashlib.sha256((files / "law.yaml").read_bytes()).hexdigest()
    assert law["text"] == LAW_YAML and law["spec"]["formula"] == "E + A*N**(-alpha) + B*D**(-beta)"
    assert law["spec"]["params"]["A"] == {"bounds": [1.0, 1e8], "start": [10.0, 100.0, 1000.0], "log": True}
    # built-in derived numbers are absent, not broken; the verdict says why there is no claim
    assert res["derived"] == {}
    assert res["identification"]["claim"]["identified"] is None
    assert "user-defined" in res["identification"]["line"] and res["identification"]["verdict"] is None
    # the law rebuilds from the document, as a built-in law does from its options
    again = law_of_label(res["law"], res["options"])
    assert again.names == ["E", "A", "B", "alpha", "beta"] and again.formula == res["formula"]
    assert FitOptions.of_document(res).identity() == {"law": "two-terms", "where": []}
    assert "two-terms" in stdout  # the tables render


def test_the_same_law_written_by_hand_reproduces_the_builtin_chinchilla_fit(files):
    mine = run_fit(runs=str(files / "table.csv"), law=str(files / "law.yaml"), bootstrap=0, write=False)
    chin = run_fit(runs=str(files / "table.csv"), law="chinchilla", bootstrap=0, write=False)
    for k in TRUTH:
        assert mine["params"][k] == pytest.approx(chin["params"][k], rel=1e-3), k
    assert mine["objective"] == pytest.approx(chin["objective"], rel=1e-6)


def test_pins_holdout_run_resampling_and_compare_take_a_user_law(files):
    res = run_fit(
        runs=str(files / "table.csv"),
        law=str(files / "law.yaml"),
        pins="E=1.7",
        holdout="largest:5",
        resample="runs",
        bootstrap=40,
        compare="chinchilla",
        write=False,
    )
    assert res["params"]["E"] == 1.7 and res["ci"]["E"] == [1.7, 1.7]
    assert res["holdout"]["rmse"] < 0.05
    assert res["bootstrap"]["resample"] == "runs" and res["ci"]["alpha"][0] < res["ci"]["alpha"][1]
    laws = {r["law"]: r for r in res["compare"]["laws"]}
    assert set(laws) == {"two-terms", "chinchilla"}  # the user law takes part as itself
    assert laws["two-terms"]["rmse"] == pytest.approx(laws["chinchilla"]["rmse"], rel=1e-3)


def test_load_law_builds_a_law_from_a_dict_for_other_code():
    spec = {
        "formula": "E + A*N**(-alpha)",
        "columns": {"N": "size"},
        "params": {"E": {"bounds": [0, 5]}, "A": {"bounds": [1, 1e4], "log": True}, "alpha": {"bounds": [0, 1]}},
    }
    law = load_law(spec)
    assert isinstance(law, Law) and law.name == "user-law" and law.columns == ("size",)
    assert law.param("E").grid == (1.25, 2.5, 3.75)  # quartiles of the bounds without start
    assert np.allclose(np.exp(law.param("A").grid), [10.0, 100.0, 1000.0])  # geometric for log: true
    table = {"size": np.array([1e6, 1e8]), "loss": np.ones(2)}
    pred = law.predict({"E": 1.5, "A": 100.0, "alpha": 0.5}, table)
    assert np.allclose(pred, [1.5 + 100 / 1e3, 1.5 + 100 / 1e4])
    assert load_law(law.options["user"]).options == law.options  # the normalised form rebuilds the same law


def test_derivatives_are_exact_through_definitions_and_branches():
    law = load_law(
        {
            "formula": "where(x > 0.5, minimum(E, c*x), maximum(E, 2*c)) + abs(c)*sqrt(x) + exp(-k*log(x + 1)) + q",
            "define": {"x": "N/1e9", "q": "c**2/(1 + x)"},
            "params": {
                "E": {"bounds": [0.1, 5]},
                "c": {"bounds": [0.01, 10], "log": True},
                "k": {"bounds": [-2, 2]},
            },
        }
    )
    X = law.data({"N": np.geomspace(1e8, 1e10, 13), "loss": np.ones(13)})
    theta = law.grid()
    pred, J = law.evaluate(theta, X, jac=True)
    assert np.isfinite(pred).all()
    h = 1e-6
    for i in range(len(law.params)):
        up, dn = theta.copy(), theta.copy()
        up[:, i] += h
        dn[:, i] -= h
        fd = (law.evaluate(up, X) - law.evaluate(dn, X)) / (2 * h)
        # away from the kinks the forward-mode derivative is the finite difference's limit
        assert np.allclose(J[:, i, :], fd, atol=1e-6), law.names[i]


def test_a_law_that_leaves_its_domain_is_a_bad_start_not_a_crash():
    # negative loss for most starts at large N; the truth is E=-0.5 (f > 0 on the data)
    t = planted_table()
    t["loss"] = 3.0 + 400.0 * t["params"] ** -0.3 - 0.5
    law = load_law(
        {
            "formula": "3 + A*N**(-alpha) + E",
            "columns": {"N": "params"},
            "params": {
                "E": {"bounds": [-5, 0], "start": [-4, -2, -0.5]},
                "A": {"bounds": [1, 1e4], "log": True},
                "alpha": {"bounds": [0, 2], "start": [0.1, 1, 2]},
            },
        }
    )
    fr = fit_law(t, law)
    assert fr.params["E"] == pytest.approx(-0.5, abs=1e-4) and fr.params["alpha"] == pytest.approx(0.3, rel=1e-3)
    assert fr.starts["converged"] < fr.starts["total"]  # some starts began where the loss is negative


def test_a_huge_start_grid_is_subsampled_without_being_built():
    params = {f"p{i}": {"bounds": [0, 1], "start": [0.1 * j for j in range(10)]} for i in range(12)}
    law = load_law({"formula": " + ".join(params) + " + N", "params": params})
    assert law.grid_size == 10**12
    g = law.grid(max_starts=100, seed=3)
    assert g.shape == (100, 12) and len({tuple(r) for r in g}) == 100
    assert np.array_equal(law.grid_rows([0, 10**12 - 1]), [[0.0] * 12, [0.9] * 12])


def test_builtin_grids_are_unchanged_by_the_lazy_grid():
    for law in (get_law("chinchilla"), get_law("depth-delusion", dcrit="power", irreducible=True)):
        full = np.array(list(itertools.product(*[p.grid for p in law.params])), dtype=float)
        keep = np.sort(np.random.default_rng(5).choice(len(full), 100, replace=False))
        assert np.array_equal(law.grid(max_starts=100, seed=5), full[keep])
        assert np.array_equal(law.grid(), full)


BAD = {  # case: (law file text, what the one line must name)
    "syntax": ('formula: "E + A*N**(-alpha"\ncolumns: {N: params}\n' + GOOD_PARAMS, "'(' was never closed"),
    "unknown column": ('formula: "E + A*Z**(-alpha)"\n' + GOOD_PARAMS, "formula symbol: 'Z'"),
    "unknown mapped column": (
        'formula: "E + A*N**(-alpha)"\ncolumns: {N: paramz}\n' + GOOD_PARAMS,
        "'paramz'",
    ),
    "no bounds": (
        'formula: "E + A*params**(-alpha)"\nparams:\n  E: {start: [1]}\n  A: {bounds: [1, 1e8], log: true}\n'
        "  alpha: {bounds: [0, 2]}\n",
        "params.E: {'start': [1]}",
    ),
    "import": (
        "formula: \"__import__('os').system('touch PWNED') + E + A*params**(-alpha)\"\n" + GOOD_PARAMS,
        "__import__",
    ),
    "bare import": ("formula: \"__import__('os') + E + A*params**(-alpha)\"\n" + GOOD_PARAMS, "function: '__import__'"),
    "attribute": ('formula: "E + A*params**(-alpha) + (1).real"\n' + GOOD_PARAMS, "'(1).real'"),
    "other function": ('formula: "E + A*sin(params)**(-alpha)"\n' + GOOD_PARAMS, "function: 'sin'"),
    "caret": ('formula: "E + A*params^(-alpha)"\n' + GOOD_PARAMS, "** for powers"),
    "start outside": (
        'formula: "E + A*params**(-alpha)"\nparams:\n  E: {bounds: [0.01, 10], start: [20]}\n'
        "  A: {bounds: [1, 1e8], log: true}\n  alpha: {bounds: [0, 2]}\n",
        "params.E.start: 20",
    ),
    "yaml": ("formula: [unclosed\n" + GOOD_PARAMS, "not valid YAML"),
    "unused parameter": ('formula: "E + A*params**(-0.3)"\n' + GOOD_PARAMS, "params: 'alpha'"),
    "builtin name": ('name: chinchilla\nformula: "E + A*params**(-alpha)"\n' + GOOD_PARAMS, "name: 'chinchilla'"),
    "reads the loss": ('formula: "E + A*params**(-alpha) + 0*loss"\n' + GOOD_PARAMS, "symbol: 'loss'"),
    "unknown key": ('formula: "E + A*params**(-alpha)"\nparam: {}\n' + GOOD_PARAMS, "did you mean params?"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_law_file_is_one_line_exit_2(case, files, tmp_path, capsys, monkeypatch):
    text, named = BAD[case]
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = dw_in_process(
        capsys, "fit", "--runs", str(files / "table.csv"), "--law", "bad.yaml", "--bootstrap", "0", "--no-write"
    )
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("dw: error: "), err
    assert "Traceback" not in err + out
    assert named in lines[0], lines[0]
    assert "bad.yaml" in lines[0]
    assert not (tmp_path / "PWNED").exists()


def test_a_law_file_that_is_missing_or_a_law_name_that_is_unknown_is_bad_input():
    with pytest.raises(BadInput, match="an existing law file"):
        FitOptions(law="nosuch.yaml").make_law()
    with pytest.raises(BadInput, match=r"width-depth \| a law file FILE.yaml"):
        FitOptions(law="nosuch").make_law()
    assert FitOptions(law="chinchilla").make_law().name == "chinchilla"
