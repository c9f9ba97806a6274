"""The one composer (config/compose.py, #35 item 3): ``dw train``, ``dw config show``, the workers
and ``dw sweep`` compose through it, Hydra's compose is only its oracle here, and the result is
the typed ``RunConfig``.  Every override form dw train took through Hydra gives Hydra's config."""

from __future__ import annotations

import subprocess
import sys

import pytest

from depthwidth.config import schema
from depthwidth.config.compose import compose, compose_parts
from depthwidth.config.node import Node, RunConfig, plain, run_config
from depthwidth.config.overrides import parse_cli_overrides
from depthwidth.core.errors import BadInput
from tests.helpers import REPO
from tests.hydra_oracle import hydra_compose

SAME_AS_HYDRA = [
    [],
    ["model=vwt_1b", "optim=vwt"],
    ["model.depth=3", "model=vwt"],  # group choices first, whatever the order, as Hydra
    ["model=vwt", "model=vwt_1b"],
    ["data=synthetic", "data.order=1"],
    ["launcher=slurm", "launcher.time=10", "tracker=wandb", "tracker.tags=[a,b]"],
    ["+model.newkey=1", "~model.newkey"],  # a deletion: of a key the schema lacks
    ["+train.x=1", "~train.x=1"],
    ["+train.step=5"],  # additions (check names the typo later)
    ["+model.newkey=1", "++model.depth=3", "++train.foo=1"],
    ["model.width=${model.depth}"],  # interpolations: plain, in a string, a resolver
    ["run.dir=x${model.depth}"],
    ["run.dir=${oc.env:HOME}"],
    ["model.width=3 2", "run.dir='a b'", "model.widths=null", "optim.betas=[0.8,0.9]", "train.budgets=[1e6,2e6]"],
    # a mapping for a group or a section merges its keys in (was refused: "bad value for config group")
    ["model={depth:3}"],
    ["model=vwt", "model={depth:3,widths:[1,2]}"],
    ["model={depth:3}", "model=vwt"],  # into the option chosen, whatever the order
    ["train={steps:5}", "run={dir:/tmp/q}"],
    ["+model={depth:3,newkey:1}", "++train={steps:5}", "model={}", "+model={}"],
    ["model={depth:{a:1}}"],  # one level: depth becomes the mapping, as Hydra merges it
    ["+model.widths=[1,2]", "+model.newkey={a:1}"],  # + on a null setting, + of a mapping: Hydra's adds
]


@pytest.mark.parametrize("overrides", SAME_AS_HYDRA, ids=[" ".join(o) or "root" for o in SAME_AS_HYDRA])
def test_every_override_form_composes_as_hydra_does(overrides):
    cfg = compose(overrides)
    assert type(cfg) is RunConfig
    assert cfg.to_dict() == plain(cfg) == hydra_compose(overrides)


@pytest.mark.parametrize(
    "overrides, said",
    [
        (["~model.width=3"], "Could not delete from config. The value of 'model.width' is 512 and not 3."),
        (["~nosuch.key"], "Could not delete from config. 'nosuch.key' does not exist."),
        (["model.width=32,64"], "a sweep of values goes in a sweep file: dw sweep"),
        (["model.width=range(1,3)"], "a sweep of values goes in a sweep file"),
        (["model=null"], "bad value for config group model: None (allowed: depth_delusion, "),
        (["data=[a]"], "bad value for config group data: ['a'] (allowed: memmap, pydoc, "),
        (["nosuch=[a]"], "unknown config group 'nosuch'"),
        (["hydra.job.name=x"], "unknown config key 'hydra.job.name'"),
        (["model.width=${nosuch.key}"], "config does not resolve: ${nosuch.key} names no key"),
        (["run.dir=x${nosuch.key}"], "config does not resolve: "),
        (["~model.width"], "model.width is a setting with a default; set it instead (model.width=VALUE)"),
        (["~model.width=512"], "model.width is a setting with a default"),  # Hydra: a traceback in the trainer
        (["~train.budgets"], "train.budgets is a setting with a default"),
        (["~launcher"], "a run has every group; choose another option instead (launcher=OPTION)"),
        (["~data"], "a run has every group"),
        (["~train"], "a run has every section; set its keys instead (train.KEY=VALUE)"),
        (["~probe"], "a run has every section"),
        (["train=5"], "bad value for config section train: 5 (allowed: train.KEY=VALUE or train={KEY: VALUE}"),
        (["model={nosuch:3}"], "unknown config key 'model.nosuch'"),  # Hydra: "Could not override 'model'"
        (["model@x=vwt"], "bad value for override: 'model@x=vwt' (allowed: model=VALUE with no package (@x)"),
        (["~model@x"], "no package (@x)"),
        (["model.depth@x=3"], "no package (@x)"),
        (["+model.depth=3"], "model.depth exists: model.depth=3 sets it, ++model.depth=3 adds or sets it"),
        (["+train.steps=5"], "'+train.steps=5' (allowed: train.steps exists"),
        (["++model=vwt"], "'++model=vwt' (allowed: model=vwt; force-add of config groups is not supported)"),
        (["nosuch=1"], "unknown config group 'nosuch' (groups: data, "),  # no stray ": ("
        (["model/vwt=x"], "(did you mean model? groups: data, launcher, model, optim, tracker; e.g. model=vwt, "),
    ],
)
def test_what_hydra_refused_is_refused_in_one_line(overrides, said):
    with pytest.raises(BadInput) as e:
        compose(overrides)
    assert said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "overrides",
    [["model@x=vwt"], ["+model.depth=3"], ["++model=vwt"], ["train=5"], ["~train"], ["nosuch=1"], ["model/vwt=x"]],
)
def test_hydra_refused_it_too(overrides):
    """Each form refused above, Hydra refused as well, or (train=5, ~train) composed a config with
    no train settings, which the trainer could not run."""
    if overrides[0] in ("train=5", "~train"):
        assert not isinstance(hydra_compose(overrides).get("train"), dict)
        return
    with pytest.raises(Exception):
        hydra_compose(overrides)


