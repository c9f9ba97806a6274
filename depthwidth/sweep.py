"""Named sweeps: ``sweeps/NAME.yaml`` -> a list of runs, each an override list.

A sweep file (every key optional except one of runs/axes/zip/blocks)::

    description: one line
    groups: {model: vwt, data: slimpajama}      # config-group choices (model=vwt ...)
    fixed: {train.seq_len: 1024}                # key overrides shared by every run
    axes:                                       # cartesian product of the axes
      model.width: [32, 64, 96]
      model.depth: {start: 1, stop: 7, step: 2} # inclusive range -> 1, 3, 5, 7
    zip:                                        # zipped axes: lists of equal length, taken together
      - {model.depth: [2, 4], model.width: [64, 32]}
    seeds: [1, 2, 3]                            # shorthand for the axis run.seed
    runs:                                       # explicit points; each may carry reference data
      - {model.depth: 16, model.width: 512, ref: {loss: 3.435, source: published}}
    tokens: {per_param: 20, max: 1.4e11}        # train.tokens = k x params | {value: 6.4e9}
    blocks: [ {label: small, runs: [...], tokens: {...}}, ... ]   # sub-sweeps, concatenated

Points are ``runs`` (or one empty point) x product(axes) x each zip group x
seeds; a block inherits the file's groups/fixed/tokens and may add its own.
Keys with a dot are config keys (``model.depth``), keys without one are
config groups (``model: vwt``).  ``ref`` (reference data, e.g. a published
loss; ``source: published | reconstructed``), ``label`` and ``tokens`` are
not overrides.  Overrides given on the ``dw sweep`` command line apply to
every run and win over the file.

Composition: conf/ is composed once per distinct set of group choices and
each run's key overrides are merged with OmegaConf (a test checks the result
equals a full Hydra compose of the run's override list), so a 30-run
dry-run takes milliseconds and never imports Hydra or torch.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from depthwidth.errors import BadInput, bad

TOP_KEYS = ("description", "groups", "fixed", "axes", "zip", "seeds", "runs", "tokens", "blocks")
BLOCK_KEYS = ("label", "groups", "fixed", "axes", "zip", "seeds", "runs", "tokens")
POINT_META = ("ref", "label", "tokens")
# Keys a sweep never sets: where and how a run executes is the launcher's business.
RESERVED = ("run.dir", "run.sweep")

# Stated assumptions for the GPU-hour estimate (dry-run); override with --mfu/--peak.
DEFAULT_MFU = 0.40
DEFAULT_PEAK = 989e12  # H100 SXM dense bf16 FLOP/s


def sweeps_dir() -> Path:
    """``$DW_SWEEPS``, else the checkout's ``sweeps/``, else ``./sweeps``."""
    env = os.environ.get("DW_SWEEPS")
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parent.parent / "sweeps"
    return beside if beside.is_dir() else Path("sweeps")


def available() -> list[str]:
    d = sweeps_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


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

    def full_overrides(self, sweep: str, run_dir: str | os.PathLike) -> list[str]:
        return self.overrides + [f"run.sweep={sweep}", f"run.dir={os.fspath(run_dir)}"]


@dataclass
class Sweep:
    name: str
    description: str
    runs: list[Run]
    duplicates: int = 0

    @property
    def bad(self) -> list[Run]:
        return [r for r in self.runs if r.error]


# ---------------------------------------------------------------------------
# reading the file
# ---------------------------------------------------------------------------


