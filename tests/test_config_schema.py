"""One typed schema (depthwidth/config/schema.py) for train, optim, probe, run,
launcher and tracker: ``dw train`` and ``dw sweep`` reject the same settings
with the same one-line message, and write nothing."""

from __future__ import annotations

import json
import typing

import pytest

from depthwidth.config import schema
from depthwidth.config.check import check_group
from depthwidth.config.compose import group_options, load_group
from tests.helpers import dw

# (override(s), the setting the message must name).  At least two per group.
INVALID = [
    (["train.log_every=0"], "train.log_every"),
    (["train.device=tpu"], "train.device"),
    (["train.budgets=[1e15]"], "train.budgets"),
    (["train.threads=-1"], "train.threads"),
    (["train.eval_batches=0"], "train.eval_batches"),
    (["train.batch_size=0"], "train.batch_size"),
    (["train.precision=fp16"], "train.precision"),
    (["train.steps=abc"], "train.steps"),
    (["train.tokens=-5"], "train.tokens"),
    (["train.compile=maybe"], "train.compile"),
    (["optim.lr=0"], "optim.lr"),
    (["optim.schedule=linear"], "optim.schedule"),
    (["optim.betas=[0.9]"], "optim.betas"),
    (["optim.betas=[0.9,1.5]"], "optim.betas"),
    (["optim.weight_decay=-1"], "optim.weight_decay"),
    (["optim.decay_fraction=2"], "optim.decay_fraction"),
    (["optim.warmup=-1"], "optim.warmup"),
    (["probe.every=-1"], "probe.every"),
    (["probe.at=[0]"], "probe.at"),
    (["run.seed=abc"], "run.seed"),
    (["launcher=local", "launcher.workers=0"], "launcher.workers"),
    (["launcher=local", "launcher.gpus=some"], "launcher.gpus"),
    (["launcher=slurm", "launcher.time=soon"], "launcher.time"),
    (["launcher=slurm", "launcher.array_parallelism=0"], "launcher.array_parallelism"),
    (["tracker=wandb", "tracker.mode=bogus"], "tracker.mode"),
    (["tracker=wandb", "tracker.project=a/b"], "tracker.project"),
    (["tracker=wandb", "tracker.project='runs#1'"], "tracker.project"),
    (["tracker=wandb", "tracker.project=what?"], "tracker.project"),
    (["tracker=wandb", "tracker.project=" + "p" * 129], "tracker.project"),
    (["tracker=wandb", "tracker.entity=me:you"], "tracker.entity"),
    (["tracker=wandb", "tracker.entity=a\\b"], "tracker.entity"),
    (["tracker=wandb", "tracker.init_timeout=0"], "tracker.init_timeout"),
    (["tracker=wandb", "tracker.probes=all"], "tracker.probes"),
]


def _dw(capsys, argv) -> tuple[int, str]:
    """dw in this process (fast; the subprocess path is covered below): (exit code, stderr)."""
    from depthwidth.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


@pytest.fixture(scope="module")
def demo_run0():
    """The override list of the demo sweep's first run, so `dw train` sees exactly that run."""
    p = dw("sweep", "demo", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    return [o for o in json.loads(p.stdout)["runs"][0]["overrides"] if not o.startswith(("run.dir=", "run.sweep="))]


@pytest.mark.parametrize("bad, setting", INVALID, ids=[" ".join(b) for b, _ in INVALID])
def test_train_and_sweep_reject_the_same_setting_with_the_same_line(
    bad, setting, demo_run0, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    run_dir = tmp_path / "one"
    code, err = _dw(capsys, ["train", *demo_run0, *bad, f"run.dir={run_dir}"])
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    message = lines[0].removeprefix("dw: error: ")
    assert setting in message
    code, err = _dw(capsys, ["sweep", "demo", *bad, "--dry-run"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert message in err  # the same message; a run's error also names the run
    assert "launcher." in setting or "run 0 (" in err
    assert not run_dir.exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("bad", [["train.log_every=0"], ["launcher=local", "launcher.workers=0"]])
def test_a_real_sweep_submits_nothing_on_a_bad_setting(bad, tmp_path):
    p = dw("sweep", "demo", *bad, env={"DW_RUNS": str(tmp_path / "runs")})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "runs" / "demo" / "manifest").exists()
    assert not (tmp_path / "runs" / "demo" / "jobs").exists()


def _options():
    for group in (*schema.GROUPS, *schema.VARIANTS):
        for opt in group_options(group) or [None]:  # None: the group lives in conf/config.yaml
            yield group, opt


@pytest.mark.parametrize("group, option", list(_options()))
def test_every_yaml_key_has_a_typed_field_and_the_defaults_pass(group, option):
    from omegaconf import OmegaConf

    if option is None:
        node = schema.base_nodes()[(None, "_base")][group]
    else:
        node = OmegaConf.to_container(load_group(group, option), resolve=False)
    cls = schema.schema_of(group, node)
    assert set(node) == set(schema.field_map(cls))
    check_group(group, node)
    for name, tp in typing.get_type_hints(cls).items():  # every field is typed
        assert tp is not typing.Any, name


def test_schema_messages_name_type_and_range():
    with pytest.raises(Exception) as e:
        check_group("train", {**_train_defaults(), "log_every": 0})
    assert str(e.value) == "bad value for train.log_every: 0 (allowed: an integer >= 1)"
    with pytest.raises(Exception) as e:
        check_group("optim", {**_optim_defaults(), "min_lr_ratio": 1.5})
    assert str(e.value) == "bad value for optim.min_lr_ratio: 1.5 (allowed: a number >= 0 and <= 1)"
    with pytest.raises(Exception) as e:
        check_group("train", {**_train_defaults(), "surprise": 1})
    assert "unknown setting train.surprise" in str(e.value)
    with pytest.raises(Exception) as e:
        check_group("launcher", {"name": "kubernetes"})
    assert str(e.value) == "bad value for launcher: 'kubernetes' (allowed: debug|local|slurm)"


def _train_defaults():
    return schema.defaults(schema.Train)


def _optim_defaults():
    from omegaconf import OmegaConf

    return OmegaConf.to_container(load_group("optim", "adamw"))
