"""The one run-table loader: a sweep name, a table file (or DataFrame) or W&B, picked once.

``dw fit``, ``dw fit --match`` and ``dw report`` read their runs through
``RunSource(...).load()``: exactly one of a sweep ``name`` (``ROOT/NAME``,
run directories -> table.py), ``runs`` (a csv / jsonl / json / parquet file
or a DataFrame, ``--runs``) or ``kind="wandb"`` with a ``project`` (the W&B
API -> wandb_table.py).  ``columns`` (``--columns loss=final_loss,...``)
maps canonical names to the source's own, whatever the source.  A table that
mixes simulated and trained runs is refused here, once, for every source.

The switch lives here, in ``track/``, because ``fit`` and ``report`` may both
import ``track`` while they may not import each other's loaders
(pyproject.toml's layers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from depthwidth.core.errors import BadInput, bad, key_values
from depthwidth.core.options import Option
from depthwidth.core.store import check_name, runs_root

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
        # the readers, here: dw's CLI builds its flags from SOURCE_OPTIONS without loading them
        from depthwidth.track.table import refuse_mixed, run_table
        from depthwidth.track.wandb_table import run_table_from_wandb

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
