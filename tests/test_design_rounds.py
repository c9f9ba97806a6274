"""Designs spent in checkpoints (fit/design_rounds.py): the initial runs never take more than their
stated share of a checkpoint, every checkpoint's runs stay inside its budget, a design starts from
the first run (an ensemble for fewer runs than parameters), and a round whose ensemble cannot be
formed says why in one line naming the Python argument and is counted."""

import numpy as np
import pandas as pd
import pytest

from depthwidth.fit.design_rounds import (
    INITIAL_PER_PARAM,
    INITIAL_SHARE,
    DesignFailed,
    checkpoint_design,
    initial_runs,
    rml_ensemble,
    round_ensemble,
)
from depthwidth.core.errors import BadInput
from depthwidth.fit.laws import get_law
from depthwidth.fit.predict import Region, design

LAW = get_law("chinchilla")  # 5 parameters: an initial design of int(2.5 * 5) = 12 cheapest runs
TRUTH = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 900.0, "beta": 0.28}


def _pool(seed=0):
    """20 runs of nearly equal cost (the cheapest 12 cost ~60% of the pool) and a target region beyond."""
    rng = np.random.default_rng(seed)
    n = np.geomspace(2e7, 4e8, 5)
    t = np.geomspace(1e9, 8e9, 4)
    pool = pd.DataFrame([dict(params=a, tokens=b) for a in n for b in t])
    cost = 1.0 + 0.1 * rng.random(len(pool))
    pool["loss"] = LAW.predict(TRUTH, pool.assign(loss=1.0)) * np.exp(rng.normal(0, 0.01, len(pool)))
    target = pd.DataFrame([dict(params=2e9, tokens=4e10), dict(params=4e9, tokens=8e10)])
    return pool, cost, target


def test_the_initial_design_takes_at_most_its_share_of_a_small_checkpoint_and_batches_stay_inside():
    """#36: at a 20% checkpoint on a pool whose 2.5*P cheapest runs cost more than that, the initial
    design had been the whole checkpoint (the design *was* Cheapest there)."""
    pool, cost, target = _pool()
    total = float(cost.sum())
    n_init = int(INITIAL_PER_PARAM * len(LAW.params))
    assert np.sort(cost)[:n_init].sum() > 0.2 * total  # the old initial design could not fit in 20%
    seed = initial_runs(cost, 0.2 * total, len(LAW.params))
    assert 0 < cost[seed].sum() <= INITIAL_SHARE * 0.2 * total
    limits = [0.2 * total, 0.35 * total, 0.5 * total]
    stats: dict = {}

    def ens(order):
        return round_ensemble(LAW, pool.iloc[order].reset_index(drop=True), bootstrap=30, max_starts=32)[0]

    region = Region(rows=tuple(target.to_dict("records")))
    out = checkpoint_design(pool[["params", "tokens"]], cost, limits, region, len(LAW.params), ens, stats=stats)
    for idx, lim in zip(out, limits):
        assert len(set(idx)) == len(idx) and cost[idx].sum() <= lim * (1 + 1e-9)
    assert all(s <= INITIAL_SHARE + 1e-9 for s in stats["initial_spent"]), stats["initial_spent"]
    seeded_first = set(seed)
    assert set(out[0]) - seeded_first, "the design chose runs beyond the initial ones"
    assert stats["fallbacks"] == 0, stats["fallback_reasons"]


def test_a_design_starts_from_one_run_with_an_ensemble_for_fewer_runs_than_parameters():
    pool, cost, target = _pool(1)
    one = pool.iloc[[0]].reset_index(drop=True)
    ens, why = round_ensemble(LAW, one, bootstrap=30, max_starts=32)
    assert why and "fewer than the 5 parameters" in why and "--" not in why and "\n" not in why
    assert len(ens.theta) >= 10 and ens.source.startswith("rml")
    fitted = LAW.evaluate(ens.theta, LAW.data(one))[:, 0]
    far = LAW.evaluate(ens.theta, LAW.data(target.assign(loss=1.0)))[:, 0]
    y = float(np.log(one["loss"][0]))
    assert abs(float(np.median(fitted)) - y) < 0.02  # the replicates fit the run they have ...
    assert np.std(far) > 5 * np.std(fitted)  # ... and disagree where it says nothing
    d = design(ens, Region(rows=tuple(target.to_dict("records"))), pool[["params", "tokens"]], cost, k=3)
    assert len(d.picks) == 3 and d.width_after[-1] < d.width_now
    prior = rml_ensemble(LAW, None, B=50)  # no run at all: the law's start grid
    assert len(prior.theta) == 50


