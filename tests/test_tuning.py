"""Tuning groups (sweep file ``tune:``): every configuration expanded into runs that differ only in
the tuned settings, with a group id that does not depend on the tuned values."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from tests.helpers import dw_in_process

BASE = {
    "groups": {"model": "vwt", "data": "pydoc"},
    "fixed": {
        "model.heads": 4,
        "model.shape": "uniform",
        "train.seq_len": 32,
        "train.batch_size": 4,
        "train.steps": 2,
        "train.log_every": 1,
        "train.threads": 1,
        "train.eval_batches": 1,
        "probe.every": 0,
        "probe.at": [],
    },
}


@pytest.fixture
def sweeps(tmp_path, monkeypatch):
    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    return d


def _dry(capsys, sweeps, doc, name="t"):
    (sweeps / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = dw_in_process(capsys, "sweep", name, "--dry-run", "--json")
    assert code == 0, err
    return json.loads(out)["runs"]


def test_a_2x3_grid_with_a_4_value_tune_block_is_24_runs_in_6_groups_whatever_the_values(sweeps, capsys):
    grid = {"axes": {"model.width": [32, 64], "model.depth": [1, 2, 3]}}
    runs = _dry(capsys, sweeps, {**BASE, **grid, "tune": {"optim.lr": [1e-4, 3e-4, 1e-3, 3e-3]}})
    groups: dict = {}
    for r in runs:
        groups.setdefault(r["group"], []).append(r)
    assert len(runs) == 24 and len({r["run_id"] for r in runs}) == 24 and len(groups) == 6
    for members in groups.values():  # a group: one configuration, its 4 learning rates
        assert len(members) == 4 and len({(r["depth"], r["width"]) for r in members}) == 1
        assert sorted(float(o.split("=")[1]) for r in members for o in r["overrides"] if o.startswith("optim.lr=")) == [
            1e-4,
            3e-4,
            1e-3,
            3e-3,
        ]
    # other tuned values (log-spaced), the same configurations: the same group ids, other run ids
    again = _dry(capsys, sweeps, {**BASE, **grid, "tune": {"optim.lr": {"log": [2e-4, 2e-3], "n": 3}}})
    assert {r["group"] for r in again} == set(groups) and len(again) == 18
    assert not {r["run_id"] for r in again} & {r["run_id"] for r in runs}
    lrs = sorted({float(o.split("=")[1]) for r in again for o in r["overrides"] if o.startswith("optim.lr=")})
    assert lrs == [2e-4, pytest.approx(6.32456e-4, rel=1e-5), 2e-3]  # log-spaced, both ends included
    # tuning another setting too makes other groups; an untuned sweep has none
    two = _dry(capsys, sweeps, {**BASE, **grid, "tune": {"optim.lr": [1e-3, 3e-3], "optim.weight_decay": [0.0, 0.1]}})
    assert len(two) == 24 and len({r["group"] for r in two}) == 6 and not {r["group"] for r in two} & set(groups)
    plain = _dry(capsys, sweeps, {**BASE, **grid})
    assert all("group" not in r for r in plain)


@pytest.mark.parametrize(
    "tune,word",
    [
        ({"optim.lr": [1e-3, 1e-2], "halving": 1}, "tune.halving"),
        ({"run.seed": [1, 2]}, "run.seed"),
        ({"optim.lr": [1e-3]}, "at least 2 values"),
        ({"optim.lr": {"log": [1e-3, 1e-4], "n": 3}}, "0 < lo < hi"),
        ({"lr": [1e-3, 1e-4]}, "lr"),
    ],
)
def test_bad_tune_blocks_are_one_line_and_exit_2(sweeps, capsys, tune, word):
    (sweeps / "t.yaml").write_text(yaml.safe_dump({**BASE, "axes": {"model.depth": [1]}, "tune": tune}))
    code, out, err = dw_in_process(capsys, "sweep", "t", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and word in err, err


def test_groups_reach_the_manifest_status_and_the_run_table(sweeps, capsys, tmp_path):
    """Trained for real (debug launcher, 2 steps each): 2 configurations x 2 learning rates."""
    from depthwidth.track.run_source import run_table

    doc = {**BASE, "axes": {"model.width": [32], "model.depth": [1, 2]}, "tune": {"optim.lr": [1e-3, 3e-3]}}
    planned = _dry(capsys, sweeps, doc)
    code, out, err = dw_in_process(capsys, "sweep", "t", "--json")
    assert code == 0, err
    code, out, err = dw_in_process(capsys, "status", "t", "--json")
    st = json.loads(out)
    assert st["counts"]["done"] == 4
    assert {r["run_id"]: r["group"] for r in st["runs"]} == {r["run_id"]: r["group"] for r in planned}
    code, out, err = dw_in_process(capsys, "status", "t")
    assert code == 0 and "group" in out and planned[0]["group"] in out
    df = run_table(tmp_path / "runs" / "t")
    assert dict(zip(df["run"], df["group"])) == {r["run_id"]: r["group"] for r in planned}
    assert dict(zip(df["run"], df["optim.lr"])) == {r["run_id"]: r["tuned"]["optim.lr"] for r in planned}
    code, out, err = dw_in_process(capsys, "sweep", "t", "--json")  # resubmission: the same runs, all done
    assert code == 0 and json.loads(out)["submitted"] == []


# -- the best pick and the fit on it (planted lr -> loss parabolas) --------------------------------

LRS = [1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2]
CURV = 0.04  # log-loss rise per (decade from the optimum)^2: 1% at half a decade off


def _tuned_table(seed: int, n_groups: int = 24, edge_lr: float | None = None):
    """Chinchilla configurations, each trained at LRS; the loss a parabola in log10 lr around a
    per-group optimum (planted), seed noise 0.006 on log loss."""
    import numpy as np
    import pandas as pd

    from depthwidth.fit.laws import get_law

    law = get_law("chinchilla")
    truth = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 400.0, "beta": 0.3}
    rng = np.random.default_rng(seed)
    rows, optima = [], {}
    for g in range(n_groups):
        n = 1e7 * 1.4**g
        opt = edge_lr if edge_lr is not None and g == 0 else 10 ** rng.uniform(-3.3, -2.7)
        optima[f"g{g}"] = opt
        t = (20 if g % 2 == 0 else 80) * n  # two token ratios: N and T not collinear, so alpha is identified
        base = float(law.predict(truth, pd.DataFrame([{"params": n, "tokens": t, "loss": 1.0}]))[0])
        for lr in LRS:
            y = base * math.exp(CURV * (math.log10(lr) - math.log10(opt)) ** 2 + rng.normal(0, 0.006))
            rows.append({"run": f"g{g}_{lr:g}", "group": f"g{g}", "optim.lr": lr, "params": n, "tokens": t, "loss": y})
    return pd.DataFrame(rows), optima


def test_the_interpolated_optimum_covers_the_planted_one_and_edge_groups_say_where_to_extend():
    from depthwidth.fit.tuning import picks

    covered = interior = 0
    for seed in range(3):
        df, optima = _tuned_table(seed, edge_lr=0.05 if seed == 0 else None)
        for p in picks(df):
            if p.group == "g0" and seed == 0:  # planted beyond the grid's top value
                assert p.edge == "high" and p.best == 1e-2 and p.next_value == pytest.approx(1e-2 * 1e-2 / 3.16e-3)
                assert p.optimum is None
                continue
            if p.optimum_ci is None:
                continue
            interior += 1
            covered += p.optimum_ci[0] <= optima[p.group] <= p.optimum_ci[1]
    print(f"interpolated optimum: planted lr* inside the 95% interval in {covered} of {interior} groups")
    assert interior >= 60 and covered >= 0.88 * interior, (covered, interior)


def test_the_fit_on_each_groups_best_equals_a_fit_on_only_those_runs(tmp_path, capsys):
    from depthwidth.fit.pipeline import run_fit
    from depthwidth.fit.tuning import picks

    df, _ = _tuned_table(1)
    best = {p.best_run for p in picks(df)}
    res = run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=300, write=False)
    only = run_fit(
        runs=df[df["run"].isin(best)].drop(columns=["group"]),
        law="chinchilla",
        bootstrap=0,
        max_starts=300,
        write=False,
    )
    assert res["params"] == only["params"] and res["n"] == only["n"] == 24
    t = res["tuning"]
    assert t["mode"] == "best" and t["groups"] == 24 and t["points_in_table"] == 120 and t["key"] == "optim.lr"
    assert res["warnings"][0].startswith("tuned sweep: the law is fitted on each of 24 groups' best run")
    interp = run_fit(runs=df, law="chinchilla", bootstrap=0, max_starts=300, write=False, tuned="interpolated")
    assert interp["n"] == 24 and interp["tuning"]["mode"] == "interpolated"
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "chinchilla", "--bootstrap", "0")
    assert code == 0 and "Tuning groups: the best optim.lr of each" in out and "tuned sweep: the law" in out, err
    for args, word in ((["--tuned", "bogus"], "bogus"),):
        code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "chinchilla", *args)
        assert code == 2 and err.count("\n") == 1 and word in err, err
    df.drop(columns=["group"]).to_csv(path, index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "chinchilla", "--tuned", "best")
    assert code == 2 and err.count("\n") == 1 and "only on a tuned sweep" in err, err


def test_extend_tuning_adds_exactly_one_value_beyond_the_edge_in_the_same_group(sweeps, capsys):
    """Trained for real: 4 steps at lr 1e-4 and 3e-4, where the larger is better, so every group's best
    is its grid's top: --extend-tuning plans one run per group at 9e-4 (one log step up), in that
    group; submitted, the groups hold 3 runs; asked again, nothing twice."""
    from pathlib import Path

    shipped = yaml.safe_load((Path(__file__).resolve().parent.parent / "sweeps" / "demo_tuned.yaml").read_text())
    assert shipped["tune"] == {"optim.lr": {"log": [1e-3, 1e-2], "n": 3}, "halving": True}  # dw's, made shorter:
    doc = {
        **shipped,
        "fixed": {**shipped["fixed"], "train.steps": 4, "train.budgets": []},
        "axes": {"model.width": [32], "model.depth": [1, 2]},
    }
    doc["tune"] = {"optim.lr": [1e-4, 3e-4]}  # at 4 steps the larger is better: the top edge
    (sweeps / "t.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = dw_in_process(capsys, "sweep", "t", "--dry-run", "--extend-tuning", "--json")
    assert code == 0 and len(json.loads(out)["runs"]) == 4  # nothing measured yet: nothing to extend
    code, out, err = dw_in_process(capsys, "sweep", "t", "--json")
    assert code == 0, err
    code, out, err = dw_in_process(capsys, "sweep", "t", "--dry-run", "--extend-tuning", "--json")
    assert code == 0, err
    runs = json.loads(out)["runs"]
    new = runs[4:]
    assert (
        len(runs) == 6
        and len({r["group"] for r in new}) == 2
        and {r["group"] for r in new} == {r["group"] for r in runs[:4]}
    )
    assert all(r["tuned"]["optim.lr"] == pytest.approx(9e-4) for r in new)
    code, out, err = dw_in_process(capsys, "sweep", "t", "--extend-tuning", "--json")
    assert code == 0 and len(json.loads(out)["submitted"]) == 2, err
    code, out, err = dw_in_process(capsys, "status", "t", "--json")
    st = json.loads(out)
    sizes: dict = {}
    for r in st["runs"]:
        sizes[r["group"]] = sizes.get(r["group"], 0) + 1
    assert st["counts"]["done"] == 6 and sorted(sizes.values()) == [3, 3]


def test_lr_laws_recover_planted_exponents_and_say_whether_lr_is_flat_in_width(tmp_path, capsys):
    """Planted lr*(D, W) = 3e-3 · (D/4)^-0.5 · (W/256)^0 over a 4 x 4 depth-width grid, each at 7
    learning rates, noise 0.001: dw fit --law lr recovers e_D = -0.5 and e_W = 0 within their intervals, says
    lr* is flat in width (its interval within ±0.1) and falls with depth, and leaves the sweep's fit.json alone
    (lr_fit.json).  At noise 0.003 e_W's interval [-0.02, +0.20] reaches past ±0.1: too uncertain to call flat."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    lrs = [1e-4 * 10 ** (k / 2) for k in range(7)]  # 1e-4 .. 1e-1, half a decade apart
    rows = []
    for d in (2, 4, 8, 16):
        for w in (128, 256, 512, 1024):
            opt = 3e-3 * (d / 4) ** -0.5
            n = 12 * d * w * w
            for lr in lrs:
                y = 3.0 * math.exp(CURV * (math.log10(lr) - math.log10(opt)) ** 2 + rng.normal(0, 0.001))
                rows.append(
                    {
                        "run": f"d{d}w{w}_{lr:g}",
                        "group": f"d{d}w{w}",
                        "optim.lr": lr,
                        "params": n,
                        "depth": d,
                        "width": w,
                        "tokens": 1e9,
                        "loss": y,
                    }
                )
    path = tmp_path / "lr.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "lr", "--json", "--no-write")
    assert code == 0, err
    doc = json.loads(out)
    ci = doc["DW"]["ci"]
    assert ci["e_D"][0] <= -0.5 <= ci["e_D"][1] and ci["e_W"][0] <= 0.0 <= ci["e_W"][1], doc["DW"]
    assert doc["used"] == 16 and any("flat in width" in v for v in doc["verdicts"])
    assert any(v.startswith("lr* falls with depth") for v in doc["verdicts"])
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "lr", "--no-write")
    assert code == 0 and "Learning-rate laws" in out and "flat in width" in out
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path).replace("lr.csv", "none.csv"), "--law", "lr")
    assert code == 2 and err.count("\n") == 1
    pd.DataFrame(rows).drop(columns=["group"]).to_csv(path, index=False)
    code, out, err = dw_in_process(capsys, "fit", "--runs", str(path), "--law", "lr")
    assert code == 2 and err.count("\n") == 1 and "tune:" in err, err


