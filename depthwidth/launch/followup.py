"""A sweep's follow-up: ``dw sweep NAME ... --then fit,report[,analyze,eval]``.

When every run of the sweep has ended, the follow-up runs the actions, in order, as the
commands a user would type (``dw fit NAME``, ``dw report NAME --plots runs/NAME/report``,
``dw analyze NAME``, ``dw eval NAME``), each with the arguments the sweep file's ``then:``
mapping gives it (``then: {fit: "--law depth-delusion", eval: "--tasks dw_heldout_cloze"}``),
and writes a one-line summary to ``runs/NAME/DONE``.  What it will run is recorded in the
manifest (a ``then`` event), so ``dw status`` shows it and a later submission finds it.

Who runs it, with no process left waiting on the login node:

slurm   a CPU job (``FOLLOWUP``) submitted held before the arrays, so that it has its slot under
        a queue limit, then given ``--dependency=afterany`` on every array of the submission and
        released.  When it starts, runs may still be in flight (a requeue, a later wave, a
        ``--retry-failed`` resubmission): it requeues itself behind their jobs (held, new
        dependency, released) and ends.  Runs SLURM ended OUT_OF_MEMORY or TIMEOUT, which it
        does not requeue, are retried here (launch/retry.py: the same cap), and it waits again.
        ``launcher.mail``: SLURM mails when this job ends or fails (``--mail-type=END,FAIL``).
local   the last worker to stop runs it.
debug   ``dw sweep`` runs it once the runs have trained.

A submission to the sweep while a follow-up waits adds its arrays to the dependency; one after
the follow-up has run arms it again with the recorded actions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_text
from depthwidth.core.errors import bad
from depthwidth.launch.backend import backend
from depthwidth.launch.slurm import cancel as scancel
from depthwidth.launch.slurm import clean_env, cpu_job, scontrol
from depthwidth.launch.slurm import dependencies as _dependencies
from depthwidth.launch.slurm import known as _known
from depthwidth.launch.slurm import pending as _pending
from depthwidth.launch.slurm import sbatch as submit_job

ACTIONS = ("fit", "report", "analyze", "eval")
DONE = "DONE"
FOLLOWUP = "dw's follow-up job"
MINUTES = 120  # the follow-up job's --time: a fit and a report of a large sweep take minutes
IN_FLIGHT = ("pending", "running", "waiting", "unknown")  # + preempted under SLURM while its job is queued
QUEUED = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RUNNING", "CONFIGURING", "COMPLETING")
RETRIED_HERE = ("OUT_OF_MEMORY", "TIMEOUT", "PREEMPTED")  # job states SLURM ends without requeueing
LOOK_AGAIN_S = 300  # runs in flight whose jobs the queue no longer shows (sacct lagging): look again later


def parse(spec: str) -> list[str]:
    """``fit,report`` -> ["fit", "report"]; ``none``: no action (the follow-up still retries what
    SLURM ended without requeue and writes DONE); BadInput naming what is allowed."""
    if str(spec).strip() == "none":
        return []
    acts = [a.strip() for a in str(spec).split(",") if a.strip()]
    for a in acts:
        if a not in ACTIONS:
            raise bad("--then", a, f"a comma list of {', '.join(ACTIONS)} (e.g. fit,report)")
    if not acts or len(set(acts)) != len(acts):
        raise bad("--then", spec, f"a comma list of distinct actions of {', '.join(ACTIONS)}, or none")
    return acts


def argv(name: str, action: str, args: list[str]) -> list[str]:
    """The dw command line of one action."""
    extra = ["--plots", str(store.sweep_dir(name) / "report")] if action == "report" else []
    return [action, name, *extra, *args]


def record(name: str) -> dict | None:
    """The sweep's follow-up as last armed (its manifest ``then`` event), or None."""
    ev = [e for e in store.read_manifest(name) if e.get("event") == "then"]
    return ev[-1] if ev else None


def arm(name: str, actions: list[str], args: dict, cfg: dict) -> dict:
    """Record the follow-up (and under SLURM submit its job, held until ``attach``)."""
    rec = {"event": "then", "actions": actions, "args": args, "launcher": cfg["name"], "job_id": None, "cfg": cfg}
    old = record(name)
    if backend(cfg["name"]).cluster:  # the follow-up is a job of its own, held until attach
        rec["job_id"] = _sbatch_held(name, cfg)
        if old and old.get("job_id") and _pending(old["job_id"]):
            scancel([old["job_id"]])  # one follow-up at a time
    store.append_events(name, [rec])
    return rec


def attach(rec: dict, job_ids: list[str]) -> None:
    """The follow-up job waits for ``job_ids`` (their arrays), then is released."""
    if rec.get("job_id"):
        _depend(rec["job_id"], job_ids)
        _scontrol("release", rec["job_id"])