def load_file(name: str) -> dict:
    from omegaconf import OmegaConf

    if not name or "/" in name or name.startswith("."):
        raise bad("sweep name", name, ", ".join(available()) or "a file in sweeps/")
    path = sweeps_dir() / f"{name}.yaml"
    if not path.is_file():
        raise BadInput(f"unknown sweep {name!r} (available: {', '.join(available()) or 'none'})")
    try:
        doc = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as e:
        raise BadInput(f"sweep file {path} is not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(doc, dict):
        raise BadInput(f"sweep file {path} must hold a mapping (keys: {', '.join(TOP_KEYS)})")
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise BadInput(f"sweep {name}: unknown key {unknown[0]!r} (allowed: {', '.join(TOP_KEYS)})")
    return doc


def _values(name: str, key: str, spec: Any) -> list:
    """An axis: a list, a scalar, or an inclusive range {start, stop, step}."""
    if isinstance(spec, list):
        if not spec:
            raise BadInput(f"sweep {name}: axis {key} is an empty list")
        return spec
    if isinstance(spec, dict):
        if set(spec) - {"start", "stop", "step"} or not {"start", "stop"} <= set(spec):
            raise bad(f"axis {key}", spec, "a list or {start, stop[, step]} (inclusive)")
        a, b, s = spec["start"], spec["stop"], spec.get("step", 1)
        if not all(isinstance(v, (int, float)) for v in (a, b, s)) or s == 0 or (b - a) * s < 0:
            raise bad(f"axis {key}", spec, "numbers start, stop and a non-zero step towards stop")
        n = int(math.floor((b - a) / s + 1e-9)) + 1
        out = [a + i * s for i in range(n)]
        return [int(v) if all(isinstance(x, int) for x in (a, s)) else v for v in out]
    return [spec]


def _product(name: str, axes: dict) -> list[dict]:
    if not axes:
        return [{}]
    keys = list(axes)
    vals = [_values(name, k, axes[k]) for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*vals)]


def _zipped(name: str, groups: Any) -> list[dict]:
    if not groups:
        return [{}]
    if isinstance(groups, dict):
        groups = [groups]
    out = [{}]
    for g in groups:
        if not isinstance(g, dict) or not g:
            raise bad(f"sweep {name}: zip group", g, "a mapping of key -> list of equal lengths")
        lists = {k: _values(name, k, v) for k, v in g.items()}
        n = {len(v) for v in lists.values()}
        if len(n) != 1:
            raise BadInput(f"sweep {name}: zipped axes {', '.join(lists)} have different lengths {sorted(n)}")
        rows = [{k: lists[k][i] for k in lists} for i in range(n.pop())]
        out = [{**a, **b} for a in out for b in rows]
    return out


def points(name: str, doc: dict) -> list[dict]:
    """Expand a sweep document into points: {groups, keys, ref, label, tokens}."""
    blocks = doc.get("blocks") or [{}]
    if not isinstance(blocks, list):
        raise bad(f"sweep {name}: blocks", blocks, "a list of mappings")
    out = []
    for bi, blk in enumerate(blocks):
        if not isinstance(blk, dict):
            raise bad(f"sweep {name}: block {bi + 1}", blk, "a mapping")
        unknown = [k for k in blk if k not in BLOCK_KEYS]
        if unknown:
            raise BadInput(f"sweep {name}: block {bi + 1}: unknown key {unknown[0]!r} (allowed: {', '.join(BLOCK_KEYS)})")
        fixed = {**(doc.get("fixed") or {}), **(blk.get("fixed") or {})}
        groups = {**(doc.get("groups") or {}), **(blk.get("groups") or {})}
        tokens = blk.get("tokens", doc.get("tokens"))
        runs = blk.get("runs", doc.get("runs") if "blocks" not in doc else None) or [{}]
        axes = blk.get("axes", doc.get("axes") if "blocks" not in doc else None)
        zips = blk.get("zip", doc.get("zip") if "blocks" not in doc else None)
        seeds = blk.get("seeds", doc.get("seeds"))
        seed_axis = [{"run.seed": s} for s in _values(name, "seeds", seeds)] if seeds is not None else [{}]
        if len(seed_axis) > 1:  # W&B names runs -s{seed} when seeds vary (not part of the run id)
            seed_axis = [{**s, "tracker.seed_in_name": True} for s in seed_axis]
        if not (runs != [{}] or axes or zips or seeds is not None):
            raise BadInput(f"sweep {name}: block {bi + 1} has no runs, axes, zip or seeds")
        for p in runs:
            if not isinstance(p, dict):
                raise bad(f"sweep {name}: run", p, "a mapping of overrides (+ ref, label, tokens)")
            for combo in _product(name, axes or {}):
                for z in _zipped(name, zips):
                    for s in seed_axis:
                        merged = {**fixed, **{k: v for k, v in p.items() if k not in POINT_META}, **combo, **z, **s}
                        pt = {"groups": dict(groups), "keys": {}, "ref": p.get("ref"),
                              "label": p.get("label", blk.get("label")), "tokens": p.get("tokens", tokens)}
                        for k, v in merged.items():
                            _place(name, pt, k, v)
                        out.append(pt)
    return out


