"""``dw suggest`` on a tuned sweep (#36 item 4: the fit's own selection, ``--tuned``): a candidate is a
whole tuning group, since ``dw fit --tuned`` fits each group's best and a run at one learning rate
measures no point of the law.  Before, every learning rate of a configuration was a candidate of its
own, predicted at the law's (best-rate) loss, and the next file's runs were no tuning group."""

import json

import pytest
import yaml

from depthwidth.fit.pipeline import run_fit
from tests.helpers import REPO, dw_in_process


@pytest.fixture
def tuned_store(tmp_path, monkeypatch):
    """depth_delusion_tuned (30 configurations × 5 learning rates) planted under chinchilla and fitted
    (dw simulate records the tuning groups and plants a learning-rate optimum, so the fit is of each
    group's best; the candidates are what the sweep file's tune: makes them)."""
    from depthwidth.simulate import simulate

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    doc = yaml.safe_load((REPO / "sweeps" / "depth_delusion_tuned.yaml").read_text())
    (d / "t_init.yaml").write_text(yaml.safe_dump(doc))
    (d / "t.yaml").write_text(yaml.safe_dump({**doc, "store": "t-sim"}))
    simulate("t_init", name="t-sim", law="chinchilla", seed=1)
    res = run_fit("t-sim", law="chinchilla", bootstrap=40, max_starts=300)
    assert res["tuning"]["groups"] == 30  # a simulated tuned sweep is fitted as a tuned one
    return d


