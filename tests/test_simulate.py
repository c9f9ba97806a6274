"""``dw simulate``: planted worlds written as ordinary run stores, and the real pipeline run on them."""

import json

import numpy as np
import pytest

from depthwidth.fit.pipeline import run_fit
from depthwidth.simulate import Noise, simulate
from tests.helpers import assert_bad_input, dw


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("sim")


@pytest.mark.parametrize("form,seed", [("log", 0), ("power", 1)])
def test_planted_law_recovered_within_its_intervals(root, form, seed):
    """Plant depth-delusion on the 30-run depth_delusion grid, fit it with dw fit, compare."""
    s = simulate("depth_delusion", name=f"dd-{form}", root=root, law="depth-delusion", dcrit=form, seed=seed)
    assert s["runs"] == 30 and s["points"] == 30
    res = run_fit(
        f"dd-{form}", root=root, law="depth-delusion", dcrit=form, bootstrap=100, max_starts=1000, write=False
    )
    p = res["planted"]
    assert p["same_law"] and p["total"] == len(p["numbers"]) > 30
    for k in res["params"]:
        v = p["numbers"][k]
        assert v["planted"] == s["world"]["params"][k]
        assert v["covered"], (k, v)
    assert p["numbers"]["dcrit[W=512]"]["covered"] and p["numbers"]["compute_optimal.W_opt"]["covered"]
    assert res["identification"]["claim"]["identified"]
    # the truth world.json records is the one dw fit compares with
    assert p["numbers"]["dcrit[W=512]"]["planted"] == pytest.approx(s["truth"]["dcrit[W=512]"], rel=1e-12)


def test_runs_carry_their_planted_truth_in_provenance(root):
    s = simulate(
        "demo",
        name="demo-sim",
        root=root,
        law="width-depth",
        seed=3,
        budgets="0.5,1",
        noise=Noise(sigma=0.01, outliers=0.2),
    )
    d = root / "demo-sim"
    world = json.loads((d / "world.json").read_text())
    assert world["world"]["law"] == "width-depth" and world["seed"] == 3 and world["truth"]["a_w"] == 0.3757
    runs = [p for p in d.iterdir() if (p / "summary.json").exists()]
    assert len(runs) == s["runs"] == 16
    for r in runs:
        summ = json.loads((r / "summary.json").read_text())
        prov = summ["provenance"]
        assert prov["simulated"] is True and prov["world"]["params"] == world["world"]["params"]
        assert prov["world"]["noise"]["sigma"] == 0.01 and prov["world"]["seed"] == 3
        assert summ["status"] == "done" and len(summ["budgets"]) == 2
        assert summ["params"] > summ["params_non_embedding"] > 0
        import yaml

        cfg = yaml.safe_load((r / "config.yaml").read_text())
        assert cfg["run_id"] == r.name and cfg["provenance"]["simulated"] is True
        assert cfg["accounting"]["params"] == summ["params"]
    # the same seed writes the same losses; another seed other ones
    again = simulate(
        "demo",
        name="demo-sim",
        root=root,
        law="width-depth",
        seed=3,
        budgets="0.5,1",
        noise=Noise(sigma=0.01, outliers=0.2),
        replace=True,
    )
    assert again["truth"] == s["truth"]
    loss = {r.name: json.loads((r / "summary.json").read_text())["final_val_loss"] for r in runs}
    simulate("demo", name="demo-sim", root=root, law="width-depth", seed=4, budgets="0.5,1", replace=True)
    loss2 = {r.name: json.loads((r / "summary.json").read_text())["final_val_loss"] for r in runs}
    assert set(loss) == set(loss2) and all(loss[k] != loss2[k] for k in loss)