def _place(name: str, pt: dict, key: str, value: Any) -> None:
    if not isinstance(key, str) or not key:
        raise bad(f"sweep {name}: key", key, "a config key like model.depth or a group like model")
    if key in RESERVED:
        raise BadInput(f"sweep {name}: {key} is set by dw sweep itself (runs/NAME/RUN_ID); remove it")
    if "." in key.lstrip("+"):
        pt["keys"][key] = value
    else:
        pt["groups"][key] = value


from depthwidth.sweep_compose import (  # noqa: E402  (re-exported: sweep.fmt_value, ...)
    Node, compose_fast, fmt_value, override_list, parse_cli_overrides,
)

# ---------------------------------------------------------------------------
# expansion + validation
# ---------------------------------------------------------------------------


def expand(name: str, cli_overrides: Sequence[str] = (), *, mfu: float = DEFAULT_MFU,
           peak: float = DEFAULT_PEAK) -> Sweep:
    """The sweep's runs, composed, identified and validated.  File-level errors
    raise BadInput; per-run errors are kept in ``run.error`` (see ``check``)."""
    from depthwidth.config import run_id

    doc = load_file(name)
    cli_groups, cli_keys = parse_cli_overrides(cli_overrides)
    for k in cli_keys:
        if k.lstrip("+") in RESERVED:
            raise BadInput(f"{k} is set by dw sweep itself (runs/{name}/RUN_ID)")
    runs, seen, dup = [], {}, 0
    for pt in points(name, doc):
        groups = {**pt["groups"], **cli_groups}
        keys = {**pt["keys"], **cli_keys}
        r = Run(index=len(runs), overrides=[], groups=groups, keys=keys, ref=pt["ref"], label=pt["label"])
        try:
            cfg = compose_fast(groups, keys)
            if pt["tokens"] is not None and "train.tokens" not in cli_keys:
                keys["train.tokens"] = _tokens(pt["tokens"], cfg)
                cfg.train.tokens = keys["train.tokens"]
            r.cfg = cfg
            r.figures = validate(cfg, mfu=mfu, peak=peak)
            r.run_id = run_id(cfg)
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
    return Sweep(name, str(doc.get("description", "")), runs, dup)


def _tokens(rule: Any, cfg: Any) -> int:
    """A token budget: a number, or {value: N} | {per_param: k[, max, min, count]}."""
    if isinstance(rule, (int, float)) and not isinstance(rule, bool):
        rule = {"value": rule}
    if not isinstance(rule, dict) or not ({"value"} <= set(rule) or {"per_param"} <= set(rule)):
        raise bad("tokens", rule, "a number, {value: N} or {per_param: k[, min, max, count]}")
    if "value" in rule:
        t = float(rule["value"])
    else:
        from depthwidth.accounting import count_params
        from depthwidth.spec import from_config

        count = rule.get("count", "total")
        if count not in ("total", "non_embedding"):
            raise bad("tokens.count", count, "total|non_embedding")
        t = float(rule["per_param"]) * count_params(from_config(cfg.model))[count]
    if "max" in rule:
        t = min(t, float(rule["max"]))
    if "min" in rule:
        t = max(t, float(rule["min"]))
    if not t >= 1:
        raise bad("tokens", rule, "a positive token budget")
    return int(round(t))


