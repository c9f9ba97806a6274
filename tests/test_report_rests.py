"""``dw report --runs TABLE --fit fit.json`` shows what the fit rests on: identification, hold-out, sensitivity."""

import json

from depthwidth.fit.laws import get_law
from tests.helpers import run_dw
from tests.planted import PLANTED, planted_table


def test_report_has_identification_holdout_and_sensitivity(tmp_path):
    df = planted_table(get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.002, run_noise=0.01, seed=3)
    f, fit = tmp_path / "t.csv", tmp_path / "fit.json"
    df.to_csv(f, index=False)
    # 20 replicates: the report's layout is tested here, not the intervals
    p = run_dw("fit", "--runs", str(f), "--holdout", "largest:2", "--sensitivity", "--bootstrap", "20",
               "--max-starts", "50", "--out", str(fit))
    assert p.returncode == 0, p.stderr
    assert "rests on 80 runs, 240 points" in p.stdout and "sensitivity (7 fits)" in p.stdout
    assert "hold-out (largest 2 of 80 runs by FLOPs)" in p.stdout
    res = json.loads(fit.read_text())
    r = run_dw("report", "--runs", str(f), "--fit", str(fit), "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert "## What the fit rests on: 80 runs, 240 points" in md
    assert f"- {res['identification']['verdict']}" in md
    assert "## Hold-out: largest 2 of 80 runs by FLOPs predicted from the others" in md
    assert md.count("| r") >= 6  # the six held-out points, one row each
    assert "## Sensitivity: each number under each fitting choice" in md
    assert "| compute_optimal.N_exponent |" in md and "- no emb.: skipped (" in md
    j = json.loads(run_dw("report", "--runs", str(f), "--fit", str(fit), "--format", "json").stdout)
    assert {"fit_identification", "fit_holdout", "fit_sensitivity"} <= set(j["tables"])