def test_noise_model_is_the_stated_one(root):
    """σ per run, a smaller σ per budget, and outliers: measured on the written store."""
    from depthwidth.fit.laws import get_law
    from depthwidth.track.run_source import run_table

    simulate(
        "depth_delusion", name="noise", root=root, seed=5, budgets="0.25,0.5,1", noise=Noise(sigma=0.02, point=0.002)
    )
    df = run_table(root / "noise")
    law = get_law("depth-delusion")
    w = json.loads((root / "noise" / "world.json").read_text())["world"]
    X = df.assign(params=12.0 * df["depth"] * df["width"] ** 2)  # the law's own N (12DW2)
    r = np.log(df["loss"].to_numpy()) - np.log(law.predict(w["params"], X))
    per_run = df.assign(r=r).groupby("run")["r"]
    within = float(np.sqrt(((r - per_run.transform("mean")) ** 2).sum() / (len(r) - per_run.ngroups)))
    assert within == pytest.approx(0.002, rel=0.3)
    assert float(per_run.mean().std()) == pytest.approx(0.02, rel=0.4)  # 30 runs: a loose check


def test_gradient_profiles_give_the_planted_dcrit_by_the_1_over_e_rule(root):
    """The planted profiles decay with tau = D_crit - 1, so the 1/e rule (a depth) reads D_crit back."""
    simulate("depth_delusion", name="dd-prof", root=root, seed=2)
    res = run_fit("dd-prof", root=root, law="depth-delusion", bootstrap=0, max_starts=500, write=False)
    truth = json.loads((root / "dd-prof" / "world.json").read_text())["truth"]
    by_w = res["gradient_persistence"]["dcrit_by_width"]
    for w in ("256", "512", "2048"):
        assert by_w[w]["profiles"] == pytest.approx(truth[f"dcrit[W={w}]"], rel=0.08), w


def test_mixed_store_is_refused_by_report_and_fit(root):
    import shutil

    simulate("demo", name="mixed", root=root, seed=0)
    d = root / "mixed"
    one = next(p for p in d.iterdir() if (p / "summary.json").exists())
    trained = d / "trained-run"
    shutil.copytree(one, trained)
    s = json.loads((trained / "summary.json").read_text())
    s["run_id"] = "trained-run"
    s["provenance"] = {k: v for k, v in s["provenance"].items() if k not in ("simulated", "world")}
    (trained / "summary.json").write_text(json.dumps(s))
    with open(d / "manifest", "a") as f:  # the manifest is the store's index: the trained run is one of its runs
        f.write(json.dumps({"event": "submit", "run_id": "trained-run", "job_id": "local-x_0", "launcher": "local"}))
        f.write("\n")
    for args in (
        ["report", "mixed", "--root", str(root)],
        ["fit", "mixed", "--root", str(root), "--law", "width-depth"],
    ):
        line = assert_bad_input(dw(*args))
        assert "mixes 16 simulated run(s)" in line and "1 trained run(s)" in line
    assert not (d / "fit.json").exists() and not (root / "out").exists()


def test_bad_input_writes_nothing(root, tmp_path):
    cases = [
        (["simulate", "demo", "--law", "kaplan"], "--law"),
        (["simulate", "demo", "--set", "kappa=-1"], "--set kappa"),
        (["simulate", "demo", "--set", "zeta=1"], "parameter"),
        (["simulate", "demo", "--budgets", "0,1"], "--budgets"),
        (["simulate", "demo", "--noise", "-0.1"], "--noise"),
        (["simulate", "demo", "--outliers", "1.5"], "--outliers"),
        (["simulate", "demo", "--name", "depth_delusion"], "no sweep file's"),
        (["simulate", "demo", "--name", "../x"], "--name"),
        (["simulate", "nosuch"], "nosuch"),
        (["simulate", "demo", "model.depth=0"], "model.depth"),
    ]
    for args, word in cases:
        line = assert_bad_input(dw(*args, "--root", str(tmp_path)))
        assert word in line, (args, line)
    assert list(tmp_path.iterdir()) == []
    # a store with a trained run in it is never written over, not even with --replace
    (tmp_path / "real" / "r1").mkdir(parents=True)
    (tmp_path / "real" / "r1" / "summary.json").write_text(json.dumps({"run_id": "r1", "status": "done"}))
    line = assert_bad_input(dw("simulate", "demo", "--name", "real", "--replace", "--root", str(tmp_path)))
    assert "never written over" in line
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["r1"]


