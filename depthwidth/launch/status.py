"""``dw status``: every submitted run of a sweep, joined from the manifest, each
run directory's summary.json and the tail of its metrics.jsonl, and the
scheduler's view of the run's latest job (launch/scheduler.py)."""

from __future__ import annotations


from depthwidth.core.atomic import torn_tail
from depthwidth.core.errors import BadInput
from depthwidth.core.store import (
    checkout_store,
    known_sweeps,
    last_jsonl,
    manifest_runs,
    outside,
    read_json_why,
    read_manifest,
    run_folder,
    runs_root,
    sweep_dir,
    unknown_folders,
    unknown_line,
)
from depthwidth.launch.backend import backend
from depthwidth.launch.halving import groups as halving_groups
from depthwidth.launch.slurm import SchedulerUnknown

STATES = (
    "pending",
    "running",
    "waiting",
    "done",
    "pruned",
    "failed",
    "diverged",
    "preempted",
    "cancelled",
    "lost",
    "unknown",
)
# waiting: parked at its first budget until its tuning group decides; pruned: the worse half there
# (successive halving, launch/halving.py): neither is retried
# never "unknown" (it may still be running), nor "diverged" (the same run diverges again: --retry-diverged)
RETRYABLE = ("failed", "cancelled", "lost")
MISSING = ".no-such-run"  # the folder of a run whose id is no folder name: never there
# a run's JSONL files whose torn last line dw status reports, and what becomes of it
TORN_CHECKED = {
    "metrics.jsonl": "the run's resume restores it from its checkpoint, or re-derives it",
    "probes.jsonl": "the run's resume restores it from its checkpoint, or re-derives it",
    "failures.jsonl": "a failed attempt's record cut short: skipped, the next one starts on a new line",
}
# the early warning (fit/run_forecast.py fills them in; dw status asks it to): the forecast final loss
# of a running run, why there is none, the law's prediction for the run and whether the two disagree
FORECAST_KEYS = {"forecast": None, "forecast_note": None, "law_pred": None, "flag": None}


def run_state(
    summary: dict | None, sched: str | None, started: bool = False, known: bool = True, decided: bool = False
) -> str:
    """The run's state from its summary.json and its latest job's (normalised) scheduler state:
    pending | running | completed | failed | cancelled | preempted | parked | None (the scheduler does not know it).
    ``known=False``: the scheduler could not be asked, so a run that has not ended is ``unknown``.
    ``decided``: a ``waiting`` run's tuning group has decided (it is released: pending, then running;
    a released run that no job will run is ``preempted``, which --retry-failed resumes)."""
    s = (summary or {}).get("status")
    if s in ("done", "diverged", "pruned"):
        return s
    if s == "waiting" and known:
        if sched == "running":
            return "running"
        if sched == "cancelled":
            return "cancelled"
        if not decided:
            return "waiting"
        return "pending" if sched == "pending" else "preempted"
    if not known:
        return "failed" if s == "failed" else "unknown"
    if sched == "pending":
        return "preempted" if s == "preempted" else "pending"
    if sched == "running":
        if s == "failed" and not started:
            return "failed"
        return "running" if started or s in ("running", "preempted") else "pending"  # packed: not yet started
    if sched in ("cancelled", "preempted"):
        return sched
    if sched in ("failed", "completed"):  # a stopped run's job exits 3 (EXIT_PREEMPTED): failed to SLURM
        return "preempted" if s == "preempted" else "failed"
    return "failed" if s == "failed" else "lost"


