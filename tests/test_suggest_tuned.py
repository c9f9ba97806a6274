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