def test_cli_writes_a_store_that_status_and_sweep_treat_as_planted(tmp_path):
    p = dw("simulate", "demo", "--name", "d", "--root", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["runs"] == 16 and doc["dir"] == str(tmp_path / "d")
    st = dw("status", "d", env={"DW_RUNS": str(tmp_path)})
    assert st.returncode == 0 and "16 done" in st.stdout
    # dw sweep must never take planted runs for trained ones
    (tmp_path / "sweeps").mkdir()
    from tests.helpers import REPO

    (tmp_path / "sweeps" / "d.yaml").write_text((REPO / "sweeps" / "demo.yaml").read_text())
    line = assert_bad_input(
        dw("sweep", "d", "launcher=local", env={"DW_RUNS": str(tmp_path), "DW_SWEEPS": str(tmp_path / "sweeps")})
    )
    assert "dw simulate planted" in line


def test_isoflop_sweep_planted_optima_inside_their_intervals(root):
    """dw simulate an isoFLOP sweep (width-depth world), dw fit --approach isoflop, compare each budget's
    optimum and the exponents with the planted law's own minima along the same budgets."""
    from depthwidth.fit.isoflop import isoflop
    from depthwidth.fit.laws import get_law
    from depthwidth.fit.table import prepare
    from depthwidth.track.run_source import RunSource

    s = simulate("isoflop_depth", name="iso", root=root, law="width-depth", seed=2)
    res = run_fit("iso", root=root, law="width-depth", approach="isoflop", bootstrap=200, max_starts=300, write=False)
    iso = res["isoflop"]
    assert iso["axis"] == "depth" and len(iso["budgets"]) == 4 and all(b["runs"] == 6 for b in iso["budgets"])
    law = get_law("width-depth")
    clean = prepare(RunSource("iso", root=root).load().df, law)[0]
    truth = isoflop(clean, axis="depth", B=0, law=law, theta=law.internal(s["world"]["params"])[None, :])
    for b, t in zip(iso["budgets"], truth["budgets"]):
        lo, hi = b["x_opt_ci"]
        assert b["identified"] and (lo is None or lo <= t["law_x_opt"]) and (hi is None or t["law_x_opt"] <= hi)
    for sym in ("D", "W"):
        lo, hi = iso["power_laws"][sym]["ci"]
        assert lo <= truth["law_power_laws"][sym]["exponent"] <= hi, sym


def test_report_of_a_simulated_store_says_so_and_shows_the_planted_comparison(root, tmp_path):
    simulate("demo", name="rep", root=root, law="width-depth", seed=1)
    assert run_fit("rep", root=root, law="width-depth", bootstrap=40, max_starts=200)["planted"]["total"] > 0
    p = dw("report", "rep", "--root", str(root), "--format", "json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["notes"][0].startswith("simulated store: every loss here was planted by dw simulate")
    rows = {r["number"]: r for r in rep["tables"]["fit_planted"]["rows"]}
    assert rows["a_w"]["planted"] == 0.3757 and rows["a_w"]["inside"] in ("yes", "NO")


def test_report_figures_predict_with_the_count_the_law_was_fitted_on(root, tmp_path):
    """The law fitted with N = 12·D·W² (depth-delusion's default) must be drawn with that N, not the
    table's total: the residual figure's RMSE is the fit's own.  (Before: drawn with the total.)"""
    simulate("depth_delusion", name="figs", root=root, seed=4)
    res = run_fit("figs", root=root, law="depth-delusion", bootstrap=0, max_starts=500)
    assert res["n_convention"]["name"] == "12DW2"
    p = dw("report", "figs", "--root", str(root), "--plots", str(tmp_path / "out"), "--format", "json")
    assert p.returncode == 0, p.stderr
    figs = {f["file"]: f for f in json.loads((tmp_path / "out" / "report.json").read_text())["figures"]}
    title = figs["fit_residuals.png"]["title"]
    assert f"RMSE {res['rmse']:.3g} nats" in title, (title, res["rmse"])


def test_the_residual_figure_shows_only_the_runs_the_fit_used(root, tmp_path):
    """A shape-blind law on a store of shapes fits its uniform runs (``where: shape=uniform``): the
    residual figure leaves the × runs out, and its RMSE is the fit's.  (Before: every run, RMSE 0.147
    against the fit's 0.111 on the demo, captioned as if the fit pooled the shapes.)"""
    simulate("demo", name="resid", root=root, seed=0)
    res = run_fit("resid", root=root, law="depth-delusion", bootstrap=0, max_starts=500)
    assert res["where"] == ["shape=uniform"] and res["n_runs"] == 12
    p = dw("report", "resid", "--root", str(root), "--plots", str(tmp_path / "out"), "--format", "json")
    assert p.returncode == 0, p.stderr
    figs = {f["file"]: f for f in json.loads((tmp_path / "out" / "report.json").read_text())["figures"]}
    fig = figs["fit_residuals.png"]
    assert f"RMSE {res['rmse']:.3g} nats" in fig["title"], (fig["title"], res["rmse"])
    assert fig["caption"] == "the finished points the fit used (--where shape=uniform)"


@pytest.mark.parametrize("given", [None, "kappa=4", "kappa=4,gamma=2"])
def test_a_world_too_loud_for_the_vocabulary_scales_the_terms_not_set(root, given):
    """The published parameters plant 11-12 nats on the demo's 256-token vocabulary (ln V = 5.55):
    the terms --set did not give are scaled by one factor until the largest loss is 0.9 ln V, the
    ones given are kept as given.  (Before: any --set was bad input, even kappa=4, which lowers losses;
    docs/guides/planning.md's --set example failed.)"""
    from depthwidth.report.load import load
    from depthwidth.simulate.plant import HEADROOM
    from depthwidth.simulate.world import world

    name = f"loud-{len(given or '')}"
    s = simulate("demo", name=name, root=root, set_values=given, noise=Noise(sigma=0.0, point=0.0), budgets="0.5,1")
    top = max(p["loss"] for p in load(name, root=str(root)).points)
    assert top == pytest.approx(HEADROOM * np.log(256), rel=1e-9)
    published, got, f = world("depth-delusion").values, s["world"]["params"], s["scaled"]["factor"]
    set_here = dict(kv.split("=") for kv in (given or "").split(",") if kv)
    for k, v in got.items():
        if k in set_here:
            assert v == float(set_here[k])
        elif k in ("A", "B", "gamma"):
            assert v == pytest.approx(published[k] * f, rel=1e-12)
        else:  # exponents and D_crit's kappa: the papers'
            assert v == published[k]
    assert 0 < f < 1 and ("every term --set left (A, B)" in s["scaled"]["why"]) == ("gamma" in set_here)


@pytest.mark.parametrize("given", ["A=1e6", "A=10,B=33,kappa=150"])
def test_terms_set_louder_than_the_vocabulary_by_themselves_are_bad_input(tmp_path, given):
    """kappa=150 puts D_crit past every run: gamma, the one term left to scale, acts nowhere, so
    nothing can bring A and B's 7.9 nats under 0.9 ln V (a review found it accepted, 9.7 nats planted)."""
    msg = assert_bad_input(dw("simulate", "demo", "--set", given, "--root", str(tmp_path)))
    assert f"bad value for --set: {given}" in msg and "below 4.99 nats, 0.9·ln V" in msg and "give up to" in msg
    assert not (tmp_path / "demo-sim").exists()  # nothing half-written


def test_the_residual_figure_keeps_the_points_as_the_fit_kept_its_rows():
    from depthwidth.report.figs import _fitted

    pts = [
        {"run": "a", "shape": None, "depth": 2.0, "width": 64.0},
        {"run": "b", "shape": "uniform", "depth": 4.0, "width": 64.0},
        {"run": "c", "shape": "x", "depth": 2.0, "width": 64.0},
    ]
    assert [p["run"] for p in _fitted(pts, ["shape=uniform"])[0]] == ["a", "b"]  # None: a table's uniform model
    assert [p["run"] for p in _fitted(pts, ["shape=uniform", "depth=2"])[0]] == ["a"]  # numerically: 2 == 2.0
    assert [p["run"] for p in _fitted(pts, ["shape=x"])[0]] == ["c"]
    assert _fitted(pts, ["depth=8"])[0] == []
    assert _fitted(pts, ["seed=1"]) == (pts, ["seed=1"])  # a column the points lack: said, not applied