def status(name: str, root=None) -> dict:
    """Every submitted run of sweep NAME in the run store ``root`` (None: $DW_RUNS, else ./runs):
    state, progress, last loss, attempts."""
    bad_lines: list[int] = []
    events = read_manifest(name, bad_lines, root)
    problems = (
        [
            f"manifest: {len(bad_lines)} unreadable line(s) skipped (line "
            + ", ".join(map(str, bad_lines[:5]))
            + (", ..." if len(bad_lines) > 5 else "")
            + ")"
        ]
        if bad_lines
        else []
    )
    if not events:
        if (other := checkout_store(name, root)) is not None:
            raise BadInput(
                f"no sweep {name!r} in {runs_root(root).absolute()}; its store is {other}: run dw from "
                f"{other.parent.parent}, or set DW_RUNS={other.parent}"
            )
        raise BadInput(
            f"no sweep {name!r} in {runs_root(root).absolute()} (DW_RUNS chooses the runs directory, "
            f"else ./runs; sweeps with a manifest there: {', '.join(known_sweeps(root)) or 'none'})"
        )
    runs = manifest_runs(events)
    jobs: dict = {}  # each backend's runs' job ids: one question to each (SLURM: one sacct call)
    for r in runs.values():
        jobs.setdefault(backend(r.get("launcher")).name, []).append(r["job_id"])
    views, why = {}, None  # backend name -> (job id -> raw state, why the scheduler could not say)
    procs: dict = {}  # local: job id -> the worker (slot, pid) that trains it
    for b, ids in jobs.items():
        try:
            views[b] = (backend(b).states(name, ids, root, procs), None)
        except SchedulerUnknown as e:
            views[b] = ({}, str(e))
            why = why or str(e)
    began = {e["run_id"]: e for e in events if e.get("event") == "start" and e.get("run_id")}  # the latest start
    retried_as = {r["retry_of"]: rid for rid, r in runs.items() if r.get("retry_of")}
    decided = {g for g, doc in halving_groups(name, root).items() if doc.get("decision")}
    rows = []
    store = sweep_dir(name, root)
    if line := unknown_line(store, unknown_folders(store, {e.get("run_id") for e in events})):
        problems.append(line)
    for r in runs.values():
        # the run's folder is STORE/RUN_ID whatever the manifest's run_dir says (core/store.outside)
        rd = run_folder(store, r["run_id"]) or store / MISSING
        if (away := outside(store, r)) is not None:
            problems.append(
                f"{r['run_id']}: {away[0]} is {away[1]!r}, not {away[2]}: commands that write or delete refuse "
                "this store until the manifest is fixed"
            )
        summ, unread = read_json_why(rd / "summary.json")
        if unread is not None:
            problems.append(
                f"{r['run_id']}: summary.json unreadable ({unread}): {rd / 'summary.json'}; dw sweep {name} "
                "--retry-failed rewrites it from the run's checkpoint"
            )
        if summ is not None and summ.get("run_id") not in (None, r["run_id"]):
            summ = None
        for f in TORN_CHECKED:
            if torn_tail(rd / f) is not None:
                problems.append(f"{r['run_id']}: {f} ends in a torn line ({TORN_CHECKED[f]})")
        last = last_jsonl(rd / "metrics.jsonl")
        b = backend(r.get("launcher"))
        raw, unknown = views[b.name]
        sched_raw = raw.get(r["job_id"])
        sched = b.normal(sched_raw)
        state = run_state(
            summ,
            sched,
            r.get("started", False),
            known=unknown is None,
            decided=r.get("group") in decided,
        )
        gone = None
        if state in ("failed", "lost") and summ is None and unread is None and not rd.is_dir():  # ended, no folder
            state = "lost"
            gone = (
                f"run directory {rd} does not exist (deleted or moved, or the job ended before writing it); "
                f"dw sweep {name} --retry-failed trains the run again"
            )
        total = (summ or {}).get("tokens_total") or r.get("tokens_total")
        tok = max((summ or {}).get("tokens") or 0, (last or {}).get("tokens") or 0)
        loss = (last or {}).get("loss")
        if loss is None and summ:
            loss = summ.get("last_loss")
        rows.append(
            {
                "run_id": r["run_id"],
                "state": state,
                "tokens": tok,
                "tokens_total": total,
                "progress": min(1.0, tok / total) if total else None,
                "last_loss": loss,
                "final_val_loss": (summ or {}).get("final_val_loss"),
                "attempts": r["attempts"],
                "job_id": r["job_id"],
                "jobs": r["jobs"],
                "scheduler_state": sched_raw,
                "launcher": r.get("launcher"),
                "label": r.get("label"),
                "group": r.get("group"),
                "reason": (summ or {}).get("reason") or (f"summary.json unreadable ({unread})" if unread else gone),
                "flops_planned": (summ or {}).get("flops_planned"),
                "flops_saved": (summ or {}).get("flops_saved"),
                "run_dir": str(rd),
                "params": r.get("params"),
                "overrides": r.get("overrides"),
                **shape_of(summ, r.get("overrides"), r),
                **process_of(state, r, procs.get(r["job_id"]), began.get(r["run_id"])),
                "seed": (summ or {}).get("seed", seed_of(r.get("overrides"))),
                "tuned": r.get("tuned") or {},
                "retry_of": r.get("retry_of"),
                "retried_as": retried_as.get(r["run_id"]),
                **FORECAST_KEYS,
            }
        )
    counts = {s: 0 for s in STATES}
    for row in rows:
        counts[row["state"]] += 1
    return {
        "sweep": name,
        "total": len(rows),
        "counts": counts,
        "halving": halving_summary(rows, halving_groups(name, root)),
        "runs": rows,
        "scheduler_unknown": why,
        "problems": problems,
    }


