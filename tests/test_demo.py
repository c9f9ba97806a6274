"""`make demo`'s script end to end, with each run shortened to 10 steps: real
training by detached local workers, `dw status --watch`, `dw fit`, `dw report --plots`."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

from tests.helpers import REPO, run_dw


def test_short_demo_runs_end_to_end(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DW": f"{sys.executable} -m depthwidth",
        "DW_RUNS": str(tmp_path / "runs"),
        "DW_DEMO_OUT": str(tmp_path / "out"),
        "DW_DEMO_ARGS": "train.steps=10 train.budgets=[2560] train.log_every=5 probe.every=5",
        "DW_DEMO_BOOTSTRAP": "10",
    }
    p = subprocess.run(["bash", "scripts/demo.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    assert "demo finished in" in p.stdout
    st = json.loads(run_dw("status", "demo", "--json", env={"DW_RUNS": str(tmp_path / "runs")}).stdout)
    assert st["total"] == 16 and st["counts"]["done"] == 16, st["counts"]
    fit = json.loads((tmp_path / "runs" / "demo" / "fit.json").read_text())
    assert (
        fit["law"] == "depth-delusion" and fit["n_runs"] == 12 and "compare" in fit
    )  # the 12 uniform runs (--where shape=uniform)
    assert fit["where"] == ["shape=uniform"]
    out = tmp_path / "out"
    rep = json.loads((out / "report.json").read_text())
    files = {f["file"] for f in rep["figures"]}
    assert {
        "loss_vs_depth.png",
        "grad_profiles.png",
        "shape_profiles.png",
        "loss_vs_flops.png",
        "fit_residuals.png",
    } <= files, rep["notes"]
    for f in files:
        assert (out / f).stat().st_size > 10_000
        assert f"{out}/{f}" in p.stdout  # the script says where the figures are
    assert len(rep["tables"]["loss_grid"]["rows"]) == 12 and rep["tables"]["missing"]["rows"] == []
    # train.analyze_at_end: every run analysed itself; the report compares the five shapes inside
    assert len(list((tmp_path / "runs" / "demo").glob("*/analysis.json"))) == 16
    assert [r["shape"] for r in rep["tables"]["inside"]["rows"]] == [
        "uniform",
        "increasing",
        "decreasing",
        "diamond",
        "x",
    ]
    assert {"entropy.png", "mlp_dead.png", "logit_lens.png"} <= files
    assert "(loss_vs_depth.png)" in (out / "report.md").read_text()
    # the last step plants the same grid (dw simulate) and asks whether it could identify D_crit at all
    planted = json.loads((tmp_path / "runs" / "demo-planted" / "fit.json").read_text())
    assert planted["planted"]["same_law"] and planted["n_runs"] == 12
    assert "planted world (depth-delusion[log], seed 1)" in p.stdout
    assert re.search(r"^ *(no depth penalty shown|D_crit not located|D_crit located): ", p.stdout, re.M), p.stdout
    assert planted["identification"]["line"] in p.stdout  # the whole line, not its first wrapped row
