"""Verdicts that mean what they say (#34): the D_crit identification ladder on planted tables.

A quick calibration of the verdict (the full one, 100 tables a case, is benchmarks/bench_verdicts.py;
its table is in docs/verdicts.md): 24 tables written by the benchmark's own generator (not dw
simulate), fitted by the real ``dw fit`` at its defaults.  Before the ladder, the verdict was "a
penalty lowers BIC and two runs lie on each side of the fitted D_crit", and a store that pooled
uniform and × runs said "identified: yes" where every run lay below the planted D_crit."""

from __future__ import annotations

import pytest

from benchmarks.bench_verdicts import DEPTHS, one

# (case, seeds): worlds where D_crit cannot be located (beyond, none, below, pooled shapes) and
# worlds where it can (inside, at the low noise), both D_crit forms
SMOKE = {
    "dd-beyond-log-lo": 3,
    "dd-beyond-power-hi": 2,
    "dd-none-log-hi": 2,
    "dd-below-power-lo": 2,
    "dd-pooled-log-lo": 3,
    "dd-pooled-power-hi": 2,
    "dd-inside-log-lo": 5,
    "dd-inside-power-lo": 5,
}


@pytest.fixture(scope="module")
def rows():
    return [one((case, seed)) for case, n in SMOKE.items() for seed in range(n)]


def test_dcrit_outside_the_grid_or_absent_is_never_located(rows):
    no = [r for r in rows if not r["case"].startswith("dd-inside")]
    assert len(no) == 14
    assert [r["case"] for r in no if r["verdict"] == "located"] == []
    # beyond the grid and no penalty at all: the ladder's first rung, not a guess at where D_crit is
    assert all(r["verdict"] == "no-penalty" for r in no if "-beyond-" in r["case"] or "-none-" in r["case"])
    # every run past D_crit: a penalty shows, but not where it starts
    assert all(r["verdict"] == "not-located" for r in no if "-below-" in r["case"])


def test_a_located_dcrit_holds_the_planted_value(rows):
    yes = [r for r in rows if r["case"].startswith("dd-inside")]
    located = [r for r in yes if r["verdict"] == "located"]
    assert len(located) >= 8, [r["verdict"] for r in yes]  # power at the low noise
    # wrong: an interval of a located width that misses the planted D_crit there (95% intervals: rare)
    assert sum(r["wrong"] for r in located) <= 1, [r["fit"]["dcrit"] for r in located if r["wrong"]]


def test_no_fit_snaps_dcrit_onto_a_runs_depth(rows):
    assert sum(r["snapped"] for r in rows) == 0, DEPTHS  # before the rounded hinge: 29 and 36 of 60 fits


def test_a_shape_blind_law_on_a_store_of_shapes_fits_the_uniform_runs(tmp_path, monkeypatch):
    """The issue's case: dw simulate of a sweep with x runs (every depth below the planted D_crit),
    then dw fit --law depth-delusion: before, "identified: yes" (kappa 0.955 for a planted 2.43)."""
    from depthwidth.fit.pipeline import run_fit
    from depthwidth.simulate import simulate

    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    simulate("demo", name="dp", root=str(tmp_path), seed=0)
    res = run_fit("dp", root=str(tmp_path), law="depth-delusion", dcrit="log", write=False)
    assert res["where"] == ["shape=uniform"] and res["n_runs"] == 12
    assert any(w.startswith("fitted on the 12 uniform runs: 4 runs of other width shapes") for w in res["warnings"])
    assert res["identification"]["verdict"] == "no-penalty"
    pooled = run_fit("dp", root=str(tmp_path), law="depth-delusion", dcrit="log", pool_shapes=True, write=False)
    assert pooled["n_runs"] == 16 and pooled["identification"]["verdict"] != "located"
