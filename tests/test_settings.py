"""One home for every setting (config/schema.py): no default stated twice, presets that
hold only what differs from their base, ``dw config show`` and the settings reference's table
generated from the schema."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from depthwidth.config import docs, schema
from depthwidth.config.compose import conf_dir, group_options, load_group
from depthwidth.core import devices
from tests.helpers import run_dw

ROOT = Path(__file__).resolve().parents[1]


def _schema_defaults() -> dict[str, list]:
    out: dict[str, list] = {}
    for g in schema.ALL_GROUPS:
        classes = [schema.GROUPS[g]] if g in schema.GROUPS else list(schema.VARIANTS[g].values())
        for cls in classes:
            for k, v in schema.defaults(cls).items():
                out.setdefault(k, []).append(v)
    return out


def restated_defaults(source: str, known: dict[str, list]) -> list[str]:
    """Calls ``x.get("KEY", V)`` / ``getattr(x, "KEY", V)`` whose V is a schema default of a setting
    named KEY: a second home for that default."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if not (isinstance(n, ast.Call) and n.args and isinstance(n.args[-1], ast.Constant)):
            continue
        fn = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        key_arg = n.args[1] if fn == "getattr" and len(n.args) == 3 else n.args[0] if len(n.args) == 2 else None
        if fn not in ("get", "getattr") or not isinstance(key_arg, ast.Constant):
            continue
        v = n.args[-1].value
        if v is not None and any(v == d and type(v) is type(d) for d in known.get(key_arg.value, [])):
            found.append((n.lineno, f"line {n.lineno}: {ast.unparse(n)}"))
    return [text for _, text in sorted(found)]


def test_the_scan_finds_a_restated_default():
    known = _schema_defaults()
    planted = 'q = int(m.get("quantum", 64))\nw = getattr(cfg, "workers", 2)\nok = d.get("quantum")\n'
    assert restated_defaults(planted, known) == ["line 1: m.get('quantum', 64)", "line 2: getattr(cfg, 'workers', 2)"]


def test_no_setting_has_a_default_outside_the_schema():
    known = _schema_defaults()
    bad = {}
    for p in sorted((ROOT / "depthwidth").rglob("*.py")):
        if p.name != "schema.py":
            hits = restated_defaults(p.read_text(), known)
            if hits:
                bad[str(p.relative_to(ROOT))] = hits
    assert not bad, f"defaults restated outside config/schema.py: {bad}"


def test_device_constants_are_defined_once():
    """Peak FLOP/s and the default GPU memory: core/devices.py, nowhere else."""
    for p in sorted((ROOT / "depthwidth").rglob("*.py")):
        if p.name == "devices.py":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Constant) and isinstance(n.value, float):
                assert n.value not in devices.PEAK_FLOPS.values(), f"{p}:{n.lineno} restates a peak FLOP/s"
    assert schema.defaults(schema.SlurmLauncher)["gpu_memory"] == devices.GPU_MEMORY_GIB


def _chain(group: str, name: str) -> tuple[dict, dict]:
    """(what the preset's bases give, the preset's own keys)."""
    from omegaconf import OmegaConf

    own = OmegaConf.to_container(OmegaConf.load(conf_dir() / group / f"{name}.yaml"), resolve=False)
    bases = [e for e in own.pop("defaults", []) if e != "_self_"]
    inherited: dict = {}
    for b in bases:
        node = schema.base_nodes().get((group, b)) or OmegaConf.to_container(load_group(group, b), resolve=False)
        inherited.update(node)
    return inherited, own


@pytest.mark.parametrize(
    "group, name", [(g, o) for g in ("model", "data", "optim", "launcher", "tracker") for o in group_options(g)]
)
def test_no_preset_repeats_a_key_it_inherits_with_the_same_value(group, name):
    inherited, own = _chain(group, name)
    assert inherited, f"conf/{group}/{name}.yaml names no base (defaults: [_base | _NAME | a preset])"
    same = {k: v for k, v in own.items() if k in inherited and inherited[k] == v and type(inherited[k]) is type(v)}
    assert not same, f"conf/{group}/{name}.yaml repeats what its base gives: {same}"
    unknown = set(own) - set(inherited)
    assert not unknown, f"conf/{group}/{name}.yaml sets keys its schema does not have: {unknown}"