def test_a_failed_ensemble_round_says_why_in_one_line_and_is_counted():
    pool, cost, target = _pool(2)
    many = pool.iloc[:8].reset_index(drop=True)
    ens, why = round_ensemble(LAW, many, bootstrap=3, max_starts=32)  # 3 replicates: fewer than a design needs
    assert "run_fit(bootstrap=3)" in why and "raise bootstrap=" in why and "--" not in why, why
    assert len(ens.theta) >= 10  # the round still has an ensemble

    def broken(order):
        raise DesignFailed("rml_ensemble: 0 of B=5 replicates fitted 1 runs of chinchilla (a design needs 10; raise B)")

    stats: dict = {}
    total = float(cost.sum())
    out = checkpoint_design(
        pool[["params", "tokens"]],
        cost,
        [0.3 * total],
        Region(rows=tuple(target.to_dict("records"))),
        5,
        broken,
        stats=stats,
    )
    assert stats["fallbacks"] >= 1 and cost[out[0]].sum() <= 0.3 * total * (1 + 1e-9)
    (reason,) = stats["fallback_reasons"]
    assert "raise B" in reason and "\n" not in reason


def test_a_cheap_candidate_the_target_fit_will_ignore_is_worth_nothing():
    """design(weights=): a candidate weighted w teaches what w of a run does.  Unit weights are the
    unweighted design to the digit; the cheapest far run (1/1000 of the others' cost), first by value
    per cost unweighted, is never picked at weight 0 (the fit made for the target would ignore it);
    weights not one in [0, 1] a candidate are one line of bad input."""
    pool, cost, target = _pool(3)
    ens = round_ensemble(LAW, pool.iloc[:12].reset_index(drop=True), bootstrap=30, max_starts=32)[0]
    region = Region(rows=tuple(target.to_dict("records")))
    rows = pool[["params", "tokens"]].iloc[12:].reset_index(drop=True)
    c = cost[12:].copy()
    far = int(np.argmin(rows["params"] * rows["tokens"]))
    c[far] = 1e-3
    plain = design(ens, region, rows, c, k=3)
    assert plain.picks[0] == far
    same = design(ens, region, rows, c, k=3, weights=np.ones(len(rows)))
    assert same.picks == plain.picks and np.allclose(same.width_after, plain.width_after, rtol=1e-12)
    w = np.ones(len(rows))
    w[far] = 0.0
    weighed = design(ens, region, rows, c, k=3, weights=w)
    assert far not in weighed.picks and weighed.value[far] == 0.0 and len(weighed.picks) == 3
    with pytest.raises(BadInput, match=r"bad value for design\(weights=\): 3 weights for \d+ candidates"):
        design(ens, region, rows, c, k=3, weights=np.ones(3))


def test_checkpoint_rounds_pass_the_target_fits_weights_to_the_design():
    """checkpoint_design(weigh=): each round's weights reach the design (unit weights: the same picks
    as none) and weighted rounds are counted; a pool run of weight 0 is never picked by a design."""
    pool, cost, target = _pool(4)
    total = float(cost.sum())
    region = Region(rows=tuple(target.to_dict("records")))

    def ens(order):
        return round_ensemble(LAW, pool.iloc[order].reset_index(drop=True), bootstrap=30, max_starts=32)[0]

    def run(weigh):
        stats: dict = {}
        out = checkpoint_design(
            pool[["params", "tokens"]], cost, [0.8 * total], region, 5, ens, stats=stats, weigh=weigh
        )
        return out[0], stats

    none, st0 = run(None)
    ones, st1 = run(lambda order, e: np.ones(len(pool)))
    assert list(ones) == list(none) and st0["weighted_rounds"] == 0 and st1["weighted_rounds"] == st1["rounds"] > 0
    banned = int(np.setdiff1d(none, none[:12])[0])  # the design's first pick after the initial runs
    w = np.ones(len(pool))
    w[banned] = 0.0
    some, _ = run(lambda order, e: w)
    assert banned not in some


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_initial_runs_count_what_earlier_checkpoints_took(share):
    cost = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 10.0])
    first = initial_runs(cost, 4.0, 2, share=share)  # at most 5 runs, at most share * 4
    assert cost[first].sum() <= share * 4.0
    taken = np.zeros(len(cost), dtype=bool)
    taken[first] = True
    more = initial_runs(cost, 16.0, 2, taken, share=share)
    assert not set(more) & set(first) and cost[[*first, *more]].sum() <= share * 16.0
    assert len(first) + len(more) <= 5