def halving_summary(rows: list[dict], groups: dict) -> dict | None:
    """Successive halving across the sweep: groups decided of all, runs pruned, and the compute they
    did not spend (FLOPs, and the share of the planned FLOPs of every run with a summary)."""
    if not groups:
        return None
    saved = sum(r["flops_saved"] or 0.0 for r in rows if r["state"] == "pruned")
    planned = sum(r["flops_planned"] or 0.0 for r in rows)
    return {
        "groups": len(groups),
        "decided": sum(1 for d in groups.values() if d.get("decision")),
        "pruned": sum(1 for r in rows if r["state"] == "pruned"),
        "waiting": sum(1 for r in rows if r["state"] == "waiting"),
        "flops_saved": saved,
        "flops_planned": planned,
        "saved_fraction": saved / planned if planned else None,
    }


def halving_line(h: dict | None) -> str | None:
    """``dw status``'s one line on successive halving (None: the sweep does not halve)."""
    if not h:
        return None
    frac = f" ({h['saved_fraction']:.0%} of the runs' planned compute)" if h["saved_fraction"] is not None else ""
    wait = f"; {h['waiting']} waiting for their group" if h["waiting"] else ""
    return (
        f"halving: {h['decided']} of {h['groups']} groups decided, {h['pruned']} runs pruned{wait}; "
        f"compute saved {h['flops_saved']:.3g} FLOPs{frac}"
    )


def process_of(state: str, run: dict, worker: dict | None, start: dict | None) -> dict:
    """Where a running run trains: ``worker`` (local: the worker's slot; SLURM: the host of its latest
    start) and ``pid`` (the process a stop signal goes to: ``dw stop``, ``kill -INT``); None otherwise."""
    if state != "running":
        return {"worker": None, "pid": None, "host": None}
    start = start if start and start.get("job_id") == run.get("job_id") else {}
    if worker is not None:
        return {"worker": f"local {worker.get('slot')}", "pid": worker.get("pid"), "host": start.get("host")}
    host = start.get("host")
    return {"worker": host, "pid": start.get("pid"), "host": host}


def seed_of(overrides) -> int | None:
    """``run.seed`` as the run's overrides set it (None: the config's default)."""
    for o in overrides or []:
        key, _, val = str(o).lstrip("+").partition("=")
        if key == "run.seed":
            try:
                return int(val)
            except ValueError:
                return None
    return None


SHAPE_KEYS = {"model.depth": "depth", "model.width": "width", "model.shape": "shape"}


def shape_of(summary: dict | None, overrides, planned: dict | None = None) -> dict:
    """{depth, width, shape}: the run's summary.json once it has one, else what the submission
    planned (its manifest event), else what its overrides set (None where they leave it to the
    model config; ``model.widths=[...]``: shape ``custom``)."""
    out: dict = {k: (planned or {}).get(k) for k in ("depth", "width", "shape")}
    custom = False
    for o in overrides or []:
        key, _, val = str(o).lstrip("+").partition("=")
        if key in SHAPE_KEYS:
            out[SHAPE_KEYS[key]] = int(val) if key != "model.shape" and val.isdigit() else val
        elif key == "model.widths":
            custom = val not in ("", "null", "None", "[]")
    if custom:  # as summary.json says it
        out["shape"] = "custom"
    for k in out:
        if (summary or {}).get(k) is not None:
            out[k] = summary[k]
    return out


def summary_line(st: dict) -> str:
    c = st["counts"]
    parts = [f"{c[s]} {s}" for s in STATES if c[s]]
    n = st["total"]
    why = st.get("scheduler_unknown")
    return (
        f"{st['sweep']}: {n} run{'s' * (n != 1)} — "
        + (", ".join(parts) if parts else "none")
        + (f" (scheduler state unknown: {why})" if why else "")
    )


def varied_columns(rows: list) -> tuple:
    """``seed`` and each tuned setting (``optim.lr``) where the rows hold more than one value: what tells
    two runs of one configuration apart (dw status, the dry run)."""
    keys = [k for r in rows for k in (r.get("tuned") or {})]
    cols = tuple(dict.fromkeys(k for k in keys if len({repr((r.get("tuned") or {}).get(k)) for r in rows}) > 1))
    return (("seed",) if len({r.get("seed") for r in rows}) > 1 else ()) + cols


def varied_cell(r: dict, col: str) -> str:
    v = r.get("seed") if col == "seed" else (r.get("tuned") or {}).get(col)
    return "" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)