def cancel(rec: dict) -> None:
    """The follow-up job of a submission that failed: nothing is left waiting."""
    backend(rec.get("launcher")).cancel([rec["job_id"]])


def extend(rec: dict, job_ids: list[str]) -> bool:
    """A waiting follow-up job also waits for ``job_ids`` (a later submission); False if it is not
    waiting any more (it has run, or runs)."""
    j = rec.get("job_id")
    if not j or not _pending(j):
        return False
    deps = sorted({*_dependencies(j), *(x.split("_")[0] for x in job_ids)}, key=int)
    _depend(j, deps)
    return True


def run(name: str, me: str | None = None, *, log=print) -> int:
    """Be the follow-up of sweep ``name`` (``me``: its SLURM job id; None for local/debug): wait again
    if runs are in flight, else run the actions and write DONE.  0 ok, 1 an action failed."""
    from depthwidth.launch.status import status

    rec = record(name)
    if rec is None:
        log(f"{name}: no follow-up recorded")
        return 0
    if me is not None and rec.get("job_id") != me:
        log(f"{FOLLOWUP} {me}: superseded by job {rec.get('job_id')}; nothing to do")
        return 0
    if me is None:  # local / debug: under a lock, and not again once it has run for this record
        with store.FileLock(store.sweep_dir(name) / ".then.lock"):
            if _ran(name, rec):
                return 0
            return _run(name, rec, None, log, status)
    return _run(name, rec, me, log, status)


def _ran(name: str, rec: dict, root=None) -> bool:
    """Whether DONE was written after ``rec`` was armed."""
    done = store.sweep_dir(name, root) / DONE
    return done.is_file() and done.stat().st_mtime >= float(rec.get("time") or 0)


def _run(name: str, rec: dict, me: str | None, log, status) -> int:
    st = status(name)
    slurm = backend(rec.get("launcher")).requeues  # its jobs requeue: a preempted run may be queued
    if slurm:
        from depthwidth.launch.halving import release_decided

        release_decided(name)  # a parked run whose release SLURM refused before: released now
    flight = [
        r
        for r in st["runs"]
        if r["state"] in IN_FLIGHT or (slurm and r["state"] == "preempted" and r.get("scheduler_state") in QUEUED)
    ]
    if not flight and me is not None:
        with store.SweepLock(name):  # as a submission does: a --retry-failed at the same time sees it
            flight = _retry_died(name, status(name), rec, log)
    if flight:
        if me is None:  # local: the worker still training runs the follow-up when it stops
            log(f"{name}: {len(flight)} run(s) still in flight; the follow-up waits for them")
            return 0
        jobs = sorted({r["job_id"].split("_")[0] for r in flight if r.get("job_id")}, key=_num)
        log(f"{FOLLOWUP} {me}: {len(flight)} run(s) still in flight: waiting for job(s) {', '.join(jobs)}")
        _wait_for(me, jobs)
        return 0
    said = []
    for a in rec["actions"]:
        cmd = [sys.executable, "-m", "depthwidth", *argv(name, a, list(rec.get("args", {}).get(a, [])))]
        log("$ dw " + " ".join(cmd[3:]))
        p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        log((p.stdout + p.stderr)[-4000:])
        said.append(f"{a}: {'ok' if p.returncode == 0 else f'exit {p.returncode}'}")
    from depthwidth.launch.status import summary_line

    line = f"{summary_line(st)}; " + ("; ".join(said) or "no actions") + time.strftime("; %Y-%m-%dT%H:%M:%S%z")
    write_text(store.sweep_dir(name) / DONE, line + "\n")
    log(f"wrote {store.sweep_dir(name) / DONE}: {line}")
    return 0 if all(s.endswith(": ok") for s in said) else 1


def line(name: str, root=None) -> str | None:
    """``dw status``'s line on the follow-up (None: the sweep has none)."""
    try:
        ev = [e for e in store.read_manifest(name, None, root) if e.get("event") == "then"]
    except OSError:
        return None
    if not ev:
        return None
    rec = ev[-1]
    what = ", ".join(rec["actions"]) or "no action"
    done = store.sweep_dir(name, root) / DONE
    if _ran(name, rec, root):
        return f"follow-up ({what}) ran: {done.read_text().strip()}"
    who = f"job {rec['job_id']}" if rec.get("job_id") else f"the last {rec.get('launcher')} worker"
    return f"follow-up ({what}): {who} runs it once every run has ended; then runs/{name}/{DONE}"


# -- SLURM ------------------------------------------------------------------------------------


def _num(j: str) -> int:
    try:
        return int(j)
    except ValueError:
        return 0


