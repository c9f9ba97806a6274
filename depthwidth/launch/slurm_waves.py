"""launcher=slurm's submissions: one job array per submission, in waves where the scheduler's limit
on queued jobs leaves room for fewer tasks than the submission has.

``submit_array`` submits the first wave now (launch/slurm.py's ``submit_tasks``: submitit's
``map_array``) with a wave job behind it (``--dependency=afterany``) that submits the next wave when
it has ended (``next_wave``, run as ``python -m depthwidth.launch.waves``), and so on.
docs/slurm.md says why, and how a broken chain is resumed (``--retry-failed``).  Every SLURM
command runs through launch/slurm.py; this module decides what to submit and records it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.launch.limits import WAVE_JOB, check_room, cut, halving_groups, largest_group
from depthwidth.launch.slurm import cancel, cpu_job, executor, read_limits, room, sbatch, submit_tasks


def submit_array(name: str, d: Path, tasks_file: Path, n_tasks: int, cfg: dict, entry) -> list[str]:
    """``map_array`` for the submission's ``n_tasks`` tasks (array task i calls ``entry(tasks.json,
    i)``) -> their job ids, in task order (no
    waiting).  Clusters cap an array's size (MaxArraySize) and submitit does not split: more tasks
    than that go in as several arrays, task i of the submission in chunk i // size.  One manifest
    records them all, so ``dw status`` and ``--retry-failed`` see one sweep.

    Waves: when a limit on queued jobs (launch/limits.py) leaves room for fewer than ``n_tasks``
    jobs, only the first wave goes in now, with one wave job (``--dependency=afterany`` on that
    wave) that submits the next wave once it has ended (``next_wave``), and so on.  The tasks of
    later waves get the wave job's id: their runs are ``pending`` on it in ``dw status``."""
    ex = executor(name, d / "submitit", cfg)
    free, lim, in_use = room(read_limits(cfg))
    sizes = [n_tasks] if lim is None else check_room(n_tasks, free, lim, in_use)
    if len(sizes) > 1:  # a halving group goes in whole (limits.cut): one wave must be able to hold it
        groups = halving_groups(json.loads(Path(tasks_file).read_text())["tasks"])
        if (g := largest_group(groups)) > lim.jobs - 2:
            raise BadInput(
                f"a halving tuning group of {g} runs cannot go in one wave under the limit of {lim.jobs} queued "
                f"jobs ({lim.source}: at most {lim.jobs - 2} tasks per wave beside {WAVE_JOB}s); fewer tuned values"
            )
        sizes[0] = cut(groups, sizes[0])
    ids = submit_tasks(ex, tasks_file, list(range(sizes[0])), cfg, entry)  # none: no room but for the wave job
    if len(sizes) == 1:
        return ids
    doc = {"sweep": name, "launcher": cfg, "limit": lim.jobs, "source": lim.source, "in_use": in_use, "tasks": n_tasks}
    doc.update(planned=sizes, waves=[])
    write_json(d / WAVES, doc)  # before the wave job exists: it reads this
    try:
        nxt = submit_wave_job(name, d, cfg, after=ids, begin_s=0 if ids else RETRY_S)
    except (WorkFailed, BadInput):
        cancel(ids)  # the first wave without the job that carries on: nothing half-submitted
        raise
    _record(d, doc, len(ids), ids, nxt, free)
    return ids + [nxt] * (n_tasks - sizes[0])


# ---------------------------------------------------------------------------
# waves: the job that submits the next one (docs/slurm.md, "Waves")
# ---------------------------------------------------------------------------

WAVES = "waves.json"  # in the submission's folder: its launcher settings, the limit, every wave so far
WAVE_SCRIPT = "wave.sh"
WAVE_MINUTES = 15  # the wave job's --time
RETRY_S = 15  # a wave job that finds no room waits this long before it looks again (squeue)
WAIT_S = (WAVE_MINUTES - 3) * 60  # ... for at most this long, then leaves it to a successor


def wave_script(name: str, d: Path, cfg: dict) -> Path:
    """The wave job's sbatch file: one CPU on one node, the runs' partition/account/QOS (its slot
    counts against the same limits), no requeue (a rerun must not submit a wave twice)."""
    return cpu_job(
        d / WAVE_SCRIPT,
        cfg,
        opts=[
            f"--job-name={cfg['job_name'] or f'dw-{name}'}-waves",
            f"--output={d.absolute()}/wave-%j.out",
            f"--time={WAVE_MINUTES}",
            "--no-requeue",
        ],
        comment=f"dw's wave job: submits the next wave of {d.name}'s array tasks when the last one has ended",
        module="depthwidth.launch.waves",
        args=[str(d.absolute())],
    )


def submit_wave_job(name: str, d: Path, cfg: dict, *, after: list[str] | None = None, begin_s: int = 0) -> str:
    """sbatch the wave job of submission ``d``: ``afterany`` the arrays of job ids ``after`` (all
    their tasks ended, whatever their state), or ``begin_s`` seconds from now; -> its job id."""
    script = d / WAVE_SCRIPT
    if not script.is_file():
        wave_script(name, d, cfg)
    opts = []
    if after:
        opts.append("--dependency=afterany:" + ":".join(sorted({j.split("_")[0] for j in after}, key=int)))
    if begin_s:
        opts.append(f"--begin=now+{int(begin_s)}")
    return sbatch(script, WAVE_JOB, *opts)


