"""Golden configs: every shipped preset and every sweep composes to the same resolved
config, and every sweep run keeps its run id, as when the golden file was written
(tests/golden/configs.json, made by the code before settings moved into the typed schema).

A preset is one option of a group (``model=vwt_500m``) on top of the root config; it is
checked through dw's one composer (config/compose.py: ``dw train``'s and ``dw sweep``'s) and
through Hydra's own compose, the oracle (tests/hydra_oracle.py).  A sweep run is checked by
its run id and the hash of its whole resolved config (launcher and tracker included).
Regenerate only on purpose: ``DW_WRITE_GOLDEN=1 pytest tests/test_config_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden" / "configs.json"
GROUPS = ("model", "data", "optim", "launcher", "tracker")


def _plain(cfg) -> dict:
    if isinstance(cfg, dict):
        return json.loads(json.dumps(cfg))
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def _digest(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _presets(compose=None) -> dict:
    from depthwidth.config.compose import conf_dir

    if compose is None:
        from depthwidth.config.compose import compose
    out = {"": _plain(compose([]))}
    for g in GROUPS:
        for p in sorted((conf_dir() / g).glob("*.yaml")):
            out[f"{g}={p.stem}"] = _plain(compose([f"{g}={p.stem}"]))
    return out


def _sweeps() -> dict:
    from depthwidth.config.compose import conf_dir
    from depthwidth.sweep.expand import expand

    out = {}
    for p in sorted((conf_dir().parent / "sweeps").glob("*.yaml")):
        sw = expand(p.stem, check_gpus=False)
        out[p.stem] = [
            {
                "overrides": r.overrides,
                "run_id": r.run_id,
                "error": r.error,
                "config": _digest(_plain(r.cfg)) if r.cfg is not None else None,
            }
            for r in sw.runs
        ]
    return out


def _write() -> dict:
    doc = {"presets": _presets(), "sweeps": _sweeps()}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


@pytest.fixture(scope="module")
def golden() -> dict:
    if os.environ.get("DW_WRITE_GOLDEN"):
        return _write()
    return json.loads(GOLDEN.read_text())


def test_every_preset_composes_as_before_through_dw_and_through_hydra(golden):
    """dw's one composer against the golden file and against Hydra's compose (the oracle), and
    ``compose(overrides)`` equal to ``compose_parts`` of the same choices (what dw sweep calls)."""
    from depthwidth.config.compose import compose_parts
    from tests.hydra_oracle import hydra_compose

    now, hydra = _presets(), _presets(hydra_compose)
    assert sorted(now) == sorted(golden["presets"]), "a preset was added or removed: regenerate on purpose"
    for name, want in golden["presets"].items():
        assert now[name] == want, f"{name or 'the root config'} composes differently"
        assert hydra[name] == want, f"{name or 'the root config'} composes differently through Hydra"
        groups = dict([name.split("=")]) if name else {}
        assert _plain(compose_parts(groups, {})) == want, f"{name or 'the root config'}: compose_parts differs"


def test_every_sweep_run_keeps_its_config_and_run_id(golden):
    now = _sweeps()
    assert sorted(now) == sorted(golden["sweeps"])
    for name, runs in golden["sweeps"].items():
        assert [r["run_id"] for r in now[name]] == [r["run_id"] for r in runs], f"sweep {name}: run ids changed"
        assert now[name] == runs, f"sweep {name}: a run's overrides or resolved config changed"


def test_every_composed_group_is_its_schema_type_field_for_field():
    """The typed config downstream: every group of every preset, ``model`` and ``data`` included,
    holds exactly its schema dataclass's fields, each value of the field's type and in its range
    (config/check.py checks it against config/schema.py), so code reads typed settings."""
    import dataclasses

    from depthwidth.config.check import check_group
    from depthwidth.config.schema import ALL_GROUPS, schema_of

    for name, cfg in _presets().items():
        for g in ALL_GROUPS:
            node = cfg[g]
            cls = schema_of(g, node)
            assert set(node) == {f.name for f in dataclasses.fields(cls)}, (name, g)
            check_group(g, node)  # BadInput on a value not of its field's type or out of range
            cls(**node)  # and the dataclass itself takes it
