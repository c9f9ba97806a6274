"""WSD decay branches under faults: a stop signal inside a branch, and branches
that must equal the standalone run of their budget (in-process runs, real signals)."""

from __future__ import annotations

import os
import signal

import pytest

from tests.test_train import TINY, _metrics, _summary

TPS = 8 * 64  # tokens per step of TINY


def _train(args, log=None):
    from depthwidth.config.compose import compose
    from depthwidth.train.trainer import train

    return train(compose(list(args)), log=log or (lambda m: None))


def test_usr2_inside_a_branch_checkpoints_the_branch_and_resume_continues_it(tmp_path, monkeypatch):
    """The branch to step 16 forks at step 12; SIGUSR2 lands during branch step 13.  The run must
    stop there (not train the rest of the branch first), and the resumed run must continue the
    branch from its checkpoint and end exactly as an uninterrupted run."""
    import depthwidth.train.optim as optim_mod
    from depthwidth.train.trainer import Preempted

    common = [
        *TINY,
        "optim.schedule=wsd",
        "optim.warmup=4",
        "optim.decay_fraction=0.25",
        "train.steps=24",
        f"train.budgets=[{16 * TPS}]",
        "train.ckpt_every=100",
    ]
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    _train([*common, f"run.dir={ref}"])

    real, branch_steps = optim_mod.lr_at, []

    def lr_and_signal(step, total, o, *rest):  # rest: tokens per step
        if total == 16:  # only the branch asks for a 16-step schedule
            branch_steps.append(step)
            if step == 13:
                os.kill(os.getpid(), signal.SIGUSR2)  # arrives while branch step 13 trains
        return real(step, total, o, *rest)

    monkeypatch.setattr(optim_mod, "lr_at", lr_and_signal)
    with pytest.raises(Preempted, match="decay branch"):
        _train([*common, f"run.dir={cut}"])
    monkeypatch.setattr(optim_mod, "lr_at", real)
    assert branch_steps == [12, 13]  # nothing of the branch after the signal's step
    s = _summary(cut)
    assert s["status"] == "preempted" and s["steps"] == 12
    assert sorted(p.name for p in (cut / "ckpt").iterdir()) == ["branch_00000016", "step_00000012"]
    assert [p.name for p in (cut / "ckpt" / "branch_00000016").iterdir()] == ["step_00000014"]

    logs: list[str] = []
    _train([*common, f"run.dir={cut}"], log=logs.append)
    assert any("resuming run" in m and "from step 12" in m for m in logs), logs
    assert any("decay branch to step 16 at step 14" in m for m in logs), logs
    a, b = _summary(ref), _summary(cut)
    assert b["status"] == "done"
    assert a["budgets"] == b["budgets"] and a["final_val_loss"] == b["final_val_loss"]
    assert _metrics(cut) == _metrics(ref)
    assert not (cut / "ckpt" / "branch_00000016").exists()  # a finished branch leaves no checkpoint