def _record(d: Path, doc: dict, n: int, ids: list[str], nxt: str | None, free: int | None) -> None:
    doc["waves"].append(
        {
            "wave": len(doc["waves"]) + 1,
            "tasks": n,
            "arrays": sorted({j.split("_")[0] for j in ids}),
            "wave_job": nxt,
            "room": free,
            "time": round(time.time(), 3),
        }
    )
    write_json(d / WAVES, doc)


def _assigned(events: list[dict], event: str) -> dict[str, dict]:
    """run id -> its latest ``event`` (submit, eval_submit) event; a forgotten run has none."""
    latest: dict[str, dict] = {}
    for e in events:
        if e.get("run_id") and e.get("event") == event:
            latest[e["run_id"]] = e
        elif e.get("run_id") and e.get("event") == "forget" and event == "submit":
            latest.pop(e["run_id"], None)
    return latest


def _again(e: dict, job_id: str) -> dict:
    """A run's submit event once more, as the first submission wrote it, with its new job id."""
    return {**{k: v for k, v in e.items() if k != "time"}, "job_id": job_id}


def next_wave(d: Path, me: str, entry, log=print) -> int:
    """The wave job ``me`` of submission ``d`` (``python -m depthwidth.launch.waves DIR``): submit
    the next wave of the tasks whose runs the manifest still gives to ``me``, and, if tasks remain,
    the next wave job; record both in the manifest as the first submission does.  The manifest is
    the one record of what is left: a run forgotten, or resubmitted by hand, since is not
    submitted again.  0 ok; 1 if the chain stops here (its runs then end ``failed`` with this job:
    ``--retry-failed`` submits them)."""
    d = Path(d).absolute()
    tasks_doc = json.loads((d / "tasks.json").read_text())
    doc = store.read_json(d / WAVES)
    if doc is None:
        log(f"no readable {d / WAVES}: nothing submitted")
        return 1
    name, cfg, tasks = tasks_doc["sweep"], doc["launcher"], tasks_doc["tasks"]
    kind = tasks_doc.get("kind", "train")
    event = "submit" if kind == "train" else f"{kind}_submit"
    redo = f"dw sweep {name} --retry-failed" if kind == "train" else f"dw {kind} {name} again"
    t0, limits = time.monotonic(), read_limits(cfg)  # sacctmgr once; squeue at each look
    while True:
        with store.SweepLock(name):  # never while waiting: dw sweep/forget on this sweep go on meanwhile
            latest = _assigned(store.read_manifest(name), event)
            mine = [
                i for i, t in enumerate(tasks) if t and all(latest.get(r["run_id"], {}).get("job_id") == me for r in t)
            ]
            if not mine:
                log(f"{WAVE_JOB} {me}: no task of {d.name} is left to it (all submitted, forgotten or resubmitted)")
                return 0
            free, lim, in_use = room(limits)
            w = len(mine) if free is None or len(mine) <= free else max(0, free - 1)
            w = cut(halving_groups([tasks[i] for i in mine]), w)  # a halving group goes in whole
            if w or time.monotonic() - t0 >= WAIT_S:
                return _wave(name, d, cfg, doc, tasks, mine, w, latest, free, event, redo, log, entry)
        log(f"{WAVE_JOB} {me}: no room ({in_use} of {lim.jobs} queued, {lim.source}); looking again in {RETRY_S} s")
        time.sleep(RETRY_S)


def _wave(name, d, cfg, doc, tasks, mine, w, latest, free, event, redo, log, entry) -> int:
    ids: list[str] = []
    if w:
        try:
            ids = submit_tasks(executor(name, d / "submitit", cfg), d / "tasks.json", mine[:w], cfg, entry)
        except WorkFailed as e:  # the queue filled up meanwhile: a successor tries again later
            log(f"wave of {w} tasks not submitted: {e}")
            w = 0
    rows = [_again(latest[r["run_id"]], j) for i, j in zip(mine[:w], ids) for r in tasks[i]]
    if rows:
        store.append_events(name, rows)  # at once: these jobs exist whatever happens next
    rest, nxt = mine[w:], None
    if rest:
        try:
            nxt = submit_wave_job(name, d, cfg, after=ids, begin_s=0 if ids else RETRY_S)
        except (WorkFailed, BadInput) as e:
            _record(d, doc, w, ids, None, free)
            log(f"{e}; the {len(rest)} task(s) left stay with this job, which ends failed: {redo} submits them")
            return 1
        store.append_events(name, [_again(latest[r["run_id"]], nxt) for i in rest for r in tasks[i]])
    _record(d, doc, w, ids, nxt, free)
    log(
        f"wave {len(doc['waves'])}: {w} task(s) as {' '.join(sorted({j.split('_')[0] for j in ids})) or 'nothing'}"
        + (f"; {len(rest)} left for {WAVE_JOB} {nxt}" if rest else "; none left")
    )
    return 0


def waves_of(name: str, job_ids) -> list[dict]:
    """The waves of the submissions of sweep ``name`` whose first wave job is among ``job_ids``."""
    ids, out = set(job_ids), []
    for p in sorted(store.jobs_dir(name).glob(f"*/{WAVES}")):
        doc = store.read_json(p) or {}
        first = (doc.get("waves") or [{}])[0]
        if first.get("wave_job") in ids:
            out.append({k: doc.get(k) for k in ("limit", "source", "in_use", "tasks", "planned")} | {"first": first})
    return out
