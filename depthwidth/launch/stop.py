"""``dw stop NAME RUN_ID...``: checkpoint and stop chosen runs of a sweep, under any launcher.

Each run gets the stop its own task already knows, SIGINT (train/signals.py): the run finishes its
step, checkpoints, ends ``preempted`` and is not requeued; ``dw sweep NAME --retry-failed`` resumes
it.  launcher=local: the signal goes to the worker that trains the run (``dw status`` shows it), which
goes on to its next task (local.py); launcher=debug: to the ``dw sweep`` process; launcher=slurm:
``scancel --signal=INT JOB`` delivers it to the job's steps (every rank, under srun).  A run that is
not running is left alone and said so; an id the sweep does not hold is bad input (nothing signalled).
"""

from __future__ import annotations

from depthwidth.core.errors import BadInput
from depthwidth.launch.backend import backend
from depthwidth.launch.status import status


def stop(name: str, run_ids: list[str], root=None) -> list[dict]:
    """Signal each running run of ``run_ids``; one result per id: {run_id, state, stopped, how}."""
    if not run_ids:
        raise BadInput(f"dw stop {name}: name the runs to stop (dw status {name} lists the running ones)")
    st = status(name, root)
    rows = {r["run_id"]: r for r in st["runs"]}
    missing = [x for x in run_ids if x not in rows]
    if missing:
        raise BadInput(
            f"run {missing[0]!r} is not a run of sweep {name}"
            + (f" ({len(missing) - 1} more ids are not either)" if len(missing) > 1 else "")
            + f"; its runs: {', '.join(list(rows)[:6])}{' …' if len(rows) > 6 else ''} (dw status {name})"
        )
    out = []
    for rid in dict.fromkeys(run_ids):
        r = rows[rid]
        res = {"run_id": rid, "state": r["state"], "stopped": False, "how": None}
        out.append(res)
        if r["state"] != "running":
            res["how"] = f"not running ({r['state']}): nothing to stop"
            continue
        stopped, how = backend(r.get("launcher")).stop(r)
        res.update(stopped=stopped, how=how)
    return out
