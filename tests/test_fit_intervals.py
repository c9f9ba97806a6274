"""Intervals a fit may not show or must flag (fit/boot.py), and what it says before its numbers.

Before: an interval that excluded its own estimate (alpha 0.7035 [0.709, 5] on a 6-run sweep) or that
rested on half the bootstrap refits failing was printed like any other, with only a warning line
at the end; these tests fail on that code."""

import pytest

from depthwidth.fit.boot import FLAG_CONVERGED, underdetermined, vet
from depthwidth.fit.pipeline import run_fit
from tests.helpers import dw_in_process


def test_an_interval_that_excludes_its_estimate_is_withheld_with_the_reason():
    kept, held, flagged = vet(
        {"alpha": 0.7035, "B": 57.33, "delta": 0.25},
        {"alpha": [0.709, 5.0], "B": [47.08, 54.29], "delta": [0.2, 0.3]},
        200,
        200,
    )
    assert kept == {"alpha": None, "B": None, "delta": [0.2, 0.3]} and flagged == {}
    assert set(held) == {"alpha", "B"} and "[0.709, 5] does not contain the estimate 0.7035" in held["alpha"]


def test_intervals_resting_on_failed_refits_are_flagged():
    n = int(FLAG_CONVERGED * 200) - 1
    kept, held, flagged = vet({"a": 1.0, "b": 2.0, "c": 9.0}, {"a": [0.5, 1.5], "b": None, "c": [0, 1]}, n, 200)
    assert kept == {"a": [0.5, 1.5], "b": None, "c": None} and list(held) == ["c"]
    assert list(flagged) == ["a"] and f"rests on the {n} of 200 bootstrap refits" in flagged["a"]
    kept, held, flagged = vet({"a": 1.0}, {"a": [0.5, 1.5]}, int(FLAG_CONVERGED * 200), 200)
    assert kept == {"a": [0.5, 1.5]} and held == {} == flagged


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """6 runs of a planted world (the demo grid's widths 64, 96 at depths 1, 2, 6; 3 budgets each)."""
    from depthwidth.simulate import Noise, simulate
    from depthwidth.track.run_source import run_table

    root = tmp_path_factory.mktemp("six")
    simulate("demo", name="six", root=root, seed=0, only="*grid*", noise=Noise(sigma=0.01))
    df = run_table(root / "six")
    return df[df.width.isin((64, 96)) & df.depth.isin((1, 2, 6))].reset_index(drop=True)


def test_six_run_sweep_says_it_is_underdetermined_first_and_flags_what_rests_on_failures(six, capsys, tmp_path):
    res = run_fit(runs=six, law="depth-delusion", bootstrap=200, write=False, resample="runs")
    assert res["n_runs"] == 6
    assert res["underdetermined"] and res["underdetermined"][0].startswith("6 runs for 7 free parameters")
    assert res["warnings"][0] == res["underdetermined"][0]
    assert res["bootstrap"]["converged"] < FLAG_CONVERGED * 200  # measured 152 of 200
    shown = {k for k, c in res["ci"].items() if c}
    assert shown and shown <= set(res["ci_flagged"])  # every interval shown is flagged
    for k, c in res["ci"].items():  # nothing shown that excludes its estimate
        assert (c is None and k in res["ci_withheld"]) or c[0] <= res["params"][k] <= c[1]
    assert any("interval(s) flagged" in w for w in res["warnings"])
    # the terminal says it before the parameter table, and marks the withheld intervals
    p = tmp_path / "six.csv"
    six.to_csv(p, index=False)
    code, out, _ = dw_in_process(
        capsys, "fit", "--runs", str(p), "--law", "depth-delusion", "--bootstrap", "200", "--resample", "runs"
    )
    assert code == 0
    assert out.index("before the numbers: 6 runs for 7 free parameters") < out.index("Fit: depth-delusion — A/N^alpha")
    assert "interval flagged: few refits converged" in out


def test_a_parameter_combination_the_data_cannot_move_is_named():
    """Every run at the same token count: B/T^beta is one constant, so B and beta trade off exactly."""
    import numpy as np
    import pandas as pd

    from depthwidth.fit.engine import fit_law
    from depthwidth.fit.laws import get_law

    N = np.geomspace(1e7, 1e10, 12)
    df = pd.DataFrame(
        {
            "run": [f"r{i}" for i in range(12)],
            "params": N,
            "tokens": 1e10,
            "loss": 1.8 + 400 / N**0.34 + 0.01 * np.cos(np.arange(12)),
        }
    )
    fr = fit_law(df, get_law("chinchilla"), max_starts=200)
    lines = underdetermined(fr, df)
    assert any("pin at most" in x and "of the 5 free parameters" in x for x in lines), lines
