"""Real data: the Gemstones run tables (../shared/data/gemstones) fit under chinchilla and width-depth."""

import math
import os
from pathlib import Path

import pytest

from depthwidth.fit.pipeline import run_fit

# The project's shared folder sits beside the checkout; DW_SHARED points elsewhere.
GEMS = Path(os.environ.get("DW_SHARED") or Path(__file__).resolve().parents[2] / "shared") / "data" / "gemstones"
TABLE = GEMS / "runs_120b+.jsonl"
COLUMNS = "loss=final_loss,params=params_active_precise,run=run_name"

pytestmark = pytest.mark.skipif(not TABLE.is_file(), reason=f"Gemstones tables not present at {GEMS}")


@pytest.mark.parametrize("law", ["chinchilla", "width-depth"])
def test_gemstones_fit(law):
    res = run_fit(runs=TABLE, columns=COLUMNS, law=law, bootstrap=0, max_starts=400, write=False)
    assert res["n"] == 2552 and res["n_runs"] == 22 and res["excluded"] == []
    assert math.isfinite(res["r2"]) and res["r2"] > 0.9  # R² is reported and the law explains the curves
    assert 0 < res["rmse"] < 0.2
    assert all(math.isfinite(v) for v in res["params"].values())
    assert res["starts"]["converged"] > 0.5 * res["starts"]["total"]
    for name in res["on_bound"]:  # a parameter the data do not pin down is said so
        assert any(w.startswith(name + " sits on a bound") for w in res["warnings"])


def test_gemstones_identification_holdout_sensitivity_and_isoflop():
    # 20 replicates, 100 starts: this checks that the three analyses run on real
    # data and report consistently (2,552 points make every refit cost ~1 s), not their intervals.
    res = run_fit(
        runs=TABLE,
        columns=COLUMNS,
        law="chinchilla",
        bootstrap=20,
        max_starts=100,
        write=False,
        holdout="largest:4",
        sensitivity=True,
        approach="isoflop",
        isoflop_axis="depth",
    )
    ident = res["identification"]
    assert ident["runs"] == 22 and ident["points"] == 2552
    assert ident["line"].startswith("alpha and beta identified: ")
    h = res["holdout"]
    assert h["split"]["runs"] == 4 and h["fitted_runs"] == 18 and h["split"]["min_held_out"] > h["split"]["max_fitted"]
    assert len(h["points"]) == h["split"]["points"] == 2552 - h["fitted_points"]
    assert 0 < h["rmse"] < 0.2 and 0 <= h["inside"] <= len(h["points"])
    s = res["sensitivity"]
    by = {c["key"]: c for c in s["choices"]}
    # Gemstones has no non-embedding count, and 12·D·W² is no stand-in for its models' (fit/analyses/sensitivity.py)
    assert "no params_non_embedding column" in by["no_embeddings"]["skipped"] and by["drop_5_highest"]["n"] == 2547
    assert by["first_budget"]["n"] == by["last_budget"]["n"] == 22
    for v in s["numbers"].values():
        assert v["spread"] is not None and v["spread"] >= 0
        assert v["flagged"] == (v["spread"] > v["ci_width"])
    # Gemstones is a width x depth grid, not isoFLOP-matched: runs grouped by final compute
    # (within 25%), a parabola in ln depth where a budget has 3 depths, the reason where not
    iso = res["isoflop"]
    assert iso["axis"] == "depth" and sum(b["runs"] for b in iso["budgets"]) == 22
    for b in iso["budgets"]:
        assert b["identified"] or b["because"]
        if b["identified"]:
            assert b["x_range"][0] <= b["x_opt"] <= b["x_range"][1]
