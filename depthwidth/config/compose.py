"""Where the Hydra tree lives and how dw composes it.

``compose(overrides)`` gives the same resolved config that ``dw train
OVERRIDES`` trains and that ``dw sweep`` expands, so every sweep run is an
ordinary override list a user can replay by hand.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from depthwidth.core.errors import BadInput


def conf_dir() -> Path:
    """``$DW_CONF``, else the checkout's ``conf/`` next to the package, else ``./conf``
    (a non-editable install: run dw from a folder holding conf/ and sweeps/)."""
    env = os.environ.get("DW_CONF")
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parents[2] / "conf"
    return beside if beside.is_dir() else Path("conf")


def group_options(group: str) -> list[str]:
    d = conf_dir() / group
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def load_group(group: str, name: str) -> Any:
    """One option of a config group as an OmegaConf node (no Hydra composition)."""
    from omegaconf import OmegaConf

    path = conf_dir() / group / f"{name}.yaml"
    if not path.is_file():
        raise BadInput(f"unknown {group} {name!r} (available: {', '.join(group_options(group))})")
    return OmegaConf.load(path)


def compose(overrides: Sequence[str] = ()) -> Any:
    """Compose conf/config.yaml with Hydra overrides; bad overrides -> BadInput."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
    except Exception as e:  # hydra raises several types; all are the user's input
        msg = " ".join(str(e).split())
        if "Could not override" in msg or "Key '" in msg:
            msg = msg.split(" To append to your config")[0]
        raise BadInput(f"bad override: {msg}") from None
    finally:
        GlobalHydra.instance().clear()
    try:
        OmegaConf.resolve(cfg)
    except Exception as e:
        raise BadInput(f"config does not resolve: {' '.join(str(e).split())}") from None
    return cfg
