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


def test_the_accuracy_figure_is_its_analysis_module_s_data(tmp_path):
    """The downstream accuracy figure is fit/analyses/downstream.py's ``figures`` (report/figs.py only
    draws it), from the report's downstream table: per accuracy-like METRIC:TASK a colour, per run its
    final loss and value with its shape's marker, then the legend's entries, as report/downstream.py
    drew them before the figure moved; a metric some runs lack is drawn where it is (it raised KeyError
    before); without accuracy, why it is not drawn."""
    from depthwidth import report
    from depthwidth.core.figures import Figure
    from depthwidth.fit import analyses
    from depthwidth.report import figs
    from depthwidth.report.document import SHAPE_LABEL
    from tests import report_store as rs

    runs = rs.build(tmp_path, "t", failed=True)
    done = sorted(r for r, s in runs.items() if s["status"] == "done")
    vals = {}
    for i, rid in enumerate(done):
        v = {"dw_mc": {"acc": 0.3 + 0.02 * i, "acc_norm": 0.6 - 0.01 * i}, "dw_ppl": {"word_perplexity": 30.0 + i}}
        if i % 3 == 0:  # on some runs only
            v["dw_gen"] = {"exact_match,strict-match": 0.1 + 0.02 * i}
        vals[rid] = v
        tasks = {t: {"metrics": {m: {"value": x} for m, x in ms.items()}, "checkpoint": "final"} for t, ms in v.items()}
        (tmp_path / "t" / rid / "eval.json").write_text(json.dumps({"schema": "dw.eval/1", "tasks": tasks}))
    data = report.load("t", root=str(tmp_path))
    rep = report.build(data)
    (fig,) = analyses.figures(data.fit, "downstream", tables=rep["tables"]).values()
    title = "Downstream accuracy vs held-out loss"
    assert isinstance(fig, Figure) and (fig.file, fig.title, fig.size) == ("accuracy_vs_loss.png", title, (6.4, 4.2))
    assert fig.caption == "final checkpoints (dw eval); colour: METRIC:TASK, marker: shape"
    (p,) = fig.panels
    assert (p.title, p.xlabel, p.ylabel) == (title, "held-out loss (nats/token)", "accuracy")
    assert (p.xscale, p.yscale, p.legend, p.legend_fontsize) == ("linear", "linear", "best", 7)
    marker = {"uniform": "o", "increasing": "s", "decreasing": "D", "diamond": "^", "x": "v"}
    rows = [r for r in data.runs if r["state"] == "done" and r["run"] in vals]  # the old code's rows, in its order
    want = []  # what report/downstream.py drew: per metric its points, then its legend entry; then the shapes'
    for i, (task, metric) in enumerate(
        (("dw_mc", "acc"), ("dw_mc", "acc_norm"), ("dw_gen", "exact_match,strict-match"))
    ):
        for r in rows:
            if metric in vals[r["run"]].get(task, {}):
                shape = r["shape"] or "uniform"
                want.append(("plot", r["loss"], vals[r["run"]][task][metric], marker[shape], f"C{i}", None))
        want.append(("plot", [], [], "o", f"C{i}", f"{metric}:{task}"))
    for s in ("uniform", "increasing", "decreasing", "diamond", "x"):
        want.append(("plot", [], [], marker[s], "0.4", SHAPE_LABEL[s]))
    got = [(s.kind, s.x, s.y, s.fmt, s.style["color"], s.style.get("label")) for s in p.series]
    assert got == want and sum(w[4] == "C2" for w in want) == 1 + len(done[::3])  # exact_match on every third run
    assert all(s.style.get("ms") == 5 for s in p.series if s.style.get("label") is None)
    drawn = figs.draw(figs._plt(), fig)
    assert drawn.axes[0].get_legend() is not None and drawn.axes[0].get_title() == title

    no_acc = {k: v for k, v in rep["tables"].items() if k != "downstream"}
    why = "no accuracy (acc, acc_norm, exact_match) in the finished runs' eval.json (dw eval NAME --tasks ...)"
    assert analyses.figures(None, "downstream", tables=no_acc) == {"accuracy_vs_loss": why}
    assert analyses.figures(None, "downstream") == {"accuracy_vs_loss": why}
