"""The one run-table loader: a sweep name, a table file (or DataFrame) or W&B, picked once.

``dw fit``, ``dw fit --match`` and ``dw report`` read their runs through
``RunSource(...).load()``: exactly one of a sweep ``name`` (``ROOT/NAME``,
run directories -> ``run_table``), ``runs`` (a csv / jsonl / json / parquet file
or a DataFrame, ``--runs``) or ``kind="wandb"`` with a ``project`` (the W&B
API -> ``run_table_from_wandb``): both readers live here too, in the sections
below the switch.  ``columns`` (``--columns loss=final_loss,...``)
maps canonical names to the source's own, whatever the source.  A table that
mixes simulated and trained runs is refused here, once, for every source.

The switch lives here, in ``track/``, because ``fit`` and ``report`` may both
import ``track`` while they may not import each other's loaders
(pyproject.toml's layers).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from depthwidth.config.schema import WANDB_ENTITY, WANDB_ENTITY_ALLOWED, WANDB_NAME, WANDB_NAME_ALLOWED
from depthwidth.core.atomic import read_jsonl
from depthwidth.core.errors import BadInput, WorkFailed, bad, key_values
from depthwidth.core.options import Option
from depthwidth.core.store import (
    MANIFEST,
    check_name,
    manifest_runs,
    read_json_why,
    runs_root,
    store_runs,
    unknown_line,
)
from depthwidth.model.shapes import ALIASES
from depthwidth.track import evaldoc

KINDS = ("store", "wandb")

# Where runs are read from: the options of ``dw fit`` and ``dw report`` (besides the sweep NAME
# argument), and the keywords of ``run_fit`` (``--match`` too) and ``report.load``: ``RunSource.take``.
SOURCE_OPTIONS = (
    Option("runs", None, "a run table (.csv, .jsonl, .parquet) instead of a sweep", "a table file", kind=Path),
    Option(
        "columns",
        None,
        "map canonical names to the table's, e.g. loss=final_loss,params=params_active_precise (names: params, "
        "tokens, loss, depth, width, flops, seed, run)",
        "NAME=COLUMN pairs",
    ),
    Option("root", None, "run store root (default $DW_RUNS or ./runs)", "a folder"),
    Option(
        "source",
        "store",
        "store (a sweep NAME or --runs FILE) | wandb (pull the run table from the W&B API)",
        " | ".join(KINDS),
    ),
    Option("project", None, "with --source wandb: ENTITY/PROJECT", "ENTITY/PROJECT"),
    Option("group", None, "with --source wandb: only runs of this group (sweep)", "a W&B group"),
)
CANONICAL = ("params", "tokens", "loss", "depth", "width", "flops", "seed", "run", "status", "shape")


def parse_columns(spec: str | None) -> dict[str, str]:
    """``"loss=final_loss,params=p"`` -> {canonical: source column}."""
    out: dict[str, str] = {}
    if spec is None:
        return out
    for k, v in key_values(spec, "--columns", "NAME=COLUMN pairs, e.g. loss=final_loss,params=params_active_precise"):
        if k not in CANONICAL:
            raise bad("--columns", k, ", ".join(CANONICAL))
        if not v:
            raise bad(f"--columns {k}", v, "a column name of the table")
        out[k] = v
    return out


def apply_columns(df, mapping: dict[str, str]):
    """Rename mapped source columns to canonical names (sources must exist)."""
    have = [str(c) for c in df.columns]
    for k, src in mapping.items():
        if src not in have:
            raise bad(f"--columns {k}", src, "columns of the table: " + ", ".join(have[:30]))
    ren = {src: k for k, src in mapping.items()}
    # a canonical name that is also present under its own name loses to the mapping
    drop = [k for k in mapping if k in have and mapping[k] != k]
    out = df.drop(columns=drop).rename(columns=ren)
    out.attrs.update(df.attrs)  # what the reader noted (unreadable summaries, the W&B project) stays
    return out


def read_table(path: str | os.PathLike):
    """csv, jsonl (or json lines/records) or parquet -> DataFrame (a DataFrame is copied)."""
    import pandas as pd

    if isinstance(path, pd.DataFrame):
        return path.copy()
    p = Path(path)
    if not p.is_file():
        raise bad("--runs", str(path), "an existing csv, jsonl or parquet file")
    ext = p.suffix.lower().lstrip(".")
    try:
        if ext == "csv":
            df = pd.read_csv(p)
        elif ext in ("jsonl", "ndjson"):
            df = pd.read_json(p, lines=True)
        elif ext == "json":
            try:
                df = pd.read_json(p, lines=True)
            except ValueError:
                df = pd.read_json(p)
        elif ext in ("parquet", "pq"):
            df = pd.read_parquet(p)
        else:
            raise bad("--runs", str(path), "a file ending in .csv, .jsonl, .json or .parquet")
    except BadInput:
        raise
    except Exception as e:  # unreadable content is the user's file, not our failure
        first = (str(e).strip().splitlines() or [""])[0][:120]
        raise BadInput(
            f"bad value for --runs: {str(path)!r} (allowed: a readable {ext} table; {type(e).__name__}: {first})"
        ) from None
    if len(df) == 0:
        raise bad("--runs", str(path), "a table with at least one row")
    return df


@dataclass(frozen=True)
class RunTable:
    """A loaded run table: ``df`` (canonical columns), the sweep directory (None for a file or
    W&B) and ``label``, what it was read from in one phrase (titles, errors)."""

    df: object
    sweep_dir: Path | None
    label: str


@dataclass(frozen=True)
class RunSource:
    """Where a run table comes from; constructing one checks that exactly one source is named."""

    name: str | None = None
    runs: object = None  # a table file's path or a DataFrame
    columns: str | None = None
    root: str | os.PathLike | None = None
    kind: str = "store"
    project: str | None = None
    group: str | None = None
    warn: object = None  # where a store's warning line goes (folders it does not count); None: stderr

    @classmethod
    def take(cls, name, settings: dict) -> "RunSource":
        """The source named by ``name`` (a sweep name, or a ``RunSource``) and the source options in
        ``settings`` (SOURCE_OPTIONS' names: ``runs=``, ``root=``, ``source="wandb"`` ...), which
        are taken out of it; the rest stays for the caller."""
        given = {o.name: settings.pop(o.name) for o in SOURCE_OPTIONS if o.name in settings}
        if isinstance(name, RunSource):
            if given:
                raise TypeError(f"a RunSource and source keywords {sorted(given)} together")
            return name
        kw = {o.name: given.get(o.name, o.default) for o in SOURCE_OPTIONS}
        return cls(name, kw["runs"], kw["columns"], kw["root"], kw["source"], kw["project"], kw["group"])

    def __post_init__(self):
        if self.kind not in KINDS:
            raise bad("--source", self.kind, " | ".join(KINDS))
        given = [
            x
            for x, on in (
                ("a sweep name", self.name is not None),
                ("--runs", self.runs is not None),
                ("--source wandb", self.kind == "wandb"),
            )
            if on
        ]
        if len(given) != 1:
            raise BadInput(
                "bad value for input: "
                + (" and ".join(given) if given else "nothing")
                + " (allowed: exactly one of NAME, --runs FILE or --source wandb --project ENTITY/PROJECT)"
            )
        if self.kind == "wandb" and not self.project:
            raise bad("--project", self.project, "ENTITY/PROJECT, required with --source wandb")

    @property
    def runs_label(self) -> str | None:
        """The ``--runs`` input as a document records it ("DataFrame" for an in-memory table)."""
        if self.runs is None:
            return None
        return "DataFrame" if hasattr(self.runs, "columns") else str(self.runs)

    def record(self, sweep_dir: Path | None) -> dict:
        """The source as a fit or match document records it."""
        return {
            "sweep": self.name,
            "dir": str(sweep_dir) if sweep_dir else None,
            "runs": self.runs_label,
            "columns": self.columns,
        }

    def sweep_dir(self) -> Path:
        """ROOT/NAME of a sweep source (bad input when it is not a directory)."""
        d = runs_root(self.root) / check_name(self.name)
        if not d.is_dir():
            raise bad("sweep", self.name, f"a sweep directory under {runs_root(self.root)} (set --root or DW_RUNS)")
        return d

    def load(self) -> RunTable:
        """The run table, columns mapped; a sweep's table may be empty (no run has ended yet)."""
        mapping = parse_columns(self.columns)
        if self.kind == "wandb":
            df = run_table_from_wandb(self.project, self.group)
            label, where = df.attrs["source"], None
        elif self.runs is not None:
            df, label, where = read_table(self.runs), str(self.runs_label), None
        else:
            where = self.sweep_dir()
            df, label = run_table(where), f"sweep {self.name}"
            if df.attrs.get("warning"):
                (self.warn or _stderr_warning)(df.attrs["warning"])
        df = apply_columns(df, mapping)
        refuse_mixed(df, label)
        return RunTable(df, where, label)


def _stderr_warning(line: str) -> None:
    import sys

    sys.stderr.write(f"dw: warning: {line}\n")  # one line, never wrapped


# -- Run tables from run directories: ``runs/SWEEP/RUN_ID/summary.json`` -> rows ---------------------------
# ``run_table(sweep_dir)``: one row per token-budget point of every run, from
# each run's summary.json (``budgets``; when empty, ``final_val_loss`` at
# ``tokens``).  ``probe_profiles(sweep_dir)``: per run, its probes.jsonl records
# plus width and depth.  Formats: docs/CONTRACTS.md; eval.json (``dw eval``): evaldoc.py.

TABLE_COLUMNS = (
    "run",
    "params",
    "params_non_embedding",
    "params_active",
    "tokens",
    "loss",
    "depth",
    "width",
    "flops",
    "seed",
    "shape",
    "status",
    "step",
    "mean_width",
    "kv_bytes_per_token",
    "simulated",
)


def _summaries(sweep_dir: str | Path):
    """(run_dir, summary dict or None, why unreadable) for every run of the store with a summary.json:
    exactly the manifest's runs (store.store_runs: one per run id, forgotten ones left out), in
    folder-name order; and the folders not counted (a copy of a run, a run the manifest does not
    know), which the caller names in one warning line."""
    dirs, unknown = store_runs(Path(sweep_dir))
    out = []
    for rid, d in sorted(dirs.items(), key=lambda kv: kv[1].name):
        f = d / "summary.json"
        if not f.is_file():
            continue
        s, why = read_json_why(f)
        if s is not None and str(s.get("run_id") or rid) != rid:
            s, why = None, f"it is the summary of run {s.get('run_id')!r}, not of {rid!r}"
        out.append((d, s, why))
    return out, unknown


def _groups(sweep_dir) -> tuple[dict[str, str], dict[str, dict]]:
    """(run id -> tuning group id, run id -> its tuned values), from the manifest's submit events
    (empty when nothing is tuned)."""
    path = Path(sweep_dir) / MANIFEST
    if not path.is_file():
        return {}, {}
    runs = {rid: r for rid, r in manifest_runs(read_jsonl(path)).items() if r.get("group")}
    return {rid: r["group"] for rid, r in runs.items()}, {rid: r.get("tuned") or {} for rid, r in runs.items()}


def _num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def mean_width(widths, width) -> float:
    """Mean of the per-layer widths w_i; a run without a ``widths`` list is uniform at ``width``."""
    try:
        ws = [float(w) for w in widths]
    except (TypeError, ValueError):
        ws = []
    return sum(ws) / len(ws) if ws else _num(width)


def run_table(sweep_dir: str | Path):
    """DataFrame with one row per token-budget point of every run in ``sweep_dir``.

    Columns: run, params (every tensor: the total count), params_non_embedding
    (total less the token embedding and an untied LM head), params_active (what
    one token uses: the total for a dense model, router + top-k experts for MoE),
    tokens, loss, depth, width, flops (= flops_per_token * tokens), seed, shape,
    status, step, mean_width (mean of the per-layer widths w_i),
    kv_bytes_per_token, simulated (a run written by ``dw simulate``, not trained); ``group`` (its
    tuning group, sweep file ``tune:``) and one column per tuned setting (``optim.lr``) when the
    sweep tunes; then one
    ``METRIC:TASK`` column per downstream metric in the runs' eval.json (``dw eval``), set on the
    row of the step that was evaluated (the final one, usually) and NaN elsewhere: an earlier
    budget point is another model.  Runs whose summary.json cannot be read are listed in
    ``df.attrs["unreadable"]`` (``df.attrs["unreadable_why"]``: run -> why); the rows are exactly the
    manifest's runs, one run per run id (store.store_runs), and the folders not counted are named in
    ``df.attrs["not_counted"]`` with the one warning line about them in ``df.attrs["warning"]``.
    """
    import pandas as pd

    rows: list[dict] = []
    unreadable: list[str] = []
    downstream: set[str] = set()
    groups, tuned = _groups(sweep_dir)
    tuned_cols = sorted({k for t in tuned.values() for k in t})
    why_unreadable: dict[str, str] = {}
    found, unknown = _summaries(sweep_dir)
    for d, s, why in found:
        if s is None:
            unreadable.append(d.name)
            why_unreadable[d.name] = why
            continue
        base = {
            "run": str(s.get("run_id") or d.name),
            "params": _num(s.get("params")),
            "params_non_embedding": _num(s.get("params_non_embedding")),
            "params_active": _num(s.get("params_active")),  # summaries before it was recorded: NaN
            "depth": _num(s.get("depth")),
            "width": _num(s.get("width")),
            "seed": s.get("seed"),
            "shape": s.get("shape"),
            "status": s.get("status"),
            "mean_width": mean_width(s.get("widths"), s.get("width")),
            "kv_bytes_per_token": _num(s.get("kv_bytes_per_token")),
            "simulated": bool((s.get("provenance") or {}).get("simulated")),
            **({"group": groups.get(str(s.get("run_id") or d.name))} if groups else {}),
            **{k: _num(tuned.get(str(s.get("run_id") or d.name), {}).get(k)) for k in tuned_cols},
        }
        fpt = _num(s.get("flops_per_token"))
        budgets = s.get("budgets") or []
        points = [(b.get("tokens"), b.get("val_loss"), b.get("step")) for b in budgets if isinstance(b, dict)]
        if not points:
            points = [(s.get("tokens"), s.get("final_val_loss"), s.get("steps"))]
        evals = evaldoc.columns(evaldoc.read(d)) if (Path(d) / evaldoc.FILE).is_file() else {}  # most runs have none
        downstream.update(evals)
        for tokens, loss, step in points:
            t = _num(tokens)
            at_step = {k: _num(v) for k, (evaluated, v) in evals.items() if evaluated is not None and evaluated == step}
            rows.append({**base, "tokens": t, "loss": _num(loss), "flops": fpt * t, "step": step, **at_step})
    extra = (["group"] if groups else []) + tuned_cols
    df = pd.DataFrame(rows, columns=[*TABLE_COLUMNS, *extra, *sorted(downstream)])
    df.attrs["unreadable"] = unreadable
    df.attrs["unreadable_why"] = why_unreadable
    df.attrs["not_counted"] = unknown
    df.attrs["warning"] = unknown_line(Path(sweep_dir), unknown)
    return df


def refuse_mixed(df, what: str) -> None:
    """A table that mixes simulated (``dw simulate``) and trained runs is bad input: planted numbers
    would read as measured ones."""
    if "simulated" not in df or not len(df):
        return
    # a table without a run column: each row is its own run, as the fit treats it
    per_run = df.groupby("run")["simulated"].first() if "run" in df else df["simulated"]
    sim = int(per_run.astype(bool).sum())
    if 0 < sim < len(per_run):
        raise BadInput(
            f"bad value for {what}: it mixes {sim} simulated run(s) (dw simulate) with "
            f"{len(per_run) - sim} trained run(s) (allowed: a store of trained runs only, or of "
            "simulated runs only: planted losses would read as measured ones)"
        )


def probe_profiles(sweep_dir: str | Path) -> list[dict]:
    """Per run with a probes.jsonl: {run, width, depth, seed, shape, status, probes: [records]}."""
    out = []
    for d, s, _ in _summaries(sweep_dir)[0]:
        f = d / "probes.jsonl"
        if s is None or not f.is_file():
            continue
        out.append(
            {
                "run": str(s.get("run_id") or d.name),
                "width": s.get("width"),
                "depth": s.get("depth"),
                "seed": s.get("seed"),
                "shape": s.get("shape"),
                "status": s.get("status"),
                "probes": read_jsonl(f),
            }
        )
    return out


# -- Run tables pulled from the W&B API (``dw fit/report --source wandb``) ---------------------------------
# ``run_table_from_wandb("ENTITY/PROJECT", group)`` returns the same columns as
# ``run_table`` (above): one row per token-budget point of every run,
# read from what ``tracking.WandbMirror`` writes: the run summary (``budgets``,
# ``final_val_loss``, ``params``, ``flops_per_token``, ``depth``, ``width``,
# ``shape``, ``seed``, ``status``) and, for a run that never finished (no
# summary written), its config (``accounting``, ``model``, ``run``).
#
# One API query lists the runs with their config and summary (``lazy=False``);
# ``wandb`` is imported only when no ``api`` is passed.

# W&B run states -> dw status, for runs whose summary has no dw status
_STATES = {"running": "running", "pending": "pending", "finished": "done"}
_PROJECT = re.compile(f"{WANDB_ENTITY}/{WANDB_NAME}")


def _wandb_num(x) -> float:  # the W&B rows' float conversion (named apart from the run table's _num)
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _family(model: dict) -> str | None:
    if not model:
        return None
    if model.get("widths"):
        return "custom"

    s = model.get("shape")
    return ALIASES.get(s, s) if s is not None else None


def rows_for_run(run_id: str, summary: dict, config: dict, state: str | None = None) -> list[dict]:
    """Table rows of one W&B run from its summary and config (plain dicts)."""
    summary, config = dict(summary or {}), dict(config or {})
    acc = config.get("accounting") or {}
    model = config.get("model") or {}
    run_cfg = config.get("run") or {}
    pick = lambda key, fallback: summary.get(key) if summary.get(key) is not None else fallback  # noqa: E731
    status = summary.get("status") or _STATES.get(str(state or "").lower(), "failed")
    base = {
        "run": str(summary.get("run_id") or config.get("run_id") or run_id),
        "params": _wandb_num(pick("params", acc.get("params"))),
        "params_non_embedding": _wandb_num(pick("params_non_embedding", acc.get("params_non_embedding"))),
        "params_active": _wandb_num(pick("params_active", acc.get("params_active"))),
        "depth": _wandb_num(pick("depth", model.get("depth"))),
        "width": _wandb_num(pick("width", model.get("width"))),
        "seed": pick("seed", run_cfg.get("seed")),
        "shape": pick("shape", _family(model)),
        "status": status,
        "mean_width": mean_width(summary.get("widths"), acc.get("mean_width", pick("width", model.get("width")))),
        "kv_bytes_per_token": _wandb_num(pick("kv_bytes_per_token", acc.get("kv_bytes_per_token"))),
        "simulated": bool((summary.get("provenance") or config.get("provenance") or {}).get("simulated")),
    }
    fpt = _wandb_num(pick("flops_per_token", acc.get("flops_per_token")))
    budgets = summary.get("budgets") or []
    points = [(b.get("tokens"), b.get("val_loss"), b.get("step")) for b in budgets if isinstance(b, dict)]
    if not points:
        points = [(summary.get("tokens"), summary.get("final_val_loss"), summary.get("steps"))]
    out = []
    for tokens, loss, step in points:
        t = _wandb_num(tokens)
        out.append(
            {
                **base,
                "tokens": t,
                "loss": _wandb_num(loss),
                "flops": fpt * t if math.isfinite(t) else float("nan"),
                "step": step,
            }
        )
    return out


def run_table_from_wandb(project: str, group: str | None = None, api=None):
    """DataFrame of the runs of ``ENTITY/PROJECT`` (optionally one group = one sweep).

    ``api``: a ``wandb.Api`` (default: a new one, which needs a key / login and
    network).  Columns as ``run_table``.
    """
    import pandas as pd

    if not isinstance(project, str) or not _PROJECT.fullmatch(project):
        raise BadInput(
            f"bad value for --project: {project!r} (allowed: ENTITY/PROJECT; "
            f"ENTITY {WANDB_ENTITY_ALLOWED}; PROJECT {WANDB_NAME_ALLOWED})"
        )
    if api is None:
        try:
            import wandb

            api = wandb.Api(timeout=60)
        except Exception as e:
            raise WorkFailed(
                f"cannot reach the W&B API: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
            ) from None
    filters = {"group": group} if group else None
    rows: list[dict] = []
    try:
        for r in api.runs(project, filters=filters, per_page=200, lazy=False):
            rows += rows_for_run(r.id, r.summary_metrics, r.config, getattr(r, "state", None))
    except (BadInput, WorkFailed):
        raise
    except Exception as e:
        raise WorkFailed(
            f"W&B API query for {project} failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        ) from None
    df = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    df.attrs["source"] = f"wandb:{project}" + (f" group {group}" if group else "")
    df.attrs["unreadable"] = []
    return df