def test_the_fit_at_one_value_for_every_rung_is_set_beside_the_tuned_one_and_says_if_the_claim_changed():
    """Two planted worlds, 24 Chinchilla groups at 5 learning rates: lr* the same for every group
    (the fixed-value fit at the grid's middle, 1e-3, is then the tuned fit: no change shown), and
    lr* falling 1.5 decades with N (large models under-tuned at 1e-3: the fitted exponent moves)."""
    import numpy as np

    from depthwidth.fit.pipeline import run_fit

    df, _ = _tuned_table(2)
    flat = df.copy()
    flat["loss"] = [
        y / math.exp(CURV * (math.log10(lr) - math.log10(o)) ** 2) * math.exp(CURV * (math.log10(lr) + 3) ** 2)
        for y, lr, o in zip(df["loss"], df["optim.lr"], [_tuned_table(2)[1][g] for g in df["group"]])
    ]
    res = run_fit(runs=flat, law="chinchilla", bootstrap=60, max_starts=300, write=False)
    f = res["tuning"]["fixed"]
    assert f["value"] == 1e-3 and f["claim"] in {r["number"] for r in f["rows"]}
    assert f["line"].startswith("no change of the claim shown with tuning"), f["line"]
    n = df["params"].to_numpy()
    slope = df.copy()  # lr* from 10^-2 at the smallest N to 10^-4 at the largest: the grid's two ends
    lo, hi = np.log(n.min()), np.log(n.max())
    opt = 10 ** (-2.0 - 2.0 * (np.log(n) - lo) / (hi - lo))
    slope["loss"] = [
        y
        / math.exp(CURV * (math.log10(lr) - math.log10(o)) ** 2)
        * math.exp(CURV * (math.log10(lr) - math.log10(p)) ** 2)
        for y, lr, o, p in zip(df["loss"], df["optim.lr"], [_tuned_table(2)[1][g] for g in df["group"]], opt)
    ]
    res = run_fit(runs=slope, law="chinchilla", bootstrap=60, max_starts=300, write=False)
    f = res["tuning"]["fixed"]
    print(f["line"])
    assert f["line"].startswith("the claim CHANGES with tuning"), f["line"]


def test_the_shipped_cpu_tuned_sweep_runs_as_4_groups_of_3_and_halves_each(sweeps, capsys):
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parent.parent / "sweeps" / "demo_tuned.yaml", sweeps / "demo_tuned.yaml")
    short = ("train.steps=6", "train.budgets=[1536]")  # its first budget at step 3 of 6
    code, out, err = dw_in_process(capsys, "sweep", "demo_tuned", *short, "--json")
    assert code == 0 and len(json.loads(out)["submitted"]) == 12, err
    code, out, err = dw_in_process(capsys, "status", "demo_tuned", "--json")
    st = json.loads(out)
    sizes: dict = {}
    for r in st["runs"]:
        sizes.setdefault(r["group"], []).append((r["depth"], r["width"], r["state"]))
    assert st["counts"]["done"] == 8 and st["counts"]["pruned"] == 4 and len(sizes) == 4
    for v in sizes.values():  # one configuration per group, the worst of its 3 learning rates pruned
        assert len({(d, w) for d, w, _ in v}) == 1 and sorted(s for *_, s in v) == ["done", "done", "pruned"]
