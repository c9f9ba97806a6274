"""``dw fit --holdout largest[:K]``: does the small sweep predict the big runs?"""

import json

import pytest

from depthwidth.core.errors import BadInput
from depthwidth.fit.analyses.compare import compare_laws
from depthwidth.fit.holdout import holdout, parse_holdout, split_largest
from depthwidth.fit.laws import get_law
from tests.helpers import assert_bad_input, dw
from tests.planted import PLANTED, planted_table

CHIN = get_law("chinchilla")


def test_prediction_intervals_cover_at_their_nominal_rate():
    # 16 planted tables (noise σ = 0.01 in log loss), K = 8 runs = 24 points each:
    # 384 held-out points at a nominal 90%.  Measured: 332/384 (86%) inside the
    # prediction intervals, and 116/384 (30%) inside the fit-only confidence
    # intervals, the wrong method of calling a CI a PI.  Points of one table share
    # its fit, so the count is not binomial over 384; the band [80%, 97%] still
    # fails both the CI-as-PI method and intervals twice too wide (~100%).
    # 100 bootstrap replicates: enough for the 5% and 95% percentiles.
    inside = ci_inside = total = 0
    for s in range(16):
        df = planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.01, seed=100 + s)
        h = holdout(df, CHIN, k=8, bootstrap_n=100, level=0.9, max_starts=50, seed=s)
        assert h["split"]["runs"] == 8 and h["split"]["points"] == 24 == len(h["points"])
        assert h["split"]["min_held_out"] > h["split"]["max_fitted"]  # a true extrapolation in FLOPs
        assert h["fitted_runs"] == 72 and 95 <= h["replicates"] <= 100  # replicates whose solver converged
        inside += h["inside"]
        ci_inside += round(h["ci_coverage"] * 24)
        total += 24
    assert 0.80 * total <= inside <= 0.97 * total, inside
    assert ci_inside < 0.6 * total, ci_inside


def test_a_law_that_breaks_beyond_the_fitted_range_is_reported_far_off():
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.005, seed=5)
    m = split_largest(df, 8)["mask"]
    ok = holdout(df, CHIN, k=8, bootstrap_n=20, level=0.9, max_starts=50)  # 20 replicates: only errors asserted
    broken = df.copy()
    broken.loc[m, "loss"] += 0.3  # a plateau the fitted range never shows
    bad_ = holdout(broken, CHIN, k=8, bootstrap_n=20, level=0.9, max_starts=50)
    assert ok["rmse"] < 0.03
    assert bad_["rmse"] > 0.25 and bad_["bias"] < -0.25  # predicted far below the measured losses
    assert bad_["inside"] == 0
    # the fit itself is the same: the training runs did not change
    assert bad_["params"] == pytest.approx(ok["params"], rel=1e-6)


def test_split_is_by_flops_and_named():
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.005, seed=5)
    sp = split_largest(df, 3)
    per_run = df.groupby("run")["flops"].max().sort_values()
    assert set(df.loc[sp["mask"], "run"]) == set(per_run.index[-3:])
    assert sp["name"] == "largest 3 of 80 runs by FLOPs" and sp["points"] == 9
    assert split_largest(df)["runs"] == 16  # default: 20% of the runs


def test_compare_extrapolation_uses_the_holdout_split_and_ranks_laws():
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.005, seed=5)
    cmp = compare_laws(df, ["chinchilla", "width-depth"], max_starts=100, holdout_k=5)
    assert cmp["extrapolation_split"] == "largest 5 of 80 runs by FLOPs"
    rows = {r["law"]: r for r in cmp["laws"]}
    for r in rows.values():
        assert r["extrapolation_held_out"]["runs"] == 5 and r["extrapolation_held_out"]["points"] == 15
    assert cmp["rank"]["extrapolation"][0] == "chinchilla" == cmp["rank"]["loro"][0]
    assert sorted(cmp["rank"]["extrapolation"]) == sorted(rows)


@pytest.mark.parametrize("spec", ["smallest", "largest:0", "largest:x", "largest:-1", "largest:2:3"])
def test_bad_holdout_spec(spec):
    with pytest.raises(BadInput, match="--holdout"):
        parse_holdout(spec)


def test_cli_holdout_json_and_bad_input(tmp_path):
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.005, seed=5)
    f = tmp_path / "t.csv"
    df.to_csv(f, index=False)
    out = tmp_path / "fit.json"
    p = dw(
        "fit",
        "--runs",
        str(f),
        "--holdout",
        "largest:4",
        "--bootstrap",
        "20",
        "--max-starts",
        "50",
        "--json",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["holdout"]["split"]["name"] == "largest 4 of 80 runs by FLOPs" and len(res["holdout"]["points"]) == 12
    assert json.loads(out.read_text())["holdout"]["rmse"] == res["holdout"]["rmse"]
    bad_out = tmp_path / "bad.json"
    for spec in ("largest:80", "biggest"):
        line = assert_bad_input(
            dw(
                "fit",
                "--runs",
                str(f),
                "--holdout",
                spec,
                "--bootstrap",
                "0",
                "--max-starts",
                "20",
                "--out",
                str(bad_out),
            )
        )
        assert "--holdout" in line and not bad_out.exists()
