"""The launcher's settings: ``conf/launcher/NAME.yaml`` + command-line overrides.

``split_overrides`` separates a sweep's launcher overrides (``launcher=X``,
``launcher.K=V``, ``pack=N``) from the run overrides; ``launcher_config``
merges them onto the chosen launcher's preset (``compose.load_group``: the
same chain, down to the schema's defaults, that both composers use) and validates the result against
the typed schema (config/schema.py), the same check ``dw train`` applies to
the composed ``launcher`` group.  ``target_device`` says where the runs will
train (cuda | cpu), which decides ``train.precision=auto``.
"""

from __future__ import annotations

from typing import Sequence

from depthwidth.config import schema
from depthwidth.config.check import check_group
from depthwidth.config.compose import conf_dir, load_group
from depthwidth.config.fast import parse_cli_overrides
from depthwidth.core.errors import BadInput, bad
from depthwidth.launch.slurm import available, time_minutes  # noqa: F401 (time_minutes: sweep/plan_costs.py)
from depthwidth.launch.workers import visible_gpus, worker_slots

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
    cfg = OmegaConf.to_container(load_group("launcher", name), resolve=True)  # the composers' own chain
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
    if cfg["name"] == "local" and int(cfg["workers"]) > schema.MAX_CPUS:  # before anything lists them
        raise bad("launcher.workers", cfg["workers"], f"an integer in [1, {schema.MAX_CPUS:,}] (CPU worker processes)")
    if cfg["name"] == "slurm":
        gpn, tpn = int(cfg["gpus_per_node"]), cfg["tasks_per_node"]
        if gpn and tpn is not None and int(tpn) > gpn:  # a process per GPU, at most
            raise bad("launcher.tasks_per_node", tpn, f"at most launcher.gpus_per_node={gpn} (one process per GPU)")
    if cfg["name"] == "slurm" and need_scheduler and not available():
        raise BadInput("launcher=slurm but there is no sbatch on PATH (use launcher=local or launcher=debug here)")
    if cfg["name"] == "local" and check_gpus and cfg.get("gpus") == "auto" and int(cfg["gpus_per_run"]) > 1:
        n = len(visible_gpus())
        if n < int(cfg["gpus_per_run"]):
            raise bad("launcher.gpus_per_run", cfg["gpus_per_run"], f"at most the {n} visible GPUs")


def target_device(cfg: dict) -> str:
    """Where this launcher's runs will train: ``cuda`` (slurm with GPUs per node; local or debug
    with a visible GPU) or ``cpu``.  Decides ``train.precision=auto`` at submission."""

    if cfg["name"] == "slurm":
        return "cuda" if int(cfg["gpus_per_node"]) > 0 else "cpu"
    if cfg["name"] == "local" and cfg.get("gpus") == "none":
        return "cpu"
    return "cuda" if visible_gpus() else "cpu"


def processes(cfg: dict) -> int:
    """Processes one run gets: slurm nodes × tasks per node; local ``gpus_per_run`` on GPUs; else 1."""
    if cfg["name"] == "slurm":
        gpn = int(cfg["gpus_per_node"])
        return int(cfg["nodes"]) * int(cfg["tasks_per_node"] or max(1, gpn))
    if cfg["name"] == "local" and target_device(cfg) == "cuda":
        return int(cfg["gpus_per_run"])
    return 1


def capacity(cfg: dict, device: str) -> int | None:
    """Bytes per device the memory plan must fit (``launcher.gpu_memory`` GiB); None on the CPU."""
    if device != "cuda":
        return None
    return int(float(cfg["gpu_memory"]) * 2**30)


def parallel_tasks(cfg: dict) -> int:
    """Tasks this launcher runs at once: slurm ``array_parallelism`` (per job array); local its
    workers (``workers.worker_slots``); debug 1."""
    if cfg["name"] == "slurm":
        return int(cfg["array_parallelism"])
    if cfg["name"] == "local":
        return max(1, len(worker_slots(cfg)))
    return 1
