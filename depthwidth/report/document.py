"""The report's document model: what a report is made of, and the numbers it compares against.

``Data`` is one sweep or run table, gathered (load.py); a report is a dict
``{"schema", "source", "tables": {key: Table}, "notes", "figures"}`` whose
tables (tables.py) keep raw values (``rows``: json, csv) and know how to
display themselves (``Col``; render.py).  Published numbers (docs/science.md)
appear in columns labelled *paper*, ours in columns labelled *measured*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from depthwidth.fit.papers import DD_LOSSES
from depthwidth.fit.result import FitDocument
from depthwidth.model.shapes import FAMILIES, LABELS

SCHEMA = "dw.report/1"


FORMATS = ("rich", "markdown", "csv", "json")


SHAPES = FAMILIES  # the width shape families, in the report's order
SHAPE_LABEL = LABELS


DONE = ("done",)


def num(x):
    """float or None (NaN and junk -> None)."""
    from depthwidth.fit.table import finite_or_none

    return finite_or_none(x)


def mean_sd(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return m, sd


def pm(m, sd, fmt="{:.4f}") -> str:
    if m is None:
        return "—"
    return fmt.format(m) + (f" ± {fmt.format(sd)}" if sd is not None else "")


@dataclass
class Data:
    source: dict
    runs: list[dict]  # one per run: run, depth, width, shape, seed, state, loss, tokens, params, ...
    points: list[dict]  # every (run, budget) point with a finite loss
    fit: FitDocument | None  # fit.json, typed (fit/result.py; its verdicts as dw fit decided them)
    probes: list[dict]
    notes: list[str] = field(default_factory=list)
    analyses: list[dict] = field(default_factory=list)  # report.inside.read_analyses: runs' analysis.json
    evals: dict = field(default_factory=dict)  # report.downstream.read_evals: run -> its eval.json
    halving: dict | None = None  # successive halving: {summary: dw status's, groups: {id: halving/ID.json}}
    tuned: dict | None = None  # a tuned sweep: {key, best: {group: best run}, others: runs at other values}


def is_usable(r) -> bool:
    return r["state"] in DONE and r["loss"] is not None and r["depth"] is not None and r["width"] is not None


def is_uniform(r) -> bool:
    return r["shape"] in (None, "uniform")


# override keys that place a run in its cell (or are where and how it runs): everything else is its configuration
CELL_KEYS = ("run.seed", "run.dir", "run.sweep", "model.depth", "model.width", "model.shape")


def config_key(r) -> tuple | None:
    """A run's configuration but for its seed and its cell (depth, width, shape): its other overrides."""
    ov = r.get("overrides")
    if not ov:
        return None
    return tuple(sorted(o for o in ov if str(o).split("=", 1)[0].lstrip("+") not in CELL_KEYS))


def split_conflicts(runs) -> tuple[list, list]:
    """(runs kept, runs apart).  Runs of one (depth, width, shape) cell are averaged only when they
    differ in nothing but the seed: where a cell holds several configurations, the one most runs of
    the sweep share is kept and the others are set apart, each with the overrides that differ
    (a one-off ``train.steps=1000`` run is never averaged with the sweep's 300-step one)."""
    from collections import Counter

    freq = Counter(k for r in runs if (k := config_key(r)) is not None)
    cells: dict = {}
    for r in runs:
        cells.setdefault((r["depth"], r["width"], r["shape"] or "uniform"), []).append(r)
    kept, apart = [], []
    for rs in cells.values():
        keys = {k for r in rs if (k := config_key(r)) is not None}
        if len(keys) <= 1:
            kept += rs
            continue
        best = max(keys, key=lambda k: (freq[k], k))
        for r in rs:
            k = config_key(r)
            if k is None or k == best:
                kept.append(r)
            else:
                extra = [o for o in k if o not in best] or [f"not {o}" for o in best if o not in k]
                apart.append({**r, "differs": ", ".join(extra)})
    order = {id(r): i for i, r in enumerate(runs)}
    kept.sort(key=lambda r: order[id(r)])
    return kept, apart


def group_cells(runs, key=lambda r: (r["depth"], r["width"])) -> dict:
    """key -> {loss, sd, seeds, params, ...} over the done runs of each cell."""
    groups: dict = {}
    for r in runs:
        if is_usable(r):
            groups.setdefault(key(r), []).append(r)
    out = {}
    for k, rs in groups.items():
        m, sd = mean_sd([r["loss"] for r in rs])
        toks = sorted({r["tokens"] for r in rs if r["tokens"] is not None})
        out[k] = {
            "loss": m,
            "sd": sd,
            "seeds": len(rs),
            "runs": [r["run"] for r in rs],
            "params": mean_sd([r["params"] for r in rs])[0],
            "params_non_embedding": mean_sd([r.get("params_non_embedding") for r in rs])[0],
            "flops_per_token": mean_sd([r["flops_per_token"] for r in rs])[0],
            "kv_bytes_per_token": mean_sd([r["kv_bytes_per_token"] for r in rs])[0],
            "flops": mean_sd([r["flops"] for r in rs])[0],
            "tokens": toks[-1] if toks else None,
            "widths": rs[0].get("widths"),
            "depth": rs[0]["depth"],
            "width": rs[0]["width"],
            "shape": rs[0]["shape"] or "uniform",
        }
    return out


PAPER_SWEEPS = ("depth_delusion", "vwt_shapes", "vwt_scaling", "isoflop_depth")  # the shipped grids of the papers


def papers_grid(data) -> bool:
    """Whether a report is of one of the papers' grids: a shipped paper sweep, or runs that carry a
    published reference (their sweep file's ``ref: {source: published}``)."""
    return data.source.get("sweep") in PAPER_SWEEPS or any(
        (r.get("ref") or {}).get("source") == "published" for r in data.runs
    )


def paper_loss(r) -> tuple:
    """(published loss, published params, where from) for a run, or (None, None, None)."""
    ref = r.get("ref") or {}
    if ref.get("source") == "published" and ref.get("loss") is not None:
        return num(ref.get("loss")), num(ref.get("params")), "sweep ref"
    if r.get("ref") is None and is_uniform(r) and (r["depth"], r["width"]) in DD_LOSSES:
        loss, params = DD_LOSSES[(r["depth"], r["width"])]
        return loss, params, "docs/science.md"
    return None, None, None
