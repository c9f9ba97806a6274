"""A sweep's runs: points of the sweep file (file.py) composed, identified and validated.

Composition: the one composer ``dw train`` uses (config/compose.py): conf/ is
composed once per distinct set of group choices and each run's key overrides
are merged onto it (a test checks the result equals Hydra's compose of the
run's override list), so a 30-run dry-run takes milliseconds and never imports
Hydra or torch.

Validation: every run passes ``train.plan.check`` — the gate ``dw train``
uses — and its data are opened (``check_data``, once per distinct source), so
a sweep (submitted or dry-run) rejects exactly what ``dw train`` would, before
anything is written or submitted.  ``train.precision=auto`` is resolved for the
launcher's device and pinned in the run's override list (it is part of the
run's identity).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from depthwidth.config.compose import compose_parts
from depthwidth.config.overrides import override_list, parse_cli_overrides
from depthwidth.config.identity import group_id, run_id
from depthwidth.config.node import fingerprint
from depthwidth.launch.config import capacity, launcher_config, processes, target_device
from depthwidth.core.devices import PLAN_MFU, PLAN_PEAK_FLOPS
from depthwidth.core.errors import BadInput, bad
from depthwidth.model.accounting import count_params
from depthwidth.model.figures import figures
from depthwidth.model.resolve import from_config
from depthwidth.sweep.file import RESERVED, load_file, points, store_of
from depthwidth.sweep.isoflop import with_blocks
from depthwidth.sweep.plan_costs import DEFAULT_CPU_PEAK, checkpoint_figures, eval_flops, events, hours
from depthwidth.train import memory
from depthwidth.train.plan import check as check_run
from depthwidth.train.plan import precision_for
from depthwidth.train.optim import planned_steps

# Stated assumptions for the device-hour estimate (dry-run); override with --mfu/--peak/--cpu-peak.
DEFAULT_MFU = PLAN_MFU
DEFAULT_PEAK = PLAN_PEAK_FLOPS


@dataclass
class Run:
    index: int
    overrides: list[str]  # the run's own overrides (what `dw train` needs, minus run.sweep/run.dir)
    groups: dict
    keys: dict
    ref: dict | None = None
    label: str | None = None
    cfg: Any = None
    run_id: str | None = None
    error: str | None = None
    figures: dict = field(default_factory=dict)
    launcher: dict = field(default_factory=dict)  # the run's effective launcher settings
    group: str | None = None  # its tuning group's id (config/identity.group_id), when the sweep tunes
    tuned: dict = field(default_factory=dict)  # the tuned settings' values in this run ({optim.lr: 1e-3})
    halving: bool = False  # its tuning group halves at its first budget (tune.halving; launch/halving.py)

    def full_overrides(self, sweep: str, run_dir: str | os.PathLike) -> list[str]:
        return self.overrides + [f"run.sweep={sweep}", f"run.dir={os.fspath(run_dir)}"]


@dataclass
class Sweep:
    name: str
    description: str
    runs: list[Run]
    duplicates: int = 0
    store: str = ""  # the sweep whose run store the runs join (file.store_of); "" = name

    def __post_init__(self):
        self.store = self.store or self.name

    @property
    def bad(self) -> list[Run]:
        return [r for r in self.runs if r.error]


def expand(
    name: str,
    cli_overrides: Sequence[str] = (),
    *,
    doc: dict | None = None,
    launcher_overrides: Sequence[str] = (),
    need_scheduler: bool = False,
    check_gpus: bool | None = None,
    mfu: float = DEFAULT_MFU,
    peak: float = DEFAULT_PEAK,
    cpu_peak: float = DEFAULT_CPU_PEAK,
    costs: bool = True,
) -> Sweep:
    """The sweep's runs, composed, identified, validated and planned: of the file sweeps/NAME.yaml,
    or of ``doc``, a sweep document held in memory (``dw suggest``'s candidates).  File-level errors
    raise BadInput; per-run errors are kept in ``run.error`` (see ``check``).
    Each run's launcher is conf/launcher ← the sweep file's ``launcher`` defaults ←
    ``launcher_overrides``; its device (cpu | cuda) resolves ``train.precision=auto``,
    its processes and ``gpu_memory`` are what the memory plan must fit.  ``costs``: False leaves
    out the dry run's cost figures (``validate``), which a submission does not record."""
    doc = load_file(name) if doc is None else doc
    store_name = store_of(name, doc)
    doc = with_blocks(name, doc) if "isoflop" in doc else doc  # sweep/isoflop.py: an isoflop: key's blocks
    cli_groups, cli_keys = parse_cli_overrides(cli_overrides)
    for k in cli_keys:
        if k.lstrip("+") in RESERVED:
            raise BadInput(f"{k} is set by dw sweep itself (runs/{name}/RUN_ID)")
    runs, seen, dup = [], {}, 0
    launchers: dict = {}
    pool: dict = {}  # the groups runs share (``_share``)
    for pt in points(name, doc):
        lkey = json.dumps(pt["launcher"], sort_keys=True, default=str)
        if lkey not in launchers:  # launcher errors are the sweep's, not one run's: raised here
            launchers[lkey] = launcher_config(
                launcher_overrides, need_scheduler=need_scheduler, check_gpus=check_gpus, defaults=pt["launcher"]
            )
        lcfg = launchers[lkey]
        groups = {**pt["groups"], **cli_groups}
        keys = {**pt["keys"], **cli_keys}
        r = Run(
            index=len(runs), overrides=[], groups=groups, keys=keys, ref=pt["ref"], label=pt["label"], launcher=lcfg
        )
        try:
            cfg = compose_parts(groups, keys)
            spec = from_config(cfg.model)  # once a run: the token rule and the checks share it
            if pt["tokens"] is not None and "train.tokens" not in cli_keys:
                keys["train.tokens"] = _tokens(pt["tokens"], spec)
                cfg.train.tokens = keys["train.tokens"]
            run_device = _run_device(cfg, lcfg)
            if cfg.train.get("precision") == "auto":
                keys["train.precision"] = cfg.train.precision = precision_for("auto", run_device)
            texts = _share(cfg, pool)  # before the checks, which read the groups' texts it computes
            _settle(
                r,
                cfg,
                run_device,
                pt.get("tuned"),
                texts,
                mfu=mfu,
                peak=peak,
                cpu_peak=cpu_peak,
                spec=spec,
                costs=costs,
            )
            if pt.get("halving"):
                r.halving = True
                _check_halving(cfg, lcfg)
        except BadInput as e:
            r.error = str(e)
        r.overrides = override_list(groups, keys)
        if r.run_id is not None and r.run_id in seen:
            dup += 1  # the same config reached twice (e.g. a shared baseline): one run
            first = seen[r.run_id]
            if r.ref and not first.ref:
                first.ref = r.ref
            continue
        if r.run_id is not None:
            seen[r.run_id] = r
        r.index = len(runs)
        runs.append(r)
    return Sweep(name, str(doc.get("description", "")), runs, dup, store=store_name)


def _share(cfg: Any, pool: dict) -> dict:
    """Each group of a run's composed ``cfg`` equal to one an earlier run holds replaced by that one (read
    only from here on): the runs of a sweep differ in a few settings, and 10,000 runs had held 10,000
    copies of every group they share (86 MB of a dry run's 280).  {group: its fingerprint}, for the
    checks (computed once a run, not once here and once there)."""
    texts = {}
    for g, node in cfg.items():
        if isinstance(node, dict):
            text = fingerprint(node)  # a value JSON cannot hold keeps the group its own
            if text is not None:  # the digest, not the text: 10,000 distinct model groups are 6 MB of text
                cfg[g] = pool.setdefault((g, hashlib.sha1(text.encode()).digest()), node)
                texts[g] = text
    return texts


def derive(r: Run, keys: dict, *, mfu: float = DEFAULT_MFU, peak: float = DEFAULT_PEAK, cpu_peak=DEFAULT_CPU_PEAK):
    """A run like ``r`` with ``keys`` set (``--extend-tuning``: a tuning group's next value), composed,
    validated and identified as ``expand`` does; its tuning group is ``r``'s when only tuned keys change."""
    nk = {**r.keys, **keys}
    out = Run(index=-1, overrides=[], groups=dict(r.groups), keys=nk, label=r.label, launcher=r.launcher)
    try:
        cfg = compose_parts(out.groups, nk)
        _settle(out, cfg, _run_device(cfg, r.launcher), list(r.tuned), None, mfu=mfu, peak=peak, cpu_peak=cpu_peak)
    except BadInput as e:
        out.error = str(e)
    out.overrides = override_list(out.groups, nk)
    return out


def _run_device(cfg: Any, launcher: dict) -> str:
    """Where the run trains: its own ``train.device`` wins over the launcher's target device."""
    return target_device(launcher) if cfg.train.get("device") == "auto" else str(cfg.train.device)


def _settle(r: Run, cfg: Any, run_device: str, tuned, texts: dict | None, **costs) -> None:
    """``r``'s composed config checked as ``dw train`` would (``validate``, BadInput if not), its
    dry-run figures, run id and, when the sweep tunes, its tuning group and tuned values.
    ``texts``: its groups' fingerprints (``_share``), None to compute them."""
    r.cfg = cfg
    lcfg = r.launcher
    r.figures = validate(
        cfg, device=run_device, processes=processes(lcfg), capacity=capacity(lcfg, run_device), texts=texts, **costs
    )
    r.run_id = run_id(cfg)
    if tuned:
        r.group = group_id(cfg, list(tuned))
        r.tuned = {k: _at(cfg, k) for k in tuned}


def _check_halving(cfg: Any, lcfg: dict) -> None:
    """What tune.halving needs of a run: a first budget short of the whole run to compare the group at,
    and one run per task (a parked task is held or handed back whole)."""
    budgets = list(cfg.train.get("budgets") or [])
    if not budgets:
        raise BadInput("tune.halving needs train.budgets (its first budget is where a group's runs are compared)")
    if int(lcfg["pack"]) != 1:
        raise bad("pack", lcfg["pack"], "1 with tune.halving (a parked run's task is held and released whole)")


def _at(cfg: Any, key: str) -> Any:
    """The composed value of a dotted key (``optim.lr``)."""
    for part in key.lstrip("+").split("."):
        cfg = cfg[part]
    return cfg


def _tokens(rule: Any, spec: Any) -> int:
    """A token budget: a number, or {value: N} | {per_param: k[, max, min, count]}."""
    if isinstance(rule, (int, float)) and not isinstance(rule, bool):
        rule = {"value": rule}
    if not isinstance(rule, dict) or not ({"value"} <= set(rule) or {"per_param"} <= set(rule)):
        raise bad("tokens", rule, "a number, {value: N} or {per_param: k[, min, max, count]}")
    if "value" in rule:
        t = float(rule["value"])
    else:
        count = rule.get("count", "total")
        if count not in ("total", "non_embedding"):
            raise bad("tokens.count", count, "total|non_embedding")
        t = float(rule["per_param"]) * count_params(spec)[count]
    if "max" in rule:
        t = min(t, float(rule["max"]))
    if "min" in rule:
        t = max(t, float(rule["min"]))
    if not t >= 1:
        raise bad("tokens", rule, "a positive token budget")
    return int(round(t))


def validate(
    cfg: Any,
    *,
    mfu: float = DEFAULT_MFU,
    peak: float = DEFAULT_PEAK,
    cpu_peak: float = DEFAULT_CPU_PEAK,
    device: str = "cpu",
    processes: int = 1,
    capacity: int | None = None,
    spec: Any = None,
    texts: dict | None = None,
    costs: bool = True,
) -> dict:
    """Everything `dw train` would reject, short of touching the data (``train.plan.check``;
    ``check_data`` opens it), the memory plan on ``processes`` devices of ``capacity`` bytes
    (BadInput if it cannot fit), and the dry-run figures of the run (plan_costs.py: device-hours
    at ``mfu`` of ``peak`` per GPU or ``cpu_peak`` per CPU process, checkpoint bytes).  ``spec``
    and ``texts``: ``cfg.model`` resolved and its groups' fingerprints, where the caller holds them.
    ``costs``: False leaves out the device-hours, evaluation FLOPs, events and checkpoint figures
    (a submission records none of them).  No torch."""
    rp = check_run(cfg, processes=processes, spec=spec, texts=texts)
    spec, t = rp.spec, cfg.train
    mb = t.micro_batch_size
    lay = memory.layout(
        spec,
        seq_len=t.seq_len,
        batch_size=t.batch_size,
        world=processes,
        parallel=t.parallel,
        micro_batch=mb,
        ac=t.activation_checkpointing,
        precision=t.precision,
        device=device,
        capacity=capacity,
        wsd_branches=any(b.branch_at is not None for b in rp.budgets),
    )
    if not lay.fits:
        raise BadInput(
            f"needs {lay.total / memory.GiB:.1f} GiB per device ({lay.mode}, {processes} processes, "
            f"micro-batch {lay.micro_batch}, activation checkpointing {'on' if lay.ac else 'off'}) but "
            f"launcher.gpu_memory is {capacity / memory.GiB:.0f} GiB; it would fit with {lay.advice}"
        )
    f = figures(spec, t.seq_len)
    tokens = rp.steps * rp.tokens_per_step
    flops = f["flops_per_token"] * tokens
    steps_planned = planned_steps(rp.steps, rp.budgets)  # the trunk and every WSD decay branch
    flops_planned = f["flops_per_token"] * steps_planned * rp.tokens_per_step
    cost, ev = {}, None
    if costs:
        ev = events(t, cfg.probe, rp.steps, rp.budgets)
        flops_eval = eval_flops(ev["evals"], int(t.eval_batches), rp.tokens_per_step, f["flops_per_token"])
        cost = {
            "flops_eval": flops_eval,
            **hours(
                flops_planned + flops_eval, device=device, processes=processes, mfu=mfu, peak=peak, cpu_peak=cpu_peak
            ),
            **checkpoint_figures(spec, steps=rp.steps, ckpt_every=int(t.ckpt_every), keep=int(t.keep_ckpts)),
        }
    return {
        "depth": spec.depth,
        "width": int(cfg.model.width),
        "shape": "custom" if cfg.model.get("widths") else str(cfg.model.shape),
        "widths": list(spec.widths),
        "params": f["params"],
        "params_non_embedding": f["params_non_embedding"],
        "flops_per_token": f["flops_per_token"],
        "tokens": tokens,
        "steps": rp.steps,
        "flops": flops,
        "steps_planned": steps_planned,
        "flops_planned": flops_planned,
        **cost,
        "tokens_per_step": rp.tokens_per_step,
        **({"events": ev} if costs else {}),
        "seed": int(cfg.run.seed),
        "precision": t.precision,
        "plan": lay.to_dict(),
        "model_warning": spec.extra.get("warning"),  # what dw train would warn (e.g. shapes off their match)
    }


def check(sw: Sweep, runs: list[Run] | None = None) -> None:
    """BadInput naming every invalid run (of ``runs``, default all) before anything is submitted."""
    runs = sw.runs if runs is None else runs
    badr = [r for r in runs if r.error]
    if not badr:
        return
    axes = _axis_keys(sw)
    by_error: dict = {}  # one message per distinct error, naming its first run
    for r in badr:
        by_error.setdefault(r.error, []).append(r)
    parts = []
    for err, rs in list(by_error.items())[:5]:
        first = rs[0]
        who = f"run {first.index} ({' '.join(o for o in first.overrides if o.split('=')[0] in axes)})"
        if len(rs) > 1:
            who += f" and {len(rs) - 1} more"
        parts.append(f"{who}: {err}")
    more = f"; and {len(by_error) - 5} more errors" if len(by_error) > 5 else ""
    raise BadInput(
        f"sweep {sw.name}: {len(badr)} of {len(runs)} runs are invalid, nothing submitted: " + "; ".join(parts) + more
    )


def _axis_keys(sw: Sweep) -> set:
    """Override keys that differ between runs (what identifies a run to a reader)."""
    seen: dict = {}
    for r in sw.runs:
        for o in r.overrides:
            k, _, v = o.partition("=")
            seen.setdefault(k, set()).add(v)
    keys = {k for k, vs in seen.items() if len(vs) > 1}
    return keys or set(seen)


def check_data(sw: Sweep, runs: list[Run] | None = None, *, mark: bool = True, opened: dict | None = None) -> dict:
    """Build each distinct data source once (files exist, vocabulary matches), as the submission
    and ``dw sweep --dry-run`` do; {error: [runs]} of the failures, which become run errors
    (``mark``; ``dw sweep --dry-run --no-data-check`` only warns of them).  ``opened``: filled with
    {source: [runs]} of the sources that opened (``data_use``)."""
    from depthwidth.data.source import make_source

    seen: dict = {}
    failed: dict = {}
    for r in sw.runs if runs is None else runs:
        if r.error:
            continue
        key = json.dumps([r.cfg["data"], r.cfg["train"]["seq_len"]], sort_keys=True, default=str)
        if key not in seen:
            try:
                seen[key] = make_source(dict(r.cfg["data"]), int(r.cfg["train"]["seq_len"]))
            except BadInput as e:
                seen[key] = str(e)
        if isinstance(seen[key], str):
            failed.setdefault(seen[key], []).append(r)
            if mark:
                r.error = seen[key]
        elif opened is not None:
            opened.setdefault(seen[key], []).append(r)
    return failed


def data_use(opened: dict) -> tuple[list, list]:
    """Every run against the data it trains on (``check_data``'s ``opened``): each run's ``epochs`` in
    its figures; per source its train/val tokens and size on disk, and one warning line when runs plan
    more tokens than its train split holds.  (sources, warnings)."""
    from depthwidth.train.plan import data_warning, epochs

    out, warnings = [], []
    for src, rs in opened.items():
        n = src.n_tokens("train")
        for r in rs:
            r.figures["epochs"] = epochs(r.figures["tokens"], n)
        over = [r for r in rs if (r.figures["epochs"] or 0) > 1]
        out.append(
            {
                "name": src.name,
                "path": (src.meta or {}).get("path"),
                "train_tokens": None if epochs(1, n) is None else n,
                "val_tokens": None if epochs(1, src.n_tokens("val")) is None else src.n_tokens("val"),
                "disk_bytes": src.disk_bytes(),
                "runs": len(rs),
                "epochs_max": max((r.figures["epochs"] or 0 for r in rs), default=0) if epochs(1, n) else None,
                "runs_over": len(over),
            }
        )
        if over:
            worst = max(over, key=lambda r: r.figures["epochs"])
            line = data_warning(worst.figures["tokens"], src).replace("the run plans", f"run {worst.index} plans", 1)
            warnings.append(f"{len(over)} of {len(rs)} runs read their train split more than once; the most: {line}")
    return out, warnings


def select(runs: Iterable[Run], pattern: str | None) -> list[Run]:
    """``--only PATTERN``: a glob matched against run id, label and each override."""
    runs = list(runs)
    if not pattern:
        return runs
    out = []
    for r in runs:
        names = [r.run_id or "", r.label or "", *r.overrides]
        if any(fnmatch.fnmatchcase(n, pattern) for n in names):
            out.append(r)
    if not out:
        raise BadInput(
            f"--only {pattern!r} matches none of the {len(runs)} runs (glob on run id, label or an override like "
            "model.depth=16)"
        )
    return out


def dry_run_rows(sw: Sweep, runs_root: Path) -> list[dict]:
    rows = []
    store = runs_root / sw.store  # joined once, not once a run (pathlib: 10,000 joins were a tenth of a second)
    for r in sw.runs:
        row = {
            "index": r.index,
            "run_id": r.run_id,
            "label": r.label,
            **({"group": r.group, "tuned": r.tuned} if r.group else {}),
            **r.figures,
            "ref": r.ref,
            "error": r.error,
            "overrides": r.full_overrides(sw.store, store / (r.run_id or "INVALID")),
        }
        rows.append(row)
    return rows
