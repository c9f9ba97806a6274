"""``dw forget NAME RUN_ID…``: runs that are no longer one of the sweep's, without deleting anything.

A one-off invocation (``dw sweep NAME train.steps=1000 --only …``) leaves runs of another
configuration in the store, and the runs it planned but never started read ``lost`` in every
later status.  Forgetting appends a ``forget`` event per run to the manifest (the append-only
record keeps everything: the run's submit events, its directory, its files); ``dw status``, the
run table, ``dw fit`` and ``dw report`` then leave the run out (core/store.py ``forgotten``).
Submitting the run again (``dw sweep``) brings it back.  A run that may still be running
(pending, running, unknown) is refused: forgetting it would let a second job write its directory.
"""

from __future__ import annotations

from depthwidth.core import store
from depthwidth.core.errors import BadInput, bad
from depthwidth.launch.status import STATES, status

BUSY = ("pending", "running", "unknown")


def forget(name: str, run_ids=(), states=(), reason: str | None = None) -> dict:
    """Forget ``run_ids`` and every run in one of ``states``; {forgotten: [{run_id, state}], remaining}."""
    for s in states:
        if s not in STATES or s in BUSY:
            raise bad("--state", s, " | ".join(x for x in STATES if x not in BUSY))
    if not run_ids and not states:
        raise BadInput(
            "bad value for runs: nothing (allowed: one or more RUN_IDs, or --state STATE, e.g. --state lost)"
        )
    if not store.manifest_path(name).is_file():
        status(name)  # no such sweep: its one line, before the lock file would create the sweep's folder
    with store.SweepLock(name):
        st = status(name)
        rows = {r["run_id"]: r for r in st["runs"]}
        unknown = [r for r in run_ids if r not in rows]
        if unknown:
            raise bad("RUN_ID", unknown[0], f"a run of sweep {name} ({len(rows)} runs; dw status {name})")
        pick = list(dict.fromkeys([*run_ids, *(r for r, x in rows.items() if x["state"] in states)]))
        busy = [r for r in pick if rows[r]["state"] in BUSY]
        if busy:
            raise bad(
                "RUN_ID",
                busy[0],
                f"a run that has ended: it is {rows[busy[0]]['state']} (wait for it, or cancel its job first)",
            )
        store.append_events(
            name, [{"event": "forget", "run_id": r, "state": rows[r]["state"], "reason": reason} for r in pick]
        )
    return {
        "sweep": name,
        "forgotten": [{"run_id": r, "state": rows[r]["state"]} for r in pick],
        "remaining": len(rows) - len(pick),
    }