def test_the_root_config_holds_no_setting_of_its_own():
    from omegaconf import OmegaConf

    root = OmegaConf.to_container(OmegaConf.load(conf_dir() / "config.yaml"))
    assert set(root) == {"defaults"} and "_base" in root["defaults"]


def test_the_paper_presets_inherit_their_recipe():
    assert _chain("model", "vwt_1b") == (
        {**_chain("model", "vwt_500m")[0], **_chain("model", "vwt_500m")[1]},
        {"preset": "vwt_1b", "depth": 32, "width": 1280},
    )
    assert _chain("model", "moe_1b3b")[1] == {"preset": "moe_1b3b", "mlp": "moe"}


def test_config_show_lists_every_field_of_every_group():
    proc = run_dw("config", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = {(r["key"], r["variant"]) for r in json.loads(proc.stdout)}
    want = set()
    for g in schema.ALL_GROUPS:
        classes = {None: schema.GROUPS[g]} if g in schema.GROUPS else schema.VARIANTS[g]
        want |= {(f"{g}.{f}", v) for v, cls in classes.items() for f in schema.field_map(cls)}
    assert shown == want
    model = {r["key"]: r for r in docs.rows("model")}
    assert model["model.norm"]["allowed"] == "layernorm|rmsnorm" and model["model.quantum"]["default"] == 64
    assert all(r["doc"] for g in schema.ALL_GROUPS for r in docs.rows(g)), "every setting has a doc line"


@pytest.mark.parametrize(
    "name, words",
    [
        ("model.qantum", "did you mean model.quantum?"),
        ("modle", "did you mean model?"),
        ("launcher.tiem", "did you mean launcher.time?"),
    ],
)
def test_config_show_rejects_an_unknown_name_with_the_nearest_one(name, words):
    proc = run_dw("config", "show", name)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_settings_reference_is_generated_from_the_schema():
    """The table moved from the README to the site's settings reference (#39; scripts/gen_docs.py)."""
    text = (ROOT / "docs" / "reference" / "settings.md").read_text()
    start, end = text.index(docs.README_BEGIN), text.index(docs.README_END) + len(docs.README_END)
    assert text[start:end] == docs.markdown(), "the settings reference is stale: run `python scripts/gen_docs.py`"


def test_config_show_with_overrides_prints_the_resolved_preset_dw_train_would_train(capsys):
    """#35 item 3: a resolved preset is visible without training: every group as the composer gives
    it to dw train, the preset's own values and the bases' beneath them; bad values one line, exit 2."""
    from depthwidth.config.compose import compose
    from depthwidth.config.node import plain
    from tests.helpers import dw_in_process

    code, out, err = dw_in_process(capsys, "config", "show", "model=vwt_1b", "optim=vwt", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc == plain(compose(["model=vwt_1b", "optim=vwt"]))  # what dw train composes
    assert (doc["model"]["preset"], doc["model"]["depth"], doc["model"]["width"]) == ("vwt_1b", 32, 1280)
    assert (doc["optim"]["lr"], doc["optim"]["schedule"], doc["optim"]["warmup"]) == (0.01, "power", 0.08)
    assert doc["optim"]["betas"] == plain(compose([]))["optim"]["betas"]  # inherited from the base
    code, out, err = dw_in_process(capsys, "config", "show", "model", "model=vwt_1b", "model.depth=12")
    assert code == 0 and out.startswith("# dw config show model=vwt_1b model.depth=12: resolved")
    assert "depth: 12" in out and "optim" not in out.split("\n", 1)[1]
    for argv, says in (
        (("model=nosuch",), "unknown model 'nosuch'"),
        (("model.width=abc",), "bad value for model.width: 'abc'"),
        (("model", "optim", "model=vwt"), "bad value for name: 'model optim'"),
    ):
        code, out, err = dw_in_process(capsys, "config", "show", *argv)
        assert code == 2 and err.count("\n") == 1 and says in err, err
