"""Approach 2 (isoFLOP profiles): per-budget minima and their power laws in C, beside approach 3."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from depthwidth.core.errors import BadInput
from depthwidth.fit.isoflop import budgets, ci_text, isoflop, summary_lines
from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from tests.helpers import REPO
from tests.planted import PLANTED, isoflop_exponents, isoflop_table

CH, WD = PLANTED["chinchilla"], PLANTED["width-depth"]
A_N = isoflop_exponents(CH)["N"]  # N* ∝ C^(β/(α+β)) = 0.5126
EXP_D = isoflop_exponents(WD, "depth")  # D* ∝ C^0.147, W* ∝ C^0.176


def _calibration():
    spec = importlib.util.spec_from_file_location("calibration_isoflop", REPO / "benchmarks" / "calibration_isoflop.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _shown(iso: dict) -> str:
    """What ``dw fit`` prints for the isoFLOP section, and the report's table cells and notes."""
    from rich.console import Console

    from depthwidth.report.fit_view import fit_tables
    from depthwidth.report.render import print_table

    c = Console(record=True, width=250)
    from depthwidth.fit.result import FitDocument

    doc = FitDocument.from_json({"law": "", "params": {}, "isoflop": iso})  # its section alone
    t = fit_tables(doc)["fit_isoflop"]  # the table dw fit and dw report both print
    print_table(t, c)
    return c.export_text() + "\n".join(" | ".join(r) for r in t.display()[1]) + "\n".join(t.notes)


def test_coverage_smoke():
    # 40 planted sweeps per case (benchmarks/calibration_isoflop.py measures 200: 94-97.5%).  Before:
    # the depth profile's parabola bias left 54-68% of D* inside their 95% intervals, and 3-run
    # budgets had zero-width intervals that held nothing.
    res = _calibration().coverage(n_sweeps=40, seed=100, cases=["params σ=0.003", "depth σ=0.003", "params 3 runs"])
    for case in ("params σ=0.003", "depth σ=0.003"):
        for k, e in res[case].items():
            assert e["total"] == 40 and e["coverage"] >= 0.85, (case, k, e)
    for k, e in res["params 3 runs"].items():
        assert e["total"] == 0 and e["no_interval"] == 40, (k, e)


def test_three_runs_per_budget_give_no_interval_and_say_why():
    df, _ = isoflop_table(get_law("chinchilla"), CH, budgets=(1e18, 1e19, 1e20), n=3, noise=0.003, seed=0)
    r = isoflop(df, B=200)
    assert all(b["identified"] and b["x_opt"] for b in r["budgets"])  # the exact parabola still has a vertex
    for b in r["budgets"]:
        assert b["x_opt_ci"] is None and "3 runs" in b["ci_because"] and "no interval" in b["ci_because"]
    p = r["power_laws"]["N"]
    assert p["ci"] is None and "too few runs" in p["ci_because"]
    shown = _shown(r)
    assert (
        shown.count("3 runs: the parabola through them fits them exactly") >= 6
    )  # terminal and report, 3 budgets each
    assert "(no interval at budget(s) 1e+18, 1e+19, 1e+20 (too few runs))" in shown


def test_a_minimum_near_the_edge_gives_a_one_sided_interval():
    # The optimum 0.2 in ln N below the top of every budget's grid: many replicate minima leave the
    # range above (or their curve has no minimum and is lowest at the top edge).  They count as +inf,
    # so the interval is open above instead of being computed over the replicates that stayed inside.
    df, truth = isoflop_table(get_law("chinchilla"), CH, span=1.5, offset=-1.3, noise=0.005, seed=1)
    r = isoflop(df, B=200, seed=1)
    b = r["budgets"][0]
    lo, hi = b["x_opt_ci"]
    assert b["identified"] and hi is None and lo < b["x_opt"] <= b["x_range"][1] and lo <= truth[1e18]
    assert b["x_opt_ci_open"] == "above"
    off = b["replicates_off_range"]
    assert off["above"] > 0.025 * 200 and off["no_minimum"] > 0 and off["below"] == 0
    assert ci_text(b["x_opt_ci"]) == f"> {lo:.4g}" and f"> {lo:.4g}" in _shown(r)
    assert "open above: over 2.5% of replicate minima lie past the sampled range" in _shown(r)


