"""Verdict calibration smoke tests (#34): a handful of planted tables per verdict whose rule changed, each with
a tolerance the rule before the change fails.  The full measurement (100+ tables a case, both noise levels,
the power beside the false yes) is benchmarks/bench_verdicts.py; these reuse its worlds
(benchmarks/verdict_kinds.py) and take seconds."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import verdict_kinds as vk


def _share(kind: str, case: str, n: int) -> float:
    """The share of ``n`` planted tables of ``case`` whose verdict says yes (per-item kinds: mean share)."""
    spec = vk.cases()[case][1:]
    return float(np.mean([float(vk.VERDICTS[kind][1](case, *spec, seed)["yes"]) for seed in range(n)]))


# -- held-out preference (fit/verdicts.py loro_better, preferred; fit/analyses/compare.py dcrit_preference) --


def _rows(seed: int, n_runs: int = 14) -> list[dict]:
    """Compare rows of two laws that predict equally well: per-run LORO errors from one distribution."""
    rng = np.random.default_rng(seed)
    out = []
    for law in ("depth-delusion[log]", "depth-delusion[power]", "width-depth"):
        mse = (0.02 * rng.lognormal(0.0, 0.8, n_runs)) ** 2
        out.append(
            {
                "law": law,
                "params": {"A": 1.0},
                "options": {"dcrit": law[15:-1]} if law.startswith("depth") else {},
                "loro_rmse": float(np.sqrt(mse.mean())),
                "loro_runs": {f"r{i}": float(v) for i, v in enumerate(mse)},
            }
        )
    return out


def _doc(rows: list[dict]) -> dict:
    return {
        "law": "depth-delusion",
        "options": {"dcrit": "log", "irreducible": False},
        "params": {"A": 1.0},
        "compare": {"laws": rows, "best": {}},
        "identification": {"claim": {"parameter": "D_crit", "identified": False}},
    }


def test_laws_that_predict_alike_are_rarely_preferred():
    """100 comparisons of laws whose per-run held-out errors share one distribution: the lower RMSE alone
    preferred width-depth in about half and a D_crit form in every one (before); the paired test (5%) in at
    most 10 (600 such: 5.7% and 5.3%)."""
    from depthwidth.fit.analyses.compare import dcrit_preference
    from depthwidth.fit.verdicts import preferred

    said = [preferred(_doc(_rows(s))) is not None for s in range(100)]
    forms = [dcrit_preference(_rows(s))["prefers"] is not None for s in range(100)]
    assert sum(said) <= 10 and sum(forms) <= 10, (sum(said), sum(forms))


def test_a_law_better_on_most_runs_is_preferred_and_says_how_sure():
    from depthwidth.fit.analyses.compare import dcrit_preference
    from depthwidth.fit.verdicts import loro_better, preferred

    rows = _rows(0)
    rows[2]["loro_runs"] = {k: v / 4 for k, v in rows[0]["loro_runs"].items()}  # width-depth halves every error
    rows[2]["loro_rmse"] = rows[0]["loro_rmse"] / 2
    pref = preferred(_doc(rows))
    assert pref["law"] == "width-depth" and pref["test"] == {"better": True, "p": 2.0**-14, "runs": 14, "wins": 14}
    assert "lower on 14 of 14 runs, paired test p = 6.1e-05" in pref["line"]
    assert loro_better(rows[0], rows[2]) == {"better": False, "p": 1.0, "runs": 14, "wins": 0}
    rows[1]["loro_runs"] = {k: v * 4 for k, v in rows[0]["loro_runs"].items()}
    rows[1]["loro_rmse"] = rows[0]["loro_rmse"] * 2
    assert dcrit_preference(rows)["prefers"] == "log"
    # without a supported penalty the forms are one law: two fits of the same noise are not a preference
    rows[1]["penalty_supported"] = False
    pref = dcrit_preference(rows)
    assert pref["prefers"] is None and "not supported in the depth-delusion[power] fit" in pref["line"]


# -- the report's loss-grid lines (report/tables.py) ---------------------------------------------------


def test_report_grid_lines_need_seed_scatter_to_claim():
    """30 planted grids, 3 seeds a cell, noise 0.02: depth gains flatten but never reverse (no U), width
    always helps, and pairs of equal D·W² are equal.  Before: "a U-shape" in 28%, "does NOT fall
    monotonically" in 39%, a winner in every equal pair; now at most 10% each."""
    assert _share("ushape", "ushape-flat-hi-3seed", 30) <= 0.1
    assert _share("wmono", "wmono-flat-hi-3seed", 30) <= 0.1
    assert _share("pairs", "pairs-nshape-hi-3seed", 30) <= 0.1
    assert _share("ushape", "ushape-u-lo-3seed", 10) == 1.0  # a real U at low noise is still said