def _script(name: str, cfg: dict) -> Path:
    d = store.sweep_dir(name) / "jobs"
    d.mkdir(parents=True, exist_ok=True)
    opts = [
        f"--job-name={cfg.get('job_name') or f'dw-{name}'}-then",
        f"--output={d.absolute()}/then-%j.out",
        "--open-mode=append",  # requeued behind runs in flight, it keeps one log
        f"--time={MINUTES}",
        "--requeue",  # it requeues itself behind runs still in flight
    ]
    if cfg.get("mail"):
        opts += [f"--mail-user={cfg['mail']}", "--mail-type=END,FAIL"]
    what = f"{FOLLOWUP} of sweep {name}: when its runs have ended, dw {' / '.join(ACTIONS)} as recorded"
    return cpu_job(
        d / f"then-{name}.sh", cfg, opts=opts, comment=what, module="depthwidth.launch.followup", args=[name]
    )


def _sbatch_held(name: str, cfg: dict) -> str:
    return submit_job(_script(name, cfg), FOLLOWUP, "--hold")


def _scontrol(*args: str) -> bool:
    return scontrol(*args, who=FOLLOWUP)


def _depend(job: str, job_ids: list[str]) -> None:
    arrays = sorted({j.split("_")[0] for j in job_ids if j}, key=_num)
    live = [a for a in arrays if _known(a)]  # an array the controller has forgotten cannot be depended on
    _scontrol("update", f"JobId={job}", "Dependency=" + ("afterany:" + ":".join(live) if live else ""))


def _wait_for(me: str, jobs: list[str]) -> None:
    """Requeue this job held, behind ``jobs`` (those the queue still shows; none: a begin time
    LOOK_AGAIN_S ahead, so that it never spins), and release it (it ends here; SLURM runs it again)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the requeue's SIGTERM must not cut the next steps
    live = [j for j in jobs if _known(j)]
    if _scontrol("requeuehold", me):
        _depend(me, live)
        if not live:
            _scontrol("update", f"JobId={me}", f"StartTime=now+{LOOK_AGAIN_S}")
        _scontrol("release", me)


def _retry_died(name: str, st: dict, rec: dict, log) -> list[dict]:
    """Runs SLURM ended OUT_OF_MEMORY or TIMEOUT (no requeue): each is retried from its checkpoint,
    under the launcher's cap (launch/retry.py); the runs resubmitted (now in flight)."""
    from depthwidth.launch import retry
    from depthwidth.launch.submit import submit

    cfg = rec.get("cfg") or {}
    pol = retry.Policy(int(cfg.get("max_retries", 0)), 0.0)
    latest = {}
    for e in store.read_manifest(name):
        if e.get("event") == "submit":
            latest[e["run_id"]] = e
    items = []
    for r in st["runs"]:
        if r["state"] not in ("failed", "preempted") or r.get("scheduler_state") not in RETRIED_HERE:
            continue
        s = store.read_json(Path(r["run_dir"]) / "summary.json") or {}
        if s.get("status") not in ("running", "preempted"):
            continue  # it ended itself (an error): its own task has had its say
        err = f"{retry.DIED} ({r['scheduler_state']}, job {r['job_id']})"
        past = retry.record(r["run_dir"], "died", err, r["job_id"])
        v = retry.verdict(past, pol)
        log(f"[{r['run_id']}] {v.reason}")
        retry.mark_failed(r["run_dir"], v.reason)  # its attempt has ended: the next one must not count it again
        if not v.retry:
            continue
        e = latest[r["run_id"]]
        if (away := store.outside(store.sweep_dir(name), e)) is not None:
            log(f"[{r['run_id']}] not resubmitted: {away[0]} is {away[1]!r}, not {away[2]} (a corrupt manifest)")
            continue
        keys = ("run_id", "overrides", "run_dir", "label", "ref", "tokens_total", "params", "index", "group", "tuned")
        extra = ("depth", "width", "shape", "halving")
        it = {k: e.get(k) for k in keys} | {k: e[k] for k in extra if k in e}
        it = store.in_store(store.sweep_dir(name), it)  # a store since moved: its runs train where it is now
        items.append((it, e.get("launcher_cfg") or cfg))
    if not items:
        return []
    clean_env()  # the arrays it submits must not inherit this job's allocation
    by_cfg: dict = {}  # each run with its own launcher settings (a block's GPUs, its time limit)
    for it, c in items:
        by_cfg.setdefault(json.dumps(c, sort_keys=True, default=str), (c, []))[1].append(it)
    pairs = [p for c, its in by_cfg.values() for p in submit(name, its, c)]
    return [{"run_id": p["run_id"], "job_id": p["job_id"]} for p in pairs]


def main(argv_: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv_ is None else argv_)
    me = os.environ.get("SLURM_JOB_ID")
    if len(args) != 1 or not me:
        sys.stderr.write("usage (inside its SLURM job): python -m depthwidth.launch.followup NAME\n")
        return 2
    return run(args[0], me, log=lambda m: print(m, flush=True))


if __name__ == "__main__":
    sys.exit(main())
