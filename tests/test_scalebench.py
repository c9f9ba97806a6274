"""ScaleBench ("Spend Less, Fit Better", arXiv 2604.22753) as dw user laws: benchmarks/scalebench_laws and
the benchmark benchmarks/bench_scalebench.py.  The laws are checked without the data; what needs the data
(../shared/data/scalebench, read-only, never copied into the project) skips when it is absent."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_scalebench as sb
from depthwidth.fit.engine import fit_law
from depthwidth.fit.userlaw import load_law

ROOT = Path(__file__).resolve().parent.parent
LAWS = ROOT / "benchmarks" / "scalebench_laws"
# The project's shared folder sits beside the checkout; DW_SHARED points elsewhere.
DATA = Path(os.environ.get("DW_SHARED") or ROOT.parent / "shared") / "data" / "scalebench"
# Parameters of each law, as the benchmark counts them (PARAM_COUNTS in active-sl's laws.py files).
PARAMS = {
    "farseer": [9],
    "parallel": [6, 5, 4, 4, 4, 4, 4, 4, 3, 4],
    "data_constrained": [7, 7, 7, 7, 6, 8, 7, 7, 7, 7],
}
COLUMNS = {
    "farseer": {"N", "D"},
    "parallel": {"num_params", "parallel_size"},
    "data_constrained": {"unique_tokens", "params", "tokens"},
}


def laws(task):
    return sorted((LAWS / task).glob("sl_*.yaml"), key=lambda p: int(p.stem.split("_")[1]))


@pytest.fixture
def data():
    if not all((DATA / t / f).is_file() for t in PARAMS for f in ("train.parquet", "test.parquet")):
        pytest.skip(f"ScaleBench data {DATA} absent (../shared/data/scalebench)")
    return DATA


@pytest.mark.parametrize("task", sorted(PARAMS))
def test_every_law_loads_with_the_benchmarks_parameters_and_columns(task):
    files = laws(task)
    assert [f.stem for f in files] == [f"sl_{i + 1}" for i in range(len(PARAMS[task]))]
    for f, n in zip(files, PARAMS[task]):
        law = load_law(f)
        assert law.name == f"{task}_{f.stem}" and len(law.params) == n, f
        assert set(law.columns) <= COLUMNS[task], (f, law.columns)
        for p in law.params:  # bounds as the benchmark's; starts inside them (their quartiles)
            assert p.lo < p.hi and all(p.lo <= g <= p.hi for g in p.grid), (f, p.name)


def _r2(y, p):
    return float(np.clip(1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum(), -1, 1))


def test_a_parallel_law_fitted_on_the_whole_pool_predicts_the_target_region(data):
    import pandas as pd

    train = pd.read_parquet(data / "parallel" / "train.parquet")
    test = pd.read_parquet(data / "parallel" / "test.parquet")
    law = load_law(LAWS / "parallel" / "sl_2.yaml")  # c0 + cN·N^-α + cS·S^-β, fitted per group
    ys, ps = [], []
    for g in ("pile", "stack"):
        fr = fit_law(train[train["group"] == g].reset_index(drop=True), law, max_starts=256)
        tg = test[test["group"] == g].reset_index(drop=True)
        ys.append(tg["loss"].to_numpy())
        ps.append(np.exp(law.evaluate(fr.theta[None, :], law.data(tg))[0]))
        assert (train[train["group"] == g]["parallel_size"] < 8).all() and (tg["parallel_size"] == 8).all()
    # the paper's All Data gets 0.99 on this task; the target region is parallel size 8, beyond the pool's 1-4
    assert _r2(np.concatenate(ys), np.concatenate(ps)) > 0.9


@pytest.mark.filterwarnings(
    "ignore::RuntimeWarning"
)  # starts that leave a law's domain: bad starts, as the engine reads them
def test_every_law_evaluates_on_its_task_at_a_start(data):
    import pandas as pd

    for task in PARAMS:
        pool = pd.read_parquet(data / task / "train.parquet")
        for f in laws(task):
            law = load_law(f)
            pred = law.evaluate(law.grid(max_starts=200), law.data(pool))
            assert np.isfinite(pred).all(axis=1).any(), f  # some start gives a positive loss everywhere


def test_the_benchmark_says_in_one_line_when_the_data_are_absent(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scalebench.py"), "--data", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 2
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and "ScaleBench data absent" in lines[0] and str(tmp_path / "none") in lines[0], r.stdout


def _summary(dw, random):
    """A bench summary: per task, dw's and random's (dw's fit) mean at 1%, 5%, 10%."""
    return {
        t: {
            "budgets": {
                str(b): {"dw": {"mean": d}, "random": {"mean": r}} for b, d, r in zip(sb.BUDGETS, dw[t], random[t])
            }
        }
        for t in dw
    }


def test_the_benchmarks_check_is_issue_36s_target():
    """Each task at each budget ≥ the paper's V-opt (1% too) and ≥ dw's own random picks; the mean over
    the tasks ≥ the paper's MSPE at each budget; equal to the paper's figure at 2 decimals is a tie, met."""
    dw = {
        "farseer": [0.70, 0.89, 0.917],  # 10%: +0.917 rounds to V-opt's +0.92: a tie, met
        "parallel": [-1.0, 0.84, 0.984],  # 10%: +0.984 is +0.98 at 2 decimals: short
        "data_constrained": [0.50, 0.86, 0.90],  # 1%: below V-opt's +0.58
    }
    random = {
        "farseer": [-0.71, 0.90, 0.88],  # 5%: the random picks beat the design
        "parallel": [-1.0, -0.35, 0.0],  # 1%: both clipped at -1, an exact tie
        "data_constrained": [-0.23, 0.52, 0.78],
    }
    ties: list[str] = []
    short = sb.shortfalls(_summary(dw, random), sb.BUDGETS, ties)
    assert short == [
        "farseer 5%: dw +0.890 < random (dw's fit) +0.900 (short by 0.010)",
        "parallel 10%: dw +0.984 < paper V-opt +0.990 (short by 0.006)",
        "data_constrained 1%: dw +0.500 < paper V-opt +0.580 (short by 0.080)",
        # the mean over the tasks at 1%: (0.70 - 1.00 + 0.50) / 3 = +0.067 < MSPE's (0.60 - 1.00 + 0.73) / 3
        "mean of 3 task(s) 1%: dw +0.067 < paper MSPE +0.110 (short by 0.043)",
    ], short
    assert any(t.startswith("farseer 10%: dw +0.917 = paper V-opt +0.920") for t in ties), ties
    assert any(t.startswith("parallel 1%: dw -1.000 = random") for t in ties), ties
    means = sb.task_means(_summary(dw, random), sb.BUDGETS)
    assert means["0.05"]["MSPE"] == pytest.approx((0.88 + 0.77 + 0.85) / 3)
    assert means["0.1"]["dw"] == pytest.approx((0.917 + 0.984 + 0.90) / 3)
    # a method not run leaves its target unchecked: a shortfall, never a silent pass
    only_dw = {t: {"budgets": {str(b): {"dw": {"mean": 1.0}} for b in sb.BUDGETS}} for t in dw}
    assert [s for s in sb.shortfalls(only_dw, sb.BUDGETS) if "no random (dw's fit) row" in s] != []