def test_exponent_intervals_rest_on_the_bounded_replicates_and_say_so():
    df, _ = isoflop_table(get_law("chinchilla"), CH, span=1.5, offset=-1.3, noise=0.005, seed=1)
    p = isoflop(df, B=200, seed=1)["power_laws"]["N"]
    assert p["replicates"] == 200 and 0.25 * 200 <= p["bounded_replicates"] < 0.975 * 200
    assert p["ci"][0] <= A_N <= p["ci"][1]
    r = isoflop(df, B=200, seed=1)
    assert any("rests on the" in w and "92-97%" in w for w in r["warnings"])
    # too few replicates with every optimum inside its range: the exponent is unbounded
    df, _ = isoflop_table(get_law("chinchilla"), CH, span=1.5, offset=-1.4, noise=0.005, seed=1)
    r = isoflop(df, B=200, seed=1)
    p = r["power_laws"]["N"]
    assert p["bounded_replicates"] < 0.25 * 200 and p["ci"] == [None, None] and p["ci_open"] == "both"
    assert "unbounded" in summary_lines(r)[0]


def test_the_skew_term_removes_the_parabolas_bias():
    # The width-depth profile is not a parabola in ln D: noise-free, the parabola's vertex is off by
    # 6% at ±1.2 in ln D (2.3% at ±0.8); with the cubic term 0.3%.  On a fixed depth grid the offset
    # changes with the budget and biases the parabola's exponent too.
    df, truth = isoflop_table(get_law("width-depth"), WD, axis="depth", span=1.2, offset=0.2, noise=0.0)
    skew = [np.log(b["x_opt"] / t) for b, t in zip(isoflop(df, B=20)["budgets"], truth.values())]
    assert max(map(abs, skew)) < 0.005
    plain = [np.log(b["x_opt"] / t) for b, t in zip(isoflop(df, B=20, skew=False)["budgets"], truth.values())]
    assert min(plain) > 0.05
    df, _ = isoflop_table(
        get_law("width-depth"), WD, axis="depth", grid=[6 * 2 ** (k / 2) for k in range(7)], noise=0.0
    )
    r = isoflop(df, B=20)
    assert r["power_laws"]["D"]["exponent"] == pytest.approx(EXP_D["D"], abs=2e-3)
    assert r["power_laws"]["W"]["exponent"] == pytest.approx(EXP_D["W"], abs=2e-3)
    assert isoflop(df, B=20, skew=False)["power_laws"]["D"]["exponent"] < EXP_D["D"] - 0.008


def _chain(computes, per=3, budget=None):
    rows = []
    for j, C in enumerate(computes):
        for i in range(per):
            N = 1e8 * np.exp(i - 1)
            rows.append(
                {
                    "run": f"b{j}r{i}",
                    "params": N,
                    "tokens": C / (6 * N),
                    "flops": C,
                    "loss": 3.0,
                    **({"budget": budget[j]} if budget else {}),
                }
            )
    return pd.DataFrame(rows)


def test_budgets_are_grouped_around_their_centre_not_chained():
    # each 20% above the last: within 25% of the previous run, all six chained into one budget before
    cs = [1e18 * 1.2**k for k in range(6)]
    groups = budgets(_chain(cs), tol=0.25)
    assert len(groups) >= 2
    for g in groups:
        members = np.array(cs).repeat(3)[g["rows"]]
        assert np.all(np.abs(np.log(members / g["C"])) <= np.log(1.25) + 1e-12)
        assert g["C"] == pytest.approx(np.exp(np.log(members).mean())) and g["by"] == "compute"


def test_a_budget_column_groups_runs_exactly():
    # measured FLOPs scatter ±30% around the planned budgets (attention, rounding): the planned
    # budget, where the table has it, decides
    cs = [0.75e18, 1.0e18, 1.3e18, 1.5e18, 2.0e18, 2.6e18]
    groups = budgets(_chain(cs, budget=[1e18] * 3 + [2e18] * 3))
    assert [g["C"] for g in groups] == [1e18, 2e18] and [len(g["rows"]) for g in groups] == [9, 9]
    assert {g["by"] for g in groups} == {"budget"}


def test_budgets_whose_noise_differs_warn_that_pooling_misleads():
    df, _ = isoflop_table(get_law("chinchilla"), CH, noise=0.002, seed=0)
    m = (df["flops"] == 1e18).to_numpy()
    df.loc[m, "loss"] *= np.exp(np.random.default_rng(5).normal(0, 0.03, m.sum()))
    assert any("residual scatter differs" in w for w in isoflop(df, B=50).get("warnings", []))
    df, _ = isoflop_table(get_law("chinchilla"), CH, noise=0.002, seed=0)
    assert isoflop(df, B=50)["warnings"] == []