def test_a_mapping_for_a_group_is_the_same_in_a_sweep():
    """dw sweep composes what dw train does: a mapping on a sweep's command line or as a sweep
    file's group value sets its keys."""
    want = compose(["model=vwt", "model.depth=3", "train.steps=5"])
    assert compose_parts(*parse_cli_overrides(["model={depth:3}", "model=vwt", "train={steps:5}"])) == want
    assert compose_parts({"model": "vwt", "train": {"steps": 5}}, {"model.depth": 3}) == want
    groups = {"model": {"depth": 3}}
    assert compose_parts(groups, {}) == compose(["model.depth=3"]) and groups == {"model": {"depth": 3}}
    with pytest.raises(BadInput, match="no package"):
        parse_cli_overrides(["model@x=vwt"])


def test_the_run_config_s_type_hints_resolve():
    import typing

    hints = typing.get_type_hints(RunConfig)
    assert hints["train"] is schema.Train and hints["model"] is schema.Model


def test_a_sweeps_command_line_takes_no_deletion_and_no_sweep():
    for o in ("~model.width", "model.width=1,2"):
        with pytest.raises(BadInput, match="bad value for override"):
            parse_cli_overrides([o])


def test_a_mapping_merges_into_an_empty_mapping_setting():
    """Hydra's struct mode refused launcher.additional={exclude: n1} on an empty ``additional``."""
    cfg = compose(["launcher=slurm", "launcher.additional={exclude:n1,nice:10}"])
    assert cfg.launcher.additional == {"exclude": "n1", "nice": 10}


def test_compose_is_compose_parts_of_the_parsed_overrides():
    a = compose(["model=vwt", "model.depth=3", "+train.step=5"])
    b = compose_parts({"model": "vwt"}, {"model.depth": 3, "+train.step": 5})
    assert a == b and type(b) is RunConfig and a is not b


def test_the_run_config_is_typed():
    cfg = compose(["model=vwt_1b", "data=synthetic", "launcher=slurm"])
    assert cfg.train.seq_len == cfg["train"]["seq_len"] == schema.Train().seq_len  # attribute access
    m = cfg.typed("model")
    assert isinstance(m, schema.Model) and m.depth == cfg.model.depth
    assert isinstance(cfg.typed("data"), schema.SyntheticData)
    assert isinstance(cfg.typed("launcher"), schema.SlurmLauncher)
    assert type(cfg.to_dict()) is dict and type(cfg.to_dict()["model"]) is dict
    with pytest.raises(TypeError):  # a key the schema lacks: check() names it before anyone types it
        compose(["+train.step=5"]).typed("train")


def test_run_config_types_any_mapping_and_keeps_a_node_tree_itself():
    node = Node(train=Node(precision="auto"))
    assert run_config(node) is node and type(node) is RunConfig
    cfg = compose([])
    assert run_config(cfg) is cfg
    copied = run_config(cfg.to_dict())
    assert type(copied) is RunConfig and copied == cfg and type(copied.model) is Node


def test_dw_train_s_composition_imports_no_hydra_compose():
    """Hydra's parser reads the override strings; its compose (config search path, defaults tree,
    ConfigStore) is on no runtime path; with no overrides nothing of Hydra is imported."""
    code = (
        "import sys\n"
        "from depthwidth.config.compose import compose\n"
        "compose([])\n"
        "assert 'hydra' not in sys.modules, 'hydra'\n"
        "compose(['model.depth=3'])\n"
        "from hydra.core.global_hydra import GlobalHydra\n"
        "assert not GlobalHydra.instance().is_initialized()\n"
        "print('ok')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


BAD_FORMS = ["model@x=vwt", "+model.depth=3", "++model=vwt", "~train", "model/vwt=x", "nosuch=1", "train=5"]


@pytest.mark.parametrize("arg", BAD_FORMS)
def test_dw_config_show_refuses_in_one_line(arg, capsys):
    """A deletion (``~train``: no '=') is an override too, not a group's name to show."""
    from tests.helpers import dw_in_process

    code, out, err = dw_in_process(capsys, "config", "show", arg)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "unknown config group '~train'" not in err


def test_dw_train_refuses_in_one_line(tmp_path):
    from tests.helpers import assert_bad_input, run_dw

    env = {"DW_RUNS": str(tmp_path / "runs")}
    for i, arg in enumerate(("model@x=vwt", "+model.depth=3", "train=5")):
        line = assert_bad_input(run_dw("train", arg, "tracker=none", f"run.dir={tmp_path / str(i)}", env=env))
        assert arg in line or "train: 5" in line