def test_a_tuned_sweeps_candidates_are_whole_tuning_groups_and_the_next_file_tunes_them(tuned_store, capsys):
    from depthwidth.sweep.expand import expand
    from depthwidth.sweep.suggest import candidates

    code, out, err = dw_in_process(capsys, "suggest", "t", "--budget", "1e5", "--target", "alpha", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["unit"] == "tuning groups" and doc["runs"]
    assert any(n.startswith("a tuned sweep: each candidate is a tuning group") for n in doc["notes"])
    runs, _ = candidates("t")
    group_hours: dict = {}
    for r in runs:
        group_hours[r.group] = group_hours.get(r.group, 0.0) + r.figures["device_hours"]
    ids = [p["run_id"] for p in doc["runs"]]
    assert len(set(ids)) == len(ids) and set(ids) <= set(group_hours)  # a pick is a group, once
    for p in doc["runs"]:
        assert p["hours"] == pytest.approx(group_hours[p["run_id"]], rel=1e-12)  # all its runs' cost
        assert not any(o.startswith("optim.lr=") for o in p["overrides"])
    assert sum(p["hours"] for p in doc["runs"]) <= 1e5
    # the next file is a tuned sweep: each picked group expands again into its 5 learning rates
    nxt = expand("t_next")
    assert {r.group for r in nxt.runs} == set(ids)
    for g in ids:
        rates = sorted(r.tuned["optim.lr"] for r in nxt.runs if r.group == g)
        assert len(rates) == 5 and rates[0] == pytest.approx(1e-4) and rates[-1] == pytest.approx(1e-3)
    assert {r.run_id for r in nxt.runs} <= {r.run_id for r in runs}  # the very runs the candidates were
    code, out, err = dw_in_process(capsys, "suggest", "t", "--budget", "1e5", "--target", "alpha", "--no-write")
    assert code == 0, err  # the summary counts candidates as groups, and what the store holds as runs
    said = (
        f"{doc['candidates']} candidates (tuning groups); runs already in the store {doc['candidates_in_store']}, "
        f"refused by the plan {doc['candidates_refused']})"
    )
    assert doc["candidates_in_store"] == 150 and said in " ".join(out.split())  # the 30 groups' 5 rates each


def test_the_next_file_keeps_a_tuned_blocks_groups_apart_from_an_untuned_blocks_runs(tmp_path, monkeypatch):
    """Two unlabelled blocks, one tuned and one not: each picked group expands again into its own
    runs, and each untuned pick stays the run it was (review of 2026-12-05: both blocks resolved to
    the first, so the untuned picks took its tune: and new run ids)."""
    from types import SimpleNamespace

    from depthwidth.sweep.expand import expand
    from depthwidth.sweep.file import load_file
    from depthwidth.sweep.suggest import _unit_pick, candidates, tuning_units, write_next

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    demo = yaml.safe_load((REPO / "sweeps" / "demo_tuned.yaml").read_text())
    doc = {
        "description": "two blocks, one tuned",
        "groups": demo["groups"],
        "fixed": demo["fixed"],
        "blocks": [
            {"axes": {"model.width": [32, 64]}, "tune": {"optim.lr": [1.0e-3, 1.0e-2]}},
            {"axes": {"model.width": [48, 96]}},
        ],
    }
    (d / "two.yaml").write_text(yaml.safe_dump(doc))
    runs, _ = candidates("two")
    picks = [_unit_pick(u) for u in tuning_units(runs)]
    assert any(p.group for p in picks) and not all(p.group for p in picks)  # every candidate picked, both kinds
    n = len(picks)
    s = SimpleNamespace(
        source=SimpleNamespace(doc=load_file("two"), store="two", ensemble=SimpleNamespace(source="prior published")),
        target=SimpleNamespace(spec="alpha"),
        runs=picks,
        predicted={"loss": [3.0] * n, "pi": [[2.9] * n, [3.1] * n]},
        budget=1.0,
    )
    write_next("two", s)
    nxt = expand("two_next").runs
    groups = {p.group for p in picks if p.group}
    assert {r.group for r in nxt if r.group} == groups
    assert {r.run_id for r in nxt} == {r.run_id for r in runs}  # the very runs the candidates were
    for g in groups:  # each group its two tuned rates again
        assert sorted(r.tuned["optim.lr"] for r in nxt if r.group == g) == pytest.approx([1e-3, 1e-2])
    assert not any(r.tuned for r in nxt if not r.group)  # an untuned pick is not tuned


def _plant_begun(tmp_path, monkeypatch, leave_out: int = 0):
    """depth_delusion_tuned planted at 3 of its 5 learning rates (the first, middle and last) and
    fitted: every group of t_init is begun, its other 2 rates not in the store (a tune: grid widened
    after the first runs); t_init leaves out the small block's first ``leave_out`` configurations."""
    from depthwidth.simulate import simulate
    from depthwidth.sweep.expand import expand

    d = tmp_path / "sweeps"
    d.mkdir()
    monkeypatch.setenv("DW_SWEEPS", str(d))
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    doc = yaml.safe_load((REPO / "sweeps" / "depth_delusion_tuned.yaml").read_text())
    (d / "t.yaml").write_text(yaml.safe_dump({**doc, "store": "t-sim"}))
    rates = sorted({r.tuned["optim.lr"] for r in expand("t").runs})
    assert len(rates) == 5
    tune = {**doc["tune"], "optim.lr": [rates[0], rates[2], rates[4]]}
    small, *rest = doc["blocks"]
    blocks = [{**small, "runs": small["runs"][leave_out:]}, *rest]
    (d / "t_init.yaml").write_text(yaml.safe_dump({**doc, "tune": tune, "blocks": blocks}))
    simulate("t_init", name="t-sim", law="chinchilla", seed=1)
    res = run_fit("t-sim", law="chinchilla", bootstrap=40, max_starts=300)
    assert res["tuning"]["groups"] == 30 - leave_out  # the fit has every group's best so far (of 3 rates)
    return d


@pytest.fixture
def begun_store(tmp_path, monkeypatch):
    """``_plant_begun``: every group of the file begun."""
    return _plant_begun(tmp_path, monkeypatch)


def test_a_tuning_group_the_store_has_begun_is_not_proposed_as_a_new_point_and_is_said_apart(begun_store, capsys):
    """A group with some of its rates in the store: dw fit --tuned already fits its best so far, so its
    missing runs would complete a point the fit has, not add one (review of 2026-12-05: such a group
    was a candidate priced at its missing runs alone and valued as a new point of the law)."""
    from depthwidth.sweep.expand import expand
    from depthwidth.sweep.suggest import candidates

    runs, counts = candidates("t")
    begun = {r.group for r in expand("t_init").runs}
    missing = [
        r
        for r in expand("t").runs
        if r.group in begun and r.tuned["optim.lr"] not in {x.tuned["optim.lr"] for x in expand("t_init").runs}
    ]
    assert len(begun) == 30 and len(missing) == 60
    assert not {r.group for r in runs} & begun  # no candidate completes a begun group
    assert counts["in_store"] == 90
    assert counts["partial_groups"] == {
        "groups": 30,
        "runs": 60,
        "hours": pytest.approx(sum(r.figures["device_hours"] for r in missing), rel=1e-9),
    }
    code, out, err = dw_in_process(capsys, "suggest", "t", "--budget", "1e5", "--target", "alpha", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["runs"] and not {p["run_id"] for p in doc["runs"]} & begun
    assert doc["candidates_partial_groups"]["groups"] == 30
    code, out, err = dw_in_process(capsys, "suggest", "t", "--budget", "1e5", "--target", "alpha", "--no-write")
    assert code == 0, err
    said = [ln for ln in out.splitlines() if "tuning groups the store has begun" in ln]
    assert len(said) == 1 and said[0].startswith("note: 30 tuning groups the store has begun are not candidates")
    assert "their other 60 runs" in said[0] and "best so far" in said[0]


def test_a_tuned_dry_run_values_each_tuning_group_as_one_unit(tmp_path, monkeypatch, capsys):
    """The dry run's value/h and CI after on a tuned sweep are each group's: its runs' device-hours
    together and one point of the law, the same on each of its runs (review of 2026-12-05: each run at
    one learning rate was valued alone, as if it measured a point of the law at a fifth of the cost)."""
    import numpy as np

    from depthwidth.fit.laws import get_law
    from depthwidth.fit.predict import design, parse_target
    from depthwidth.fit.prior import prior

    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    args = ("sweep", "depth_delusion_tuned", "--dry-run", "--no-data-check", "--prior", "published")
    code, out, err = dw_in_process(capsys, *args, "--target", "dcrit@1024", "--json")
    assert code == 0, err
    doc = json.loads(out)
    rows = [r for r in doc["runs"] if r.get("prediction")]
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    assert len(groups) == 30 and all(len(g) == 5 for g in groups.values())
    law = get_law("depth-delusion")
    one = [members[0] for members in groups.values()]
    cost = np.array([sum(r["device_hours"] for r in members) for members in groups.values()])
    table = [{k: r[k] for k in ("depth", "width", "params", "params_non_embedding", "tokens")} for r in one]
    d = design(prior(law, "published"), parse_target("dcrit@1024", law), table, cost, k=0)
    got = np.array([r["prediction"]["value_per_hour"] for r in one])
    assert np.allclose(got, d.value, rtol=1e-9)  # the group's value at the group's cost
    after = [np.inf if r["prediction"]["interval_after"] is None else r["prediction"]["interval_after"] for r in one]
    assert np.allclose(after, d.width_alone, rtol=1e-9)  # the promise: from the prior, one group alone is "—"
    for g, members in groups.items():
        figures = {(r["prediction"]["value_per_hour"], r["prediction"]["interval_after"]) for r in members}
        assert len(figures) == 1, g  # every run of a group shows the group's figures
        assert all(r["prediction"]["value_of"] == g for r in members)
    assert any(
        n.startswith("a tuned sweep: CI after and value/h are each tuning group's") for n in doc["prediction"]["notes"]
    )
    code, out, err = dw_in_process(capsys, *args, "--target", "dcrit@1024")
    assert code == 0, err
    assert "note: a tuned sweep: CI after and value/h are each tuning group's" in " ".join(out.split())


def test_a_tuned_dry_run_values_no_group_the_store_has_begun(begun_store):
    """A group with some rates measured: the fit has its best so far, and its other runs are not
    valued as a new point (as dw suggest does not propose them); the note says how many."""
    from depthwidth.sweep.dry_run import dry_run_predictions
    from depthwidth.sweep.expand import expand

    cols = ("depth", "width", "params", "params_non_embedding", "tokens", "device_hours")
    rows = [{"run_id": r.run_id, "group": r.group, **{k: r.figures[k] for k in cols}} for r in expand("t").runs]
    pred = dry_run_predictions(
        "t", rows, None, "alpha"
    )  # what dw sweep t --dry-run shows (a simulated store it refuses)
    assert len(rows) == 150 and sum(r["prediction"]["measured"] is not None for r in rows) == 90
    assert all(r["prediction"]["value_per_hour"] is None and r["prediction"]["interval_after"] is None for r in rows)
    note = next(n for n in pred["notes"] if n.startswith("a tuned sweep"))
    assert "30 groups begun (some runs measured) are not valued" in note and "their other 60 runs" in note


def test_a_group_in_the_store_but_not_measured_is_begun_for_neither_dw_suggest_nor_the_dry_run(tmp_path, monkeypatch):
    """#36 "unify": dw suggest counted a tuning group begun when any of its runs was in the store, the
    dry run when one was measured, so a group whose one run was submitted (or running, or failed) was
    left out of dw suggest's candidates as "a point the fit has" while the dry run valued it as a new
    one.  dw fit --tuned fits each group's best measured run: such a group is no point of the fit
    yet, and both now value it (sweep/suggest.py ``begun_groups``, the one rule)."""
    from depthwidth.core import store
    from depthwidth.launch.status import status
    from depthwidth.sweep.dry_run import dry_run_predictions
    from depthwidth.sweep.expand import expand
    from depthwidth.sweep.suggest import begun_groups, candidates, measured_losses

    assert begun_groups([("g", "a"), ("g", "b"), ("h", "c"), (None, "d")], {"b", "d"}) == {"g"}
    _plant_begun(tmp_path, monkeypatch, leave_out=1)
    plan = expand("t").runs
    (g,) = {r.group for r in plan} - {r.group for r in expand("t_init").runs}  # 2L×256: none of it planted
    sent = next(r for r in plan if r.group == g)  # its first rate: submitted, never measured
    store.append_events(
        "t-sim",
        [
            {
                "event": "submit",
                "run_id": sent.run_id,
                "overrides": sent.overrides,
                "run_dir": str(store.sweep_dir("t-sim") / sent.run_id),
                "launcher": "simulate",
                "job_id": "simulate-pending",
                "index": sent.index,
                "group": g,
                "tuned": sent.tuned,
            }
        ],
    )
    assert sent.run_id in {r["run_id"] for r in status("t-sim")["runs"]}
    assert sent.run_id not in measured_losses("t-sim")
    runs, counts = candidates("t")
    assert counts["in_store"] == 29 * 3 + 1
    others = sorted(r.run_id for r in plan if r.group == g and r.run_id != sent.run_id)
    assert len(others) == 4 and sorted(r.run_id for r in runs if r.group == g) == others  # a candidate group
    assert counts["partial_groups"]["groups"] == 29 and counts["partial_groups"]["runs"] == 29 * 2
    have = {r["run_id"] for r in status("t-sim")["runs"]}
    begun_here = {r.group for r in plan if r.run_id not in have} - {r.group for r in runs}
    cols = ("depth", "width", "params", "params_non_embedding", "tokens", "device_hours")
    rows = [{"run_id": r.run_id, "group": r.group, **{k: r.figures[k] for k in cols}} for r in plan]
    pred = dry_run_predictions("t", rows, None, "alpha")
    mine = [r["prediction"] for r in rows if r["group"] == g]
    assert len(mine) == 5 and all(p["value_per_hour"] is not None and p["value_of"] == g for p in mine)
    begun_there = {r["group"] for r in rows if r["prediction"]["value_per_hour"] is None}
    assert begun_here == begun_there and len(begun_here) == 29 and g not in begun_here  # the one rule
    note = next(n for n in pred["notes"] if n.startswith("a tuned sweep"))
    assert "29 groups begun (some runs measured) are not valued" in note and "their other 58 runs" in note
