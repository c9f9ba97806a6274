"""A run table made ready for a law: ``--where`` filters, then cleaning (``prepare``).

The table itself is loaded once, for every command, by track/run_source.py
(a sweep, a table file or W&B, ``--columns`` mapped to the canonical names
``params, tokens, loss, depth, width, flops, seed, run, status, shape``).

Cleaning never silently drops data: rows of diverged or failed runs and rows
with a non-finite value in a column the law reads are excluded and listed;
a finite value <= 0 where a logarithm is taken is bad input (exit 2).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.errors import BadInput, bad, key_values
from depthwidth.fit.laws import is_user
from depthwidth.fit.userlaw import long_table

LOG_TAKEN = ("params", "tokens", "loss", "depth", "width")
EXCLUDED_STATUS = ("diverged", "failed")


def apply_where(df, where):
    """Keep the rows matching every ``COLUMN=VALUE`` filter (``--where shape=uniform``)."""
    if not where:
        return df
    import pandas as pd

    have = [str(c) for c in df.columns]
    for col, val in key_values(where, "--where", "COLUMN=VALUE, e.g. shape=uniform"):
        if col not in have:
            raise bad("--where", f"{col}={val}", "a column of the table: " + ", ".join(have[:30]))
        num = pd.to_numeric(pd.Series([val]), errors="coerce").iloc[0]
        colv = df[col]
        if pd.notna(num) and pd.api.types.is_numeric_dtype(colv):
            df = df[colv == num]
        else:
            df = df[colv.astype(str) == val]
    if len(df) == 0:
        raise bad("--where", ",".join(map(str, where)), "filters that leave at least one row")
    return df


UNIFORM = ("uniform", "None", "nan", "")  # a run's shape as tables write the uniform one (or none)


def one_shape(df, law, opts):
    """A law with no shape term on runs of several width shapes: (table, pooled, note).

    Pooling shapes under a law that cannot tell them apart lets their differences pass for the
    law's own terms (a planted world whose D_crit lay beyond every run was "identified" from
    uniform and × runs pooled).  So by default such a fit keeps the uniform runs and says so;
    ``--pool-shapes`` (``opts.pool_shapes``) fits every run and ``pooled`` names why no verdict is
    claimed; a ``--where`` on the shape column is the user's own choice and is left alone.  A
    table of several shapes none of them uniform is bad input (which shape, or pool)."""
    if "shape" not in df or any(str(w).split("=", 1)[0].strip() == "shape" for w in (opts.where or [])):
        return df, None, None
    if any(c == "shape" or str(c).startswith("shape=") for c in law.columns):
        return df, None, None  # the law reads the shape (a user law's indicator columns)
    shape = df["shape"].astype(str)
    uniform = shape.isin(UNIFORM)
    kinds = sorted(set(shape[~uniform]))
    if not kinds:
        return df, None, None
    n_runs = lambda m: df.loc[m, "run"].nunique() if "run" in df else int(m.sum())  # noqa: E731
    if opts.pool_shapes:
        why = f"{n_runs(~uniform)} of {n_runs(shape == shape)} runs have a non-uniform width shape ({', '.join(kinds)})"
        return (
            df,
            f"{why} and {law.name} has no shape term: the fit pools them (--pool-shapes)",
            f"{why}: pooled (--pool-shapes); no verdict is claimed",
        )
    if not uniform.any():
        raise BadInput(
            f"bad value for the run table: runs of several width shapes ({', '.join(kinds)}) and none uniform, "
            f"and {law.name} has no shape term (allowed: --where shape=SHAPE for one of them, or --pool-shapes)"
        )
    note = (
        f"fitted on the {n_runs(uniform)} uniform runs: {n_runs(~uniform)} runs of other width shapes "
        f"({', '.join(kinds)}) are left out because {law.name} has no shape term (--pool-shapes fits every run, "
        "with no verdict; --where shape=SHAPE fits one shape)"
    )
    return df[uniform], None, note


def prepare(df, law):
    """Validate and clean ``df`` for ``law``.

    Returns (clean DataFrame with a fresh index, excluded list, notes).
    """
    import pandas as pd

    df = (long_table(df, law) if is_user(law) else df).copy()  # a multi-output law's table: one row per run and output
    notes: list[str] = []
    cols = set(map(str, df.columns))
    if "tokens" in law.columns and "tokens" not in cols and {"flops", "params"} <= cols:
        df["tokens"] = pd.to_numeric(df["flops"], errors="coerce") / (
            6.0 * pd.to_numeric(df["params"], errors="coerce")
        )
        notes.append("tokens derived as flops / (6 * params)")
        cols.add("tokens")
    for c in law.columns:  # an indicator (a user law's X: shape=x): 1 where the column equals the value
        col, eq, value = c.partition("=")
        if eq and col in cols:
            df[c] = (df[col].astype(str) == value).astype(float)
            cols.add(c)
    need = ("loss",) + tuple(law.columns)
    missing = [c for c in need if c not in cols]
    if missing:
        raise BadInput(
            f"missing columns for law {law.name}: {', '.join(missing)} "
            f"(table has: {', '.join(sorted(cols))[:300]}; map with --columns NAME=COLUMN)"
        )
    for c in need:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    if "run" not in cols:
        notes.append("no run column: each row is treated as its own run (bootstrap and hold-outs resample rows)")
        df["run"] = [f"row{i}" for i in range(len(df))]
    df["run"] = df["run"].astype(str)

    excluded: list[dict] = []
    keep = np.ones(len(df), dtype=bool)
    if "status" in cols:
        st = df["status"].astype(str).str.lower()
        for s in EXCLUDED_STATUS:
            m = (st == s).to_numpy() & keep
            for run, k in _count_by_run(df, m):
                excluded.append({"run": run, "points": k, "reason": f"status {s}"})
            keep &= ~m
    vals = df[list(need)].to_numpy(dtype=float)
    nonfinite = ~np.isfinite(vals)
    for j, c in enumerate(need):
        m = nonfinite[:, j] & keep
        for run, k in _count_by_run(df, m):
            excluded.append({"run": run, "points": k, "reason": f"non-finite {c}"})
        keep &= ~m
    for j, c in enumerate(need):
        if c in LOG_TAKEN and not (c == "loss" and law.objective == "raw"):  # objective: raw fits L itself
            bad_rows = np.flatnonzero(keep & (vals[:, j] <= 0))
            if len(bad_rows):
                i = int(bad_rows[0])
                raw = "; a user law with objective: raw fits the loss itself, of any sign" if c == "loss" else ""
                raise BadInput(
                    f"bad value for {c}: {float(vals[i, j])!r} in row {i} (run {df['run'].iloc[i]}) "
                    f"(allowed: > 0, its logarithm is taken; {len(bad_rows)} such row(s){raw})"
                )
    if law.options.get("dcrit") == "log":
        w = vals[:, list(need).index("width")]
        if (keep & (w <= 1)).any():
            raise bad("width", float(w[keep & (w <= 1)][0]), "> 1 for --dcrit log (D_crit = kappa*ln W)")
    clean = df[keep].reset_index(drop=True)
    if len(clean) == 0:
        raise BadInput(
            f"bad value for table: no usable rows after exclusions ({_summ(excluded)}) (allowed: finite rows of runs "
            "that did not diverge)"
        )
    return clean, excluded, notes


def _count_by_run(df, mask):
    if not mask.any():
        return []
    runs = df["run"].to_numpy()[mask]
    u, k = np.unique(runs, return_counts=True)
    return [(str(a), int(b)) for a, b in zip(u, k)]


def _summ(excluded: list[dict]) -> str:
    if not excluded:
        return "none excluded"
    n = sum(e["points"] for e in excluded)
    return f"{n} point(s) excluded: " + "; ".join(f"{e['run']} ({e['reason']})" for e in excluded[:3])


def finite_or_none(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def last_points(df):
    """One row per run: its last token budget (its largest ``tokens``; without that column, its
    last row), the run's final model."""
    if "tokens" in df:
        df = df.sort_values("tokens", kind="stable")
    return df.groupby("run", sort=False).tail(1)
