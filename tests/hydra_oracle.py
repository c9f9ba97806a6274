"""Hydra's own composition of conf/, the oracle dw's one composer (config/compose.py) is
checked against: every shipped preset and every shipped sweep run must compose to the same
resolved config through both (tests/test_config_golden.py, test_sweep.py,
test_sweep_isoflop.py).  Not on any runtime path since #35 item 3."""

from __future__ import annotations

from typing import Sequence


def hydra_compose(overrides: Sequence[str] = ()) -> dict:
    """conf/config.yaml composed by Hydra with ``overrides``, the schema's defaults registered in
    its ConfigStore as the bottom of every preset chain, resolved, as plain dicts and lists."""
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from depthwidth.config.compose import conf_dir
    from depthwidth.config.schema import base_nodes

    store = ConfigStore.instance()
    for (group, name), node in base_nodes().items():
        store.store(group=group, name=name, node=node)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            cfg = compose(config_name="config", overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()
    return OmegaConf.to_container(cfg, resolve=True)