def test_dw_suggest_designs_from_a_store_with_fewer_runs_than_parameters(tmp_path, monkeypatch, capsys):
    """3 finished runs of a 9-parameter law: dw fit refuses a fit, and dw suggest had refused to design
    without one (unless told to plan from the papers); it starts from the RML ensemble of the runs."""
    import json

    import yaml

    from depthwidth.simulate import simulate
    from tests.helpers import dw_in_process
    from tests.test_design import SWEEP

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    (d / "f_init.yaml").write_text(yaml.safe_dump({**SWEEP, "axes": {"model.width": [32], "model.depth": [1, 2, 4]}}))
    (d / "f.yaml").write_text(yaml.safe_dump({**SWEEP, "store": "f-sim"}))
    simulate("f_init", name="f-sim", law="depth-delusion", seed=0, budgets="0.5,1")
    code, out, err = dw_in_process(capsys, "suggest", "f", "--budget", "1", "--json", "--no-write")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["from"].startswith("rml (3 runs)") and doc["runs"], doc["from"]
    assert any("fewer than the" in n and "RML ensemble" in n for n in doc["notes"]), doc["notes"]


def test_the_initial_design_counts_the_points_a_run_of_several_outputs_measures():
    """2.5 measured points a parameter: a 6-parameter law's seed is 15 runs of one output, 5 runs of
    three outputs (it had been 15 runs, 45 points, whatever a run measured)."""
    cost = np.arange(1.0, 41.0)
    one = initial_runs(cost, 1e9, 6)
    three = initial_runs(cost, 1e9, 6, outputs=3)
    assert one == list(range(15)) and three == list(range(5))
    assert initial_runs(cost, 1e9, 9) == list(range(22))  # int(22.5): unchanged for one output
    assert initial_runs(cost, 1e9, 9, outputs=2) == list(range(11))  # int(11.25): 22 points
    with pytest.raises(BadInput, match="bad value for outputs: 0"):
        initial_runs(cost, 1e9, 6, outputs=0)


def test_a_round_whose_fit_refuses_an_argument_names_the_argument_not_the_flag():
    """#36 audit: run_fit's error had been forwarded as said for the command line ("run_fit failed
    (bad value for --max-starts: 0 ...)") from a Python call that gave no flag."""
    pool, cost, target = _pool(3)
    for kw, said in ((dict(max_starts=0), "run_fit(max_starts=)"), (dict(bootstrap=-1), "run_fit(bootstrap=)")):
        ens, why = round_ensemble(LAW, pool.iloc[:8].reset_index(drop=True), **{"bootstrap": 30, **kw})
        assert why.startswith("run_fit failed (bad value for " + said) and "--" not in why and "\n" not in why, why
        assert len(ens.theta) >= 10  # the round still has an ensemble (rml_ensemble instead)


