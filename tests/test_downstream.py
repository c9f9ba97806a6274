"""``dw fit --metric METRIC:TASK``: the two-step downstream prediction (fit/analyses/downstream.py) checked
against planted worlds: a Chinchilla loss law and a sigmoid from loss to accuracy, both with noise."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from depthwidth.fit.analyses.downstream import NAMES, sigmoid
from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from tests.helpers import dw_in_process

LAW = get_law("chinchilla")
TRUTH = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 400.0, "beta": 0.3}  # losses 5.4 .. 2.2 on the grid below
SIGMOID = np.array([0.25, 0.8, 4.0, 3.0])  # lo (chance), hi, k per nat, L0: the rise lies inside the grid


def planted(seed: int, acc_sd: float = 0.01, loss_sd: float = 0.01) -> pd.DataFrame:
    """12 sizes x 2 token budgets, one point per run; log-loss noise 0.01, accuracy noise ``acc_sd``."""
    rng = np.random.default_rng(seed)
    rows = [
        dict(params=n, tokens=t * n, run=f"r{i}_{j}")
        for i, n in enumerate(np.geomspace(5e6, 2e9, 12))
        for j, t in enumerate((20, 60))
    ]
    df = pd.DataFrame(rows).assign(loss=1.0)
    df["loss"] = LAW.predict(TRUTH, df) * np.exp(rng.normal(0, loss_sd, len(df)))
    df["acc:toy"] = sigmoid(SIGMOID, df["loss"]) + rng.normal(0, acc_sd, len(df))
    return df


def test_two_steps_recover_the_planted_sigmoid_and_predict_held_out_accuracy_within_intervals():
    """5 planted worlds: the sigmoid's 95% intervals hold the planted lo, hi, k, L0 (>= 17 of 20), and
    the 4 largest runs' accuracy, predicted from the other 20 through the loss law then the sigmoid,
    falls inside its 95% prediction interval (>= 17 of 20) with errors of about the noise."""
    covered, inside, errors = 0, 0, []
    for seed in range(5):
        res = run_fit(
            runs=planted(seed),
            law="chinchilla",
            bootstrap=60,
            max_starts=200,
            seed=seed,
            metric="acc:toy",
            holdout="largest:4",
            write=False,
        )
        d = res["downstream"]
        assert d["runs"] == 24 and d["metric"] == "acc:toy"
        covered += sum(d["ci"][n][0] <= v <= d["ci"][n][1] for n, v in zip(NAMES, SIGMOID))
        h = d["holdout"]
        assert h["fitted_runs"] == 20 and len(h["points"]) == 4
        inside += h["inside"]
        errors += [p["error"] for p in h["points"]]
        assert "_samples" not in res["holdout"]  # the step-1 samples are not written to fit.json
    rmse = float(np.sqrt(np.mean(np.square(errors))))
    print(f"sigmoid parameters covered {covered}/20, held-out accuracies inside {inside}/20, RMSE {rmse:.4f}")
    assert covered >= 17 and inside >= 17 and rmse < 0.03, (covered, inside, rmse)


def test_dw_fit_metric_prints_both_steps_and_bad_metrics_are_one_line(tmp_path, capsys):
    path = tmp_path / "runs.csv"
    planted(0).to_csv(path, index=False)
    args = ["fit", "--runs", str(path), "--law", "chinchilla", "--bootstrap", "30", "--max-starts", "100"]
    code, out, err = dw_in_process(capsys, *args, "--metric", "acc:toy", "--holdout", "largest:4")
    assert code == 0, err
    assert "acc:toy from loss" in out and "predicted in two steps" in out
    code, out, err = dw_in_process(capsys, *args, "--metric", "acc:toy", "--json", "--no-write")
    assert code == 0 and json.loads(out)["downstream"]["params"]["L0"] == pytest.approx(3.0, abs=0.15)
    for metric in ("acc:nope", "toy", "loss"):
        code, out, err = dw_in_process(capsys, *args, "--metric", metric)
        assert code == 2 and err.count("\n") == 1 and metric in err and "acc:toy" in err, err
    few = planted(0)
    few.loc[few.index[5:], "acc:toy"] = np.nan  # 5 runs evaluated: enough; 4 are not
    few.loc[few.index[4], "acc:toy"] = np.nan
    few.to_csv(path, index=False)
    code, out, err = dw_in_process(capsys, *args, "--metric", "acc:toy")
    assert code == 2 and err.count("\n") == 1 and "at least 5 runs (4 have it" in err, err
