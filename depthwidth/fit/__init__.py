"""``dw fit`` as a library: fit a loss law to a run table, with bootstrap intervals.

    from depthwidth.fit import fit
    res = fit("demo", law="depth-delusion", where=["shape=uniform"])   # a sweep under $DW_RUNS
    res = fit(runs="gemstones.jsonl", law="chinchilla", bootstrap=200)  # any run table (csv, jsonl, parquet)
    res = fit(runs=df, law="chinchilla", write=False)                   # or a pandas DataFrame
    res["params"], res["ci"], res["derived"], res["provenance"]
    m = flops_to_match(df)   # FLOPs to match uniform: m.rows[i].flops_fraction, .flops_fraction_ci, m.curves

Modules: laws.py (laws as data), solver.py + engine.py (the robust multi-start
fit), checks.py, boot.py (bootstrap), derived.py (D_crit, optimal shape),
compare.py (laws side by side), persistence.py (gradient persistence),
table.py (run tables in), run.py (the whole ``dw fit``: ``run_fit``), match.py
(FLOPs to match uniform: ``flops_to_match``, ``dw fit --match``).
"""

from __future__ import annotations

from depthwidth.fit.match import flops_to_match
from depthwidth.fit.run import run_fit

__all__ = ["fit", "flops_to_match", "run_fit"]


def fit(name: str | None = None, *, law: str = "chinchilla", **options) -> dict:
    """``dw fit NAME --law LAW ...``: the fit.json document (written for a sweep unless ``write=False``)."""
    return run_fit(name, law=law, **options)