def test_one_seed_per_cell_claims_no_shape():
    from depthwidth.report.tables import _pairs, _ushape, _wsweep

    cells = vk._cells("u", "lo", 1, 0)
    line = _ushape(cells, 512, {}).notes[-1]
    one = "one seed per cell: not told from seed scatter; seeds can"
    assert line == f"lowest measured loss at depth 16, inside the depth range ({one})", line
    assert "one seed per cell" in _wsweep(vk._cells("wide", "hi", 1, 1), 8, {}).notes[-1]
    pairs = _pairs(cells, {})
    assert {r["winner"] for r in pairs.rows} == {None} and "one seed per cell" in pairs.notes[-1]


# -- inside the models (report/inside.py) -----------------------------------------------------------


@pytest.mark.parametrize("claim", ["entropy", "lens", "smooth"])
def test_inside_claims_of_an_identical_x_model_are_rarely_supported(claim):
    """× planted identical to uniform, 3 runs of each: before, "supported" in 19-62% of tables (a difference of
    means); now at most 3 of 40."""
    assert _share("inside", f"inside-{claim}-same-3seed", 40) <= 3 / 40


# -- FLOPs to match (fit/match.py) ----------------------------------------------------------------------


def test_four_runs_a_shape_give_no_interval():
    """4 sizes, one run each: the run bootstrap's interval excluded 1 for a × planted identical to uniform in
    32% of tables (before); now no interval, one line says why; 6 runs a shape keep theirs."""
    from depthwidth.fit.match import flops_to_match

    m = flops_to_match(vk.match_table("same", 4, 1, "lo", 0), seed=0)
    assert all(r.flops_fraction_ci is None and r.flops_fraction is not None for r in m.rows)
    assert any(w.startswith("x: 4 runs for 3 parameters: too few to resample") for w in m.warnings)
    assert all(r.flops_fraction_ci is not None for r in flops_to_match(vk.match_table("same", 6, 1, "lo", 0)).rows)


# -- learning-rate laws (fit/tuning.py lr_verdicts) -------------------------------------------------------


def test_flat_needs_the_interval_inside_the_margin_not_only_the_estimate():
    from depthwidth.fit.tuning import lr_verdicts

    def say(e, lo, hi):
        return lr_verdicts({"DW": {"coef": {"e_W": e}, "ci": {"e_W": [lo, hi]}, "dof": 9}, "level": 0.95})[0]

    assert say(0.05, -0.4, 0.5).startswith("lr* in width: exponent +0.050 [-0.400, +0.500] holds 0 but")  # was flat
    assert say(0.01, -0.05, 0.07).startswith("lr* is flat in width")
    assert say(-0.3, -0.5, -0.1).startswith("lr* falls with width")


# -- fixed vs tuned (fit/tuning.py comparison) ------------------------------------------------------------


def test_the_tuning_lines_say_what_they_can_claim():
    """Two wide intervals show no change without showing that none happened (before: "the claim survives
    tuning"); CHANGES quotes its measured false-yes rate (7% at noise 0.02, from fits whose intervals missed)."""
    from depthwidth.fit.tuning import comparison

    def fit(a, lo, hi):
        return {"params": {"alpha": a}, "ci": {"alpha": [lo, hi]}}

    same = comparison(fit(0.35, -1.0, 5.0), fit(0.92, -1.0, 5.0), "optim.lr", 1e-3)["line"]
    assert same.startswith("no change of the claim shown with tuning: alpha 0.92 [-1, 5]"), same
    moved = comparison(fit(0.30, 0.28, 0.32), fit(0.50, 0.45, 0.55), "optim.lr", 1e-3)["line"]
    assert moved.startswith("the claim CHANGES with tuning (a rule that said so of planted sweeps where tuning changes")