def validate(cfg: Any, *, mfu: float = DEFAULT_MFU, peak: float = DEFAULT_PEAK) -> dict:
    """Everything `dw train` would reject, short of touching the data; the
    dry-run figures of the run.  No torch."""
    from depthwidth import optim
    from depthwidth.shapes_report import figures
    from depthwidth.spec import from_config

    t = cfg.train
    steps, per_step = optim.plan_steps(t)
    optim.validate(cfg.optim)
    spec = from_config(cfg.model)
    dv = cfg.data.get("vocab_size")
    if spec.vocab_size != dv:
        raise BadInput(f"vocabulary mismatch: model.vocab_size={spec.vocab_size} but data has {dv}")
    f = figures(spec, t.seq_len)
    tokens = steps * per_step
    flops = f["flops_per_token"] * tokens
    return {
        "depth": spec.depth, "width": int(cfg.model.width),
        "shape": "custom" if cfg.model.get("widths") else str(cfg.model.shape),
        "widths": list(spec.widths), "params": f["params"], "params_non_embedding": f["params_non_embedding"],
        "flops_per_token": f["flops_per_token"], "tokens": tokens, "steps": steps, "flops": flops,
        "gpu_hours": flops / (mfu * peak) / 3600.0, "seed": int(cfg.run.seed),
    }


def check(sw: Sweep, runs: list[Run] | None = None) -> None:
    """BadInput naming every invalid run (of ``runs``, default all) before anything is submitted."""
    runs = sw.runs if runs is None else runs
    badr = [r for r in runs if r.error]
    if not badr:
        return
    parts = [f"run {r.index} ({' '.join(o for o in r.overrides if o.split('=')[0] in _axis_keys(sw))}): {r.error}"
             for r in badr[:5]]
    more = f"; and {len(badr) - 5} more" if len(badr) > 5 else ""
    raise BadInput(f"sweep {sw.name}: {len(badr)} of {len(runs)} runs are invalid, nothing submitted: "
                   + "; ".join(parts) + more)


def _axis_keys(sw: Sweep) -> set:
    """Override keys that differ between runs (what identifies a run to a reader)."""
    seen: dict = {}
    for r in sw.runs:
        for o in r.overrides:
            k, _, v = o.partition("=")
            seen.setdefault(k, set()).add(v)
    keys = {k for k, vs in seen.items() if len(vs) > 1}
    return keys or set(seen)


def check_data(sw: Sweep, runs: list[Run] | None = None) -> None:
    """Build each distinct data source once (files exist, vocabulary matches);
    failures become run errors.  Not in the dry-run: planning needs no data."""
    import json

    from depthwidth.data import make_source

    seen: dict = {}
    for r in sw.runs if runs is None else runs:
        if r.error:
            continue
        key = json.dumps([r.cfg["data"], r.cfg["train"]["seq_len"]], sort_keys=True, default=str)
        if key not in seen:
            try:
                make_source(dict(r.cfg["data"]), int(r.cfg["train"]["seq_len"]))
                seen[key] = None
            except BadInput as e:
                seen[key] = str(e)
        if seen[key]:
            r.error = seen[key]


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
        raise BadInput(f"--only {pattern!r} matches none of the {len(runs)} runs (glob on run id, label or an override like model.depth=16)")
    return out


def dry_run_rows(sw: Sweep, runs_root: Path) -> list[dict]:
    rows = []
    for r in sw.runs:
        row = {"index": r.index, "run_id": r.run_id, "label": r.label, **r.figures,
               "ref": r.ref, "error": r.error,
               "overrides": r.full_overrides(sw.name, runs_root / sw.name / (r.run_id or "INVALID"))}
        rows.append(row)
    return rows
