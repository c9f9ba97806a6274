"""The report's provenance section: which code, versions, devices and
precisions produced a sweep's runs (each run's summary.json ``provenance``)
and its fit (fit.json ``provenance``), with a warning when one sweep mixes
commits, dirty trees or precisions."""

from __future__ import annotations

from depthwidth.core.provenance import mixed
from depthwidth.core.tables import Col, Table
from depthwidth.fit.result import FitDocument


def _key(p: dict) -> tuple:
    g, v = p.get("git") or {}, p.get("versions") or {}
    return (
        p.get("dw"),
        g.get("commit"),
        g.get("dirty"),
        p.get("precision"),
        p.get("device"),
        v.get("python"),
        v.get("torch"),
        v.get("numpy"),
        v.get("scipy"),
        p.get("data"),
    )


def provenance_table(runs: list[dict], fit: FitDocument | None) -> tuple[Table, list[str]]:
    """(table: one row per distinct provenance, with the number of runs; warnings)."""
    recs = [r.get("provenance") for r in runs if isinstance(r.get("provenance"), dict)]
    groups: dict = {}
    for p in recs:
        groups.setdefault(_key(p), []).append(p)
    rows = []
    for k, ps in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        dw, commit, dirty, prec, dev, py, torch, np_, sp, data = k
        rows.append(
            {
                "runs": len(ps),
                "dw": dw,
                "commit": (commit or "unknown")[:12],
                "dirty": dirty,
                "precision": prec,
                "device": dev,
                "python": py,
                "torch": torch,
                "numpy": np_,
                "scipy": sp,
                "data": data,
                "job_ids": sorted({p.get("job_id") for p in ps if p.get("job_id")})[:3],
            }
        )
    cols = [
        Col("runs", "runs"),
        Col("commit", "commit"),
        Col("dirty", "dirty tree"),
        Col("precision", "precision"),
        Col("device", "device"),
        Col("dw", "dw"),
        Col("torch", "torch"),
        Col("numpy", "numpy"),
        Col("python", "python"),
        Col("data", "data fingerprint"),
    ]
    t = Table("provenance", "Provenance: the code, versions and devices behind these runs", cols, rows)
    missing = len(runs) - len(recs)
    if missing:
        t.notes.append(f"{missing} of {len(runs)} runs record no provenance (older dw or no summary yet)")
    if fit is not None and fit.provenance:  # a fit.json without provenance (made by hand): none
        fp = fit.provenance
        g = fp.get("git") or {}
        t.notes.append(
            f"fit.json: dw {fp.get('dw')}, commit {(g.get('commit') or 'unknown')[:12]}"
            + (" (dirty tree)" if g.get("dirty") else "")
            + f", input table {fp.get('data')}"
        )
    warnings = mixed(recs)
    t.notes += warnings
    return t, warnings
