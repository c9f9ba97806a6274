"""The launcher's settings: ``conf/launcher/NAME.yaml`` + command-line overrides.

``split_overrides`` separates a sweep's launcher overrides (``launcher=X``,
``launcher.K=V``, ``pack=N``) from the run overrides; ``launcher_config``
merges them onto the chosen launcher's preset (``compose.load_group``: the
same chain, down to the schema's defaults, that the composer uses) and validates the result against
the typed schema (config/schema.py), the same check ``dw train`` applies to
the composed ``launcher`` group.  ``target_device`` says where the runs will
train (cuda | cpu), which decides ``train.precision=auto``.
"""

from __future__ import annotations

from typing import Sequence

from depthwidth.config import schema
from depthwidth.config.check import check_group
from depthwidth.config.compose import conf_dir, load_group
from depthwidth.config.overrides import parse_cli_overrides
from depthwidth.core.errors import BadInput, bad
from depthwidth.launch.backend import backend

LAUNCHERS = schema.LAUNCHERS


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(run overrides, launcher overrides): ``launcher=X``, ``launcher.K=V`` and ``pack=N``."""
    runs, launcher = [], []
    for o in overrides or ():
        k = o.split("=", 1)[0].lstrip("+")
        if k == "launcher" or k.startswith("launcher.") or k == "pack":
            launcher.append(o)
        else:
            runs.append(o)
    return runs, launcher


def launcher_config(
    overrides: Sequence[str] = (), *, need_scheduler: bool = True, defaults=None, check_gpus: bool | None = None
) -> dict:
    """The chosen launcher's settings as a plain dict; bad names/keys -> BadInput.
    ``defaults``: {launcher name: {key: value}} from a sweep file, applied over
    conf/launcher/NAME.yaml and under the overrides.
    ``need_scheduler``: launcher=slurm requires sbatch on PATH (not for a dry run, which may
    plan a cluster from anywhere).  ``check_gpus`` (default: ``need_scheduler``): launcher=local's
    ``gpus_per_run`` must not exceed this machine's visible GPUs (the dry run checks it too:
    local runs train here)."""
    from omegaconf import OmegaConf

    groups, keys = parse_cli_overrides(list(overrides))
    name = groups.pop("launcher", None) or _default_launcher()
    if "pack" in groups:
        keys["pack"] = groups.pop("pack")
    if groups:
        raise bad("override", next(iter(groups)), "launcher=NAME, launcher.KEY=VALUE or pack=N")
    if name not in LAUNCHERS:
        raise bad("launcher", name, "|".join(LAUNCHERS))
    cfg = OmegaConf.to_container(load_group("launcher", name), resolve=True)  # the composer's own chain
    preset = (defaults or {}).get(name) or {}
    if not isinstance(preset, dict):
        raise bad(f"sweep file launcher.{name}", preset, "a mapping of launcher keys")
    keys = {**{f"launcher.{k}": v for k, v in preset.items()}, **keys}
    for k, v in keys.items():
        k = k.lstrip("+")
        short = "pack" if k == "pack" else k[len("launcher.") :]
        top = short.split(".")[0]
        if top not in cfg or top == "name":
            allowed = ", ".join(f"launcher.{x}" for x in cfg if x != "name")
            raise BadInput(f"unknown launcher key {k!r} for launcher={name} (allowed: {allowed}, pack)")
        if "." in short:
            if not isinstance(cfg[top], dict):
                raise bad(f"launcher.{top}", cfg[top], "a mapping")
            cfg[top][short.split(".", 1)[1]] = v
        else:
            cfg[short] = v
    _check(cfg, need_scheduler, need_scheduler if check_gpus is None else check_gpus)
    return cfg


def _default_launcher() -> str:
    from omegaconf import OmegaConf

    for d in OmegaConf.load(conf_dir() / "config.yaml").get("defaults", []):
        if isinstance(d, dict) or hasattr(d, "keys"):
            if "launcher" in d:
                return str(d["launcher"])
    return "debug"


def _check(cfg: dict, need_scheduler: bool = True, check_gpus: bool = True) -> None:
    check_group("launcher", cfg)
    backend(cfg["name"]).check(cfg, need_scheduler, check_gpus)


def target_device(cfg: dict) -> str:
    """Where this launcher's runs will train: ``cuda`` (slurm with GPUs per node; local or debug
    with a visible GPU) or ``cpu``.  Decides ``train.precision=auto`` at submission."""
    return backend(cfg["name"]).device(cfg)


def processes(cfg: dict) -> int:
    """Processes one run gets: slurm nodes × tasks per node; local ``gpus_per_run`` on GPUs; else 1."""
    return backend(cfg["name"]).processes(cfg)


def capacity(cfg: dict, device: str) -> int | None:
    """Bytes per device the memory plan must fit (``launcher.gpu_memory`` GiB); None on the CPU."""
    if device != "cuda":
        return None
    return int(float(cfg["gpu_memory"]) * 2**30)


def parallel_tasks(cfg: dict) -> int:
    """Tasks this launcher runs at once: slurm ``array_parallelism`` (per job array); local its
    workers (``workers.worker_slots``); debug 1."""
    return backend(cfg["name"]).parallel_tasks(cfg)