def test_four_run_budgets_warn_with_their_measured_coverage():
    df, _ = isoflop_table(get_law("width-depth"), WD, axis="depth", span=1.2, n=4, noise=0.003, seed=0)
    r = isoflop(df, B=50)
    assert any("plain parabola" in w and "81-85.5%" in w for w in r.get("warnings", []))
    assert all(b["degree"] == 2 for b in r["budgets"])


def test_a_grid_that_misses_the_minimum_is_not_identified():
    df, _ = isoflop_table(get_law("chinchilla"), CH, span=0.5, offset=2.5, noise=0.001)  # all runs far above N*
    r = isoflop(df, B=50)
    assert not any(b["identified"] for b in r["budgets"])
    assert all("outside the sampled params range" in b["because"] or "no minimum" in b["because"] for b in r["budgets"])
    assert r["power_laws"] == {} and "0 budget(s)" in r["note"]


def test_dw_fit_approach_isoflop_beside_the_law():
    df, _ = isoflop_table(get_law("chinchilla"), CH, noise=0.003, seed=1)
    res = run_fit(runs=df, law="chinchilla", bootstrap=100, max_starts=100, approach="isoflop", write=False)
    iso = res["isoflop"]
    (cmp,) = iso["comparison"]
    assert cmp["quantity"] == "N* ∝ C^x" and cmp["agree"] is True
    assert cmp["law"] == pytest.approx(A_N, abs=0.01)  # the law's optima along the same budgets
    assert cmp["law_ci"][0] <= A_N <= cmp["law_ci"][1]
    assert cmp["isoflop_ci"][0] <= A_N <= cmp["isoflop_ci"][1]
    assert all(b["law_x_opt"] is not None for b in iso["budgets"])
    assert iso["noise"]["dof"] == 4 * (7 - 4) and iso["grouped_by"] == "compute"


def test_a_law_without_the_optimum_cannot_be_compared():
    df, _ = isoflop_table(get_law("width-depth"), WD, axis="depth", span=0.8, noise=0.003, seed=1)
    res = run_fit(runs=df, law="chinchilla", bootstrap=20, max_starts=50, approach="isoflop", write=False)
    # chinchilla does not read depth: along a fixed-N, fixed-T budget its loss is flat
    assert {c["quantity"]: c["agree"] for c in res["isoflop"]["comparison"]} == {"D* ∝ C^a": None, "W* ∝ C^b": None}


@pytest.mark.parametrize("kw", [{"approach": "2"}, {"approach": "isoflop", "isoflop_axis": "width"}])
def test_bad_approach_or_axis(kw):
    df, _ = isoflop_table(get_law("chinchilla"), CH)
    with pytest.raises(BadInput):
        run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=10, write=False, **kw)


def test_a_budget_with_too_few_runs_is_skipped_and_the_others_still_fit():
    df, truth = isoflop_table(get_law("width-depth"), WD, axis="depth", span=0.8, offset=0.2, noise=0.003, seed=2)
    first = df["flops"] == df["flops"].min()
    df = df[~first | df["run"].isin(df[first]["run"].iloc[:2])]  # 2 runs left at the smallest budget
    r = isoflop(df, B=100)
    b0 = r["budgets"][0]
    assert b0["runs"] == 2 and not b0["identified"] and "a parabola needs 3" in b0["because"]
    assert all(b["identified"] for b in r["budgets"][1:])
    assert r["power_laws"]["D"]["budgets"] == 3 == r["power_laws"]["W"]["budgets"]
    assert r["power_laws"]["D"]["ci"] is not None


def test_auto_axis_tolerates_params_moved_by_width_rounding():
    df, _ = isoflop_table(get_law("width-depth"), WD, axis="depth", span=0.8, noise=0.003, seed=3)
    assert isoflop(df, B=10)["axis"] == "depth"
    rounded = df.copy()  # as isoflop_depth.yaml's runs: ±7% off the target N (the quantum) plus embeddings
    rounded["params"] *= 1 + 0.07 * np.sin(np.arange(len(df)))
    assert isoflop(rounded, B=10)["axis"] == "depth"
    size, _ = isoflop_table(get_law("chinchilla"), CH, seed=3)
    assert isoflop(size, B=10)["axis"] == "params"
