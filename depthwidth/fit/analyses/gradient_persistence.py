"""Gradient persistence: tau(W) from the runs' per-layer gradient-norm profiles (probes.jsonl),
and D_crit by the 1/e rule per width beside the law's (the statistics: fit/gradient_persistence.py).
Asked for by the data, not by a flag: a sweep whose runs wrote probes.

Fitted on the runs this fit is about: those ``--where`` kept, less failed and diverged runs (their
last profiles are not training's) -- the runs the report's tau(W) figure draws.  Its warnings join
the fit's (fit.json ``warnings``).  Its numbers are shown where they are read beside the law's: the
fit table's tau(W) rows (report/fit_view.py), the D_crit table's 1/e column (report/papers.py) and
the tau(W) figure (report/figs.py); it has no table of its own.
"""

from __future__ import annotations

SECTION = "gradient_persistence"
OPTIONS = ("probe_step", "bootstrap", "level", "seed")
DROPPED = ("failed", "diverged")  # run statuses whose probe profiles tau(W) leaves out


def wanted(ctx) -> bool:
    return ctx.sweep_dir is not None


def section(ctx) -> dict | None:
    import numpy as np

    from depthwidth.fit.gradient_persistence import persistence
    from depthwidth.track.table import probe_profiles

    df, o = ctx.table, ctx.opts
    kept = set(np.asarray(df["run"]).astype(str)) if "run" in df else set()
    profs = [p for p in probe_profiles(ctx.sweep_dir) if p["run"] in kept and p.get("status") not in DROPPED]
    if not profs:
        return None
    gp = persistence(
        profs,
        step=o.probe_step,
        B=o.bootstrap,
        level=o.level,
        seed=o.seed,
        law=ctx.chk.law,
        law_values=ctx.fr.params,
        law_samples=ctx.iv.samples,
    )
    ctx.doc["warnings"] += gp.pop("warnings", [])
    return gp


def tables(fit) -> dict:
    """None of its own: its numbers sit in the fit table and the D_crit table (report/)."""
    return {}
