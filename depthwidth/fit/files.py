"""What a fit reads and writes, for ``dw fit`` and ``dw fit --match`` alike.

In: the run table (track/run_source.py; a sweep with no ended run is bad input
naming the runs still to come), the sweep's width quantum, a fingerprint of
the table for provenance.  Out: the JSON document (``jsonable``), written
atomically to ``--out`` or beside the sweep's runs (``fit.json``,
``match.json``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from depthwidth.core import provenance
from depthwidth.core.atomic import read_jsonl, write_json
from depthwidth.core.errors import BadInput, bad
from depthwidth.core.store import MANIFEST, manifest_runs, read_json_why, runs_root
from depthwidth.track.run_source import RunSource, RunTable


def read_fit(path) -> dict | None:
    """A fit.json document (``dw fit``'s: keys law and params), or None when ``path`` is absent,
    unreadable or holds something else: what predictions from a sweep's fit read (fit/predict.py)."""
    import json

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and "law" in doc and "params" in doc else None


def read_input(src: RunSource) -> RunTable:
    """The run table of ``src``; a sweep none of whose runs has ended yet is bad input."""
    rt = src.load()
    if rt.sweep_dir is not None and len(rt.df) == 0:
        if (going := unfinished(src.name, rt.sweep_dir, src.root)) is not None:
            raise BadInput(f"sweep {src.name} has no finished run yet ({going})")
        raise bad("sweep", src.name, f"a sweep with at least one run summary.json in {rt.sweep_dir}")
    return rt


def unfinished(name: str, sweep_dir: Path, root=None) -> str | None:
    """ "K started, M pending: dw status NAME" for the sweep's runs that have not ended (the
    manifest's own view: fit may not import launch), or None when every run has ended."""
    submitted = manifest_runs(read_jsonl(sweep_dir / MANIFEST)) if (sweep_dir / MANIFEST).is_file() else {}
    read = {rid: read_json_why(Path(sweep_dir) / rid / "summary.json") for rid in submitted}
    torn = sum(1 for _, why in read.values() if why)  # a run may have ended: its summary cannot say
    going = [
        r
        for rid, r in submitted.items()
        if not read[rid][1] and (read[rid][0] or {}).get("status") in (None, "running")
    ]
    started = sum(1 for r in going if r.get("started"))
    parts = [f"{n} {what}" for n, what in ((started, "started"), (len(going) - started, "not started")) if n]
    if torn:
        parts.append(
            f"{torn} whose summary.json is unreadable (dw sweep {name} --retry-failed rewrites it from its checkpoint)"
        )
    if not parts:
        return None
    see = f"dw status {name}" if root is None else f"DW_RUNS={runs_root(root)} dw status {name}"
    return f"{', '.join(parts)}: {see}"


def sweep_quantum(sweep_dir, table=None) -> int | None:
    """The smallest width quantum (model.quantum) of the runs: a ``quantum`` column, or each run's config.yaml."""
    if table is not None and "quantum" in table:
        q = np.asarray(table["quantum"], dtype=float)
        q = q[np.isfinite(q) & (q >= 1)]
        return int(q.min()) if len(q) else None
    if sweep_dir is None:
        return None
    import yaml

    qs = []
    for f in Path(sweep_dir).glob("*/config.yaml"):
        try:
            q = ((yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("model") or {}).get("quantum")
            qs.append(int(q))
        except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):
            continue
    return min(qs) if qs else None


def table_fingerprint(df) -> str:
    """A hash of the fitted input table (rows in file order, every column), for provenance."""
    return provenance.fingerprint(df.to_csv(index=False))


def check_out(out) -> None:
    """``--out`` names a file (checked before anything is read)."""
    if out is not None and Path(out).is_dir():
        raise bad("--out", str(out), "a file path (not a directory)")


def jsonable(x):
    """Plain JSON values: numpy scalars and arrays as Python ones, non-finite floats as null."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def beside_fit(src: RunSource, opts, out, write: bool, t0: float, schema: str, filename: str, body) -> dict:
    """A document ``dw fit`` makes instead of a law fit and keeps beside fit.json (``--match``:
    match.json, ``--law lr``: lr_fit.json): ``body(df)`` of the run table after ``--where``, with
    the filter, source, provenance and time, written as ``write_document`` writes."""
    import time

    from depthwidth.fit.table import apply_where

    opts.check_sampling()
    check_out(out)
    rt = read_input(src)
    df = apply_where(rt.df, opts.where)
    res = {
        "schema": schema,
        **body(df),
        "where": opts.where_list,
        "source": src.record(rt.sweep_dir),
        "provenance": provenance.record(data=table_fingerprint(df)),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    res = jsonable(res)
    return write_document(res, out, rt.sweep_dir, filename) if write else res


def write_document(doc: dict, out, sweep_dir, filename: str) -> dict:
    """Write ``doc`` to ``out``, else to SWEEP_DIR/``filename`` (a table file without ``--out``:
    nowhere), atomically; ``doc["written"]`` says where."""
    target = Path(out) if out is not None else (Path(sweep_dir) / filename if sweep_dir is not None else None)
    if target is not None:
        write_json(target, doc)
        doc["written"] = str(target)
    return doc
