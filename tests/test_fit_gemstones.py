"""Real data: the Gemstones run tables (../shared/data/gemstones) fit under chinchilla and width-depth."""

import math
import os
from pathlib import Path

import pytest

from depthwidth.fit.run import run_fit

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
