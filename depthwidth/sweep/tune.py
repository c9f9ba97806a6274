"""``dw sweep NAME --extend-tuning``: one more value for every tuning group whose best is at an edge.

The groups' picks come from the sweep's finished runs (fit/tuning.py ``picks``: the best measured
value per group, "low"/"high" when it is the grid's first or last); each flagged group gets one
run like its others with the tuned setting at ``next_value`` (one grid step beyond that end,
log-spaced), composed and checked as ``dw sweep`` checks every run (expand.py ``derive``).  The
new run is in the same group (the group id leaves the tuned values out) and joins the sweep's
store: ``dw status`` counts it, ``dw fit`` picks among it and the others, and asking again once it
has finished extends further only if the best is still at the edge.  A group whose extension is
already in the store (queued, running or done) is not extended twice.
"""

from __future__ import annotations

from depthwidth.core import store
from depthwidth.sweep.expand import Run, Sweep, derive


def extensions(sw: Sweep, **plan) -> tuple[list[Run], list[str]]:
    """(the runs that extend each edge group of ``sw``, notes on what was not extended and why)."""
    from depthwidth.fit.tuning import picks
    from depthwidth.track.run_source import run_table

    df = run_table(store.sweep_dir(sw.store))
    if "group" not in df or not len(df):
        return [], ["--extend-tuning: no finished runs of a tuning group yet (the edges are read from their losses)"]
    done = df[df["status"] == "done"]
    found = [p for p in picks(done) if p.edge is not None] if len(done) else []
    new, notes = [], []
    for p in found:
        template = next((r for r in sw.runs if r.group == p.group and not r.error), None)
        if template is None:
            notes.append(f"group {p.group}: not among this sweep's runs now (its file changed?): not extended")
            continue
        r = derive(template, {p.key: p.next_value}, **plan)
        if r.group != p.group:
            notes.append(f"group {p.group}: its extension would form another group ({r.group}): not extended")
            continue
        new.append(r)
    if not found:
        notes.append("--extend-tuning: no group has its best at the edge of its grid: nothing to extend")
    return new, notes