@pytest.mark.parametrize(
    "text, said",
    [
        ("refit: dw fit NAME --law LAW ...", "refit: dw fit NAME run_fit(law=) ..."),
        ("(refit: dw fit NAME --law LAW)", "(refit: dw fit NAME run_fit(law=))"),
        ("--law LAW.", "run_fit(law=)."),
        ("--out FILE to write elsewhere", "run_fit(out=) to write elsewhere"),
        ("a user law, --law FILE.yaml", "a user law, run_fit(law=)"),
        ("map with --columns NAME=COLUMN)", "map with run_fit(columns=))"),
        ("--metric METRIC:TASK: a column", "run_fit(metric=): a column"),
        ("--budget H, --max-starts N", "run_fit(budget=), run_fit(max_starts=)"),
        ("--law chinchilla or --law LAWS", "run_fit(law=) chinchilla or run_fit(law=)"),
        ("--pin KEY=value", "run_fit(pin=) KEY=value"),
        ("--pin LR=3e-4", "run_fit(pin=) LR=3e-4"),
        ("--no-write Refit", "run_fit(no_write=) Refit"),
    ],
)
def test_as_arguments_names_a_flag_and_drops_its_upper_case_metavar(text, said):
    """#36: "--law LAW" was said "run_fit(law=) LAW", the value named twice; a value that is not all
    metavar (a lower-case word, KEY=value, a sentence's next word) is the text's own and stays."""
    from depthwidth.core.errors import as_arguments

    assert as_arguments(text, "run_fit") == said


def test_design_names_its_own_arguments_and_dw_suggest_its_flag(tmp_path, monkeypatch, capsys):
    """#36 audit: design() said "bad value for --cost-power" and "refit with more bootstrap replicates"
    to a Python caller; dw suggest --cost-power keeps naming its flag."""
    from depthwidth.fit.predict import Ensemble, parse_target
    from depthwidth.fit.prior import prior
    from tests.helpers import dw_in_process

    pool, cost, target = _pool(4)
    ens, rows, t = prior(LAW), pool[["params", "tokens"]], parse_target("alpha", LAW)
    with pytest.raises(BadInput) as e:
        design(ens, t, rows, cost, k=1, cost_power=1.5)
    assert str(e.value).startswith("bad value for design(cost_power=): 1.5") and "--" not in str(e.value)
    few = Ensemble(LAW, ens.point, ens.theta[:5], dict(ens.noise), source="fit")  # 5 replicates
    with pytest.raises(BadInput) as e:
        design(few, t, rows, cost, k=1)
    assert "refit with more bootstrap replicates, run_fit(bootstrap=)" in str(e.value) and "--" not in str(e.value)
    from depthwidth.core.errors import as_arguments

    said = as_arguments("bad value for --max-starts: 0 (allowed: an integer >= 1; not --x)", "f")
    assert said == "bad value for f(max_starts=): 0 (allowed: an integer >= 1; not f(x=))"
    _sweep_g(tmp_path, monkeypatch)
    code, out, err = dw_in_process(capsys, "suggest", "g", "--budget", "1", "--cost-power", "1.5", "--no-write")
    assert code == 2 and err.count("\n") == 1 and "bad value for --cost-power: 1.5" in err, err


def _sweep_g(tmp_path, monkeypatch) -> None:
    """A CPU-sized sweep file ``g`` (6 runs) in a fresh sweeps folder and store."""
    import yaml

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    grid = {"model.width": [32, 64], "model.depth": [1, 2, 4]}
    fixed = {"model.heads": 2, "model.quantum": 8, "train.seq_len": 32, "train.batch_size": 4, "train.steps": 20}
    doc = {"description": "g", "groups": {"model": "vwt", "data": "synthetic"}, "fixed": fixed, "axes": grid}
    (d / "g.yaml").write_text(yaml.safe_dump(doc))


def test_a_budget_below_the_cheapest_run_says_whose_hours_they_are(tmp_path, monkeypatch, capsys):
    """#36 audit: dw suggest depth_delusion --budget 5 said the cheapest candidate costs "3.99e+03
    device-hours": CPU-hours on this machine, no launcher named, and nothing said so."""
    from tests.helpers import dw_in_process

    _sweep_g(tmp_path, monkeypatch)
    code, out, err = dw_in_process(capsys, "suggest", "g", "--budget", "1e-12", "--no-write")
    assert code == 2 and err.count("\n") == 1 and "cheapest candidate's" in err, err
    assert "no launcher named, so these are CPU-hours here (launcher=" in err and "launcher=slurm for GPU-hours" in err
    code, out, err = dw_in_process(capsys, "suggest", "g", "launcher=slurm", "--budget", "1e-12", "--no-write")
    assert code == 2 and err.count("\n") == 1 and "cheapest candidate's" in err and "no launcher named" not in err
