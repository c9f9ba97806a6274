"""Fit and report failure paths: bootstrap convergence, tau(W) over the same runs in
fit.json and the report figure, and a fitted curve that fails to draw."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from depthwidth.fit.boot import refit_many, run_codes, run_weights
from depthwidth.fit.engine import fit_law
from depthwidth.fit.laws import get_law
from tests import report_store as rs
from tests.helpers import run_dw
from tests.planted import PLANTED, planted_table


def test_a_replicate_counts_only_when_the_solver_says_it_converged():
    """One LM iteration from the full-data optimum leaves a finite objective but no converged fit."""
    law = get_law("chinchilla")
    df = planted_table(law, PLANTED["chinchilla"], kind="chinchilla", noise=0.003, run_noise=0.01, seed=3)
    fr = fit_law(df, law, max_starts=100)
    codes, n = run_codes(df)
    W = run_weights(codes, n, 6, np.random.default_rng(0))
    short = refit_many(fr, df, W, max_iter=1)
    assert np.isfinite(short["F"]).all()
    assert not short["ok"].any()
    assert np.isnan(short["theta"]).all()  # nothing of an unconverged replicate reaches an interval
    full = refit_many(fr, df, W)
    assert full["ok"].all()


def _poison(root, run, tau):
    """Give run ``run`` gradient profiles that decay with ``tau``: far off the store's tau(W)."""
    d = root / "t" / run
    s = json.loads((d / "summary.json").read_text())
    depth = s["depth"]
    g = [0.5 * math.exp(-((depth - 1) - layer) / tau) for layer in range(depth)]
    rec = {"step": 20, "tokens": 10000, "grad_norm": {"block": g, "attn": g, "mlp": g}}
    (d / "probes.jsonl").write_text(json.dumps(rec) + "\n")


@pytest.fixture
def failed_store(tmp_path):
    root = tmp_path / "runs"
    runs = rs.build(root, "t", failed=True)
    _poison(root, "f8x32", 40.0)  # a failed and a diverged run with profiles that would move p
    _poison(root, "d8x64", 0.3)
    return root, runs


def test_tau_law_honours_where_drops_failed_runs_and_matches_the_figure(failed_store):
    from depthwidth.fit.pipeline import run_fit
    from depthwidth.report.load import load

    root, runs = failed_store
    healthy_uniform = {r for r, s in runs.items() if s["shape"] == "uniform" and s["status"] == "done"}
    res = run_fit("t", root=str(root), law="chinchilla", bootstrap=0, max_starts=30)
    gp = res["gradient_persistence"]
    assert {r["run"] for r in gp["runs"]} == healthy_uniform
    assert gp["tau_law"]["p"] == pytest.approx(0.44, abs=1e-9)  # the planted exponent, untouched by the poison
    assert gp["tau_law"]["p_ci"] is None  # --bootstrap 0: no interval for p either
    assert "tau(W) fitted on fewer than 3 widths: p is barely constrained" in res["warnings"]  # its warnings: the fit's
    from depthwidth.fit.analyses.gradient_persistence import tau_points

    data = load("t", root=str(root))
    fig_runs = {p["run"] for p in tau_points(data.fit, data.probes)}
    assert fig_runs == healthy_uniform

    res = run_fit("t", root=str(root), law="chinchilla", bootstrap=0, max_starts=30, where=["depth=4"], force=True)
    gp = res["gradient_persistence"]
    depth4 = {r for r in healthy_uniform if runs[r]["depth"] == 4}
    assert {r["run"] for r in gp["runs"]} == depth4 and gp["tau_law"]["runs"] == len(depth4)
    data = load("t", root=str(root))
    assert {p["run"] for p in tau_points(data.fit, data.probes)} == depth4  # the figure follows fit.json


def test_a_curve_that_fails_to_draw_is_reported_in_the_caption(tmp_path):
    from depthwidth.fit.pipeline import run_fit

    root = tmp_path / "runs"
    rs.build(root, "t")
    run_fit("t", root=str(root), law="chinchilla", bootstrap=0, max_starts=30)
    fp = root / "t" / "fit.json"
    fit = json.loads(fp.read_text())
    del fit["params"]["alpha"]  # a fit.json this law cannot evaluate
    del fit["verdicts"]["figure"]["fit"]["params"]["alpha"]  # and the figure's record of what it draws
    fp.write_text(json.dumps(fit))
    p = run_dw("report", "t", "--root", str(root), "--plots", str(tmp_path / "figs"), "--format", "json")
    assert p.returncode == 0, p.stderr
    figs = {f["file"]: f for f in json.loads(p.stdout)["figures"]}
    cap = figs["loss_vs_depth.png"]["caption"]
    assert "no fit.json" not in cap
    assert "chinchilla law could not be drawn" in cap and "KeyError" in cap and "W = 32" in cap
