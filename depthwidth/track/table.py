"""Run tables from run directories: ``runs/SWEEP/RUN_ID/summary.json`` -> rows.

``run_table(sweep_dir)``: one row per token-budget point of every run, from
each run's summary.json (``budgets``; when empty, ``final_val_loss`` at
``tokens``).  ``probe_profiles(sweep_dir)``: per run, its probes.jsonl records
plus width and depth.  Formats: docs/CONTRACTS.md; eval.json (``dw eval``): evaldoc.py.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.core.atomic import read_jsonl
from depthwidth.core.store import MANIFEST, manifest_runs, read_json_why, store_runs, unknown_line
from depthwidth.track import evaldoc

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
    from depthwidth.core.errors import BadInput

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
