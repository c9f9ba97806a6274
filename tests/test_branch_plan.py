"""Runs cost what the plan says: WSD decay branches fork from the trunk under the warm-ups the
shipped sweeps use (a fractional warm-up resolves against the whole run), so the optimizer steps a
run trains equal the steps its plan counts (dry run, summary's flops_planned)."""

from __future__ import annotations

import pytest

from depthwidth.train import optim
from tests.test_train import TINY, _summary


def _count_steps(monkeypatch) -> list:
    """Every optimizer step a Trainer takes (main run and decay branches), counted."""
    from depthwidth.train.trainer import Trainer

    taken: list = []
    real = Trainer.train_step

    def counted(self, lr, probe):
        taken.append(lr)
        return real(self, lr, probe)

    monkeypatch.setattr(Trainer, "train_step", counted)
    return taken


def _train(args):
    from depthwidth.config.compose import compose
    from depthwidth.train.trainer import train

    return train(compose(list(args)), log=lambda m: None)


def test_demo_run_trains_the_steps_its_dry_run_plans(tmp_path, monkeypatch):
    """sweeps/demo.yaml: wsd, budgets at 75 and 150 of 300 steps, warm-up left at its 0.02 fraction
    (6 steps of the run; 2 and 3 of the budgets' own).  The branches fork at 60 and 120 and train 15
    and 30 steps: 345 in all, as the dry run and the summary plan; before, both forked at step 0 and
    the run trained 525."""
    from depthwidth.sweep.submission import plan

    p = plan("demo", data="skip")
    run = min(p.runs, key=lambda r: r.figures["params"])  # the demo's 1 x 32 model
    assert run.figures["steps"] == 300 and run.figures["steps_planned"] == 345
    assert [(b.steps, b.branch_at) for b in optim.plan_budgets([38400, 76800], 300, 512, run.cfg.optim)] == [
        (75, 60),
        (150, 120),
        (300, None),
    ]
    taken = _count_steps(monkeypatch)
    overrides = [o for o in run.overrides if not o.startswith(("train.analyze_at_end", "probe.entropy_every"))]
    s = _train([*overrides, "train.analyze_at_end=false", "probe.entropy_every=0", f"run.dir={tmp_path / 'r'}"])
    assert s["status"] == "done" and [b["step"] for b in s["budgets"]] == [75, 150, 300]
    assert len(taken) == run.figures["steps_planned"] == 345
    assert s["flops_planned"] == pytest.approx(run.figures["flops_planned"], rel=1e-12)
    assert s["flops_planned"] == pytest.approx(345 * 512 * s["flops_per_token"], rel=1e-12)


def test_depth_delusion_tuned_large_block_branches_fork_from_the_trunk():
    """The large block: budgets [1e10] on wsd, warm-up not given in steps (the default 0.02).  Every
    branch forks where its decay starts; the dry run's planned steps are the trunk's plus the decay."""
    from depthwidth.sweep.submission import plan

    p = plan("depth_delusion_tuned", ["launcher=slurm"], only="large", data="skip")
    assert len(p.runs) == 14 * 5
    for r in p.runs:
        f, o = r.figures, r.cfg.optim
        assert float(o.warmup) < 1  # a fraction
        per = int(r.cfg.train.batch_size) * int(r.cfg.train.seq_len)
        budgets = optim.plan_budgets(list(r.cfg.train.budgets), f["steps"], per, o)
        branch = budgets[0]
        assert branch.branch_at == optim.decay_start(branch.steps, o) > 0
        assert f["steps_planned"] == f["steps"] + branch.steps - branch.branch_at


def test_large_block_settings_on_a_tiny_model_train_the_planned_steps(tmp_path, monkeypatch):
    """The large block's settings at a size that trains here: wsd, the default fractional warm-up and
    decay, one budget at the 1B run's 1e10 of 22.1B tokens (45 of 100 steps).  100 + 9 steps trained,
    as planned (before: the branch retrained from step 0, 145)."""
    tps = 8 * 64
    budget = round(100 * 1.0e10 / 22.1e9) * tps
    taken = _count_steps(monkeypatch)
    args = [*TINY, "optim.schedule=wsd", "train.steps=100", f"train.budgets=[{budget}]"]
    s = _train([*args, f"run.dir={tmp_path / 'r'}"])
    assert [b["step"] for b in s["budgets"]] == [45, 100]
    assert len(taken) == 109 == s["flops_planned"] / (tps * s["flops_per_token"])


def test_branch_equals_the_standalone_run_with_the_trunks_warmup(tmp_path):
    """A fractional warm-up (the default 0.02) resolves against the whole run: 2 steps of 100, for the
    branches too.  Each branch equals the run trained to its budget alone with that warm-up in steps,
    and leaves the main run as it was."""
    tps = 8 * 64
    common = [*TINY, "optim.schedule=wsd", "optim.decay_fraction=0.25"]
    main, short, long = tmp_path / "main", tmp_path / "short", tmp_path / "long"
    _train([*common, "train.steps=100", f"train.budgets=[{40 * tps},{50 * tps}]", f"run.dir={main}"])
    _train([*common, "train.steps=40", "optim.warmup=2", f"run.dir={short}"])
    branches = _summary(main)["budgets"]
    assert [b["step"] for b in branches] == [40, 50, 100]
    assert branches[0]["val_loss"] == _summary(short)["final_val_loss"]
    _train([*common, "train.steps=100", f"run.dir={long}"])
    assert _summary(long)["final_val_loss"] == branches[2]["val_loss"]
