"""Launchers: how a sweep's runs become jobs.  ``launcher=debug|local|slurm``.

debug   in-process, one run after another, with a live progress display.
local   detached worker processes on this machine (one per visible GPU, each
        with its own CUDA_VISIBLE_DEVICES, or ``workers`` CPU workers); returns
        as soon as they are started.
slurm   through submitit (depthwidth/launch_slurm.py): one
        ``SlurmExecutor.map_array`` = one job array for the whole submission;
        returns as soon as sbatch answers.  Every task runs under ``srun``,
        ``tasks_per_node`` processes (one per GPU) with the torch distributed
        environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

Packing: ``pack=N`` puts N runs in one task; they run one after another.

A submission lives in ``runs/NAME/jobs/SUB/``: ``tasks.json`` (task i -> its
runs' override lists), per-task state files (local/debug), logs, and for slurm
submitit's folder ``submitit/`` (sbatch file, pickled calls, logs, results).
Every task calls ``run_task(TASKS.json, I)``, which trains each of its runs
with ``train(compose(overrides))`` (slurm: ``SweepTask(TASKS.json)(I)``, a
submitit Checkpointable; by hand: ``python -m depthwidth.launch task TASKS.json I``).

Preemption: train() checkpoints on SIGUSR2/SIGTERM and raises Preempted.  On
SIGUSR2 (the time limit's warning ``--signal=USR2@signal_delay_s``, or
``scancel --signal=USR2 JOB``; both reach the python processes under srun) the
task requeues only itself with ``scontrol requeue ARRAY_i``; on SIGTERM the
scheduler is already requeueing (preemption, ``scontrol requeue``) or
cancelling the job, so the task only exits.  Between packed runs submitit's own
handler requeues on SIGUSR2.  A requeued task reruns the same pickled call and
each run resumes from its checkpoint in the same run directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from depthwidth.atomic import write_json
from depthwidth.errors import BadInput, bad
from depthwidth import store

LAUNCHERS = ("debug", "local", "slurm")
from depthwidth.train import EXIT_PREEMPTED  # noqa: E402  (train imports torch only when a run starts)


# ---------------------------------------------------------------------------
# launcher configuration (conf/launcher/*.yaml + overrides)
# ---------------------------------------------------------------------------


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(run overrides, launcher overrides): ``launcher=X``, ``launcher.K=V`` and ``pack=N``."""
    runs, launcher = [], []
    for o in overrides or ():
        k = o.split("=", 1)[0].lstrip("+")
        if k == "launcher" or k.startswith("launcher.") or k == "pack":
            launcher.append(o)
        else:
            runs.append(o)
    return runs, launcher


def launcher_config(overrides: Sequence[str] = (), *, need_scheduler: bool = True) -> dict:
    """The chosen launcher's settings as a plain dict; bad names/keys -> BadInput.
    ``need_scheduler``: launcher=slurm requires sbatch on PATH (not for a dry run)."""
    from omegaconf import OmegaConf

    from depthwidth.config import conf_dir
    from depthwidth.sweep import parse_cli_overrides

    groups, keys = parse_cli_overrides(list(overrides))
    name = groups.pop("launcher", None) or _default_launcher()
    if "pack" in groups:
        keys["pack"] = groups.pop("pack")
    if groups:
        raise bad("override", next(iter(groups)), "launcher=NAME, launcher.KEY=VALUE or pack=N")
    if name not in LAUNCHERS:
        raise bad("launcher", name, "|".join(LAUNCHERS))
    path = conf_dir() / "launcher" / f"{name}.yaml"
    if not path.is_file():
        raise BadInput(f"missing launcher config {path}")
    cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    for k, v in keys.items():
        k = k.lstrip("+")
        short = "pack" if k == "pack" else k[len("launcher."):]
        top = short.split(".")[0]
        if top not in cfg or top == "name":
            allowed = ", ".join(f"launcher.{x}" for x in cfg if x != "name")
            raise BadInput(f"unknown launcher key {k!r} for launcher={name} (allowed: {allowed}, pack)")
        if "." in short:
            if not isinstance(cfg[top], dict):
                raise bad(f"launcher.{top}", cfg[top], "a mapping")
            cfg[top][short.split(".", 1)[1]] = v
        else:
            cfg[short] = v
    _check(cfg, need_scheduler)
    return cfg


def _default_launcher() -> str:
    from omegaconf import OmegaConf

    from depthwidth.config import conf_dir

    for d in OmegaConf.load(conf_dir() / "config.yaml").get("defaults", []):
        if isinstance(d, dict) or hasattr(d, "keys"):
            if "launcher" in d:
                return str(d["launcher"])
    return "debug"


def _int(cfg: dict, key: str, lo: int, allow_none: bool = False) -> None:
    v = cfg.get(key)
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise bad(f"launcher.{key}", v, f"an integer >= {lo}" + (" or null" if allow_none else ""))


def _check(cfg: dict, need_scheduler: bool = True) -> None:
    _int(cfg, "pack", 1)
    name = cfg["name"]
    if name == "local":
        _int(cfg, "workers", 1)
        if cfg.get("gpus") not in ("auto", "none"):
            raise bad("launcher.gpus", cfg.get("gpus"), "auto|none")
    if name == "slurm":
        for k, lo in (("gpus_per_node", 0), ("cpus_per_task", 1), ("array_parallelism", 1), ("signal_delay_s", 0)):
            _int(cfg, k, lo)
        _int(cfg, "tasks_per_node", 1, allow_none=True)
        if not isinstance(cfg.get("setup"), list):
            raise bad("launcher.setup", cfg.get("setup"), "a list of shell lines")
        if not isinstance(cfg.get("additional"), dict):
            raise bad("launcher.additional", cfg.get("additional"), "a mapping of sbatch option -> value")
        t = cfg.get("time")
        if not (isinstance(t, int) and t > 0 or isinstance(t, str) and t.replace(":", "").replace("-", "").isdigit()):
            raise bad("launcher.time", t, "minutes (int) or [D-]HH:MM:SS")
        if need_scheduler and shutil.which("sbatch") is None:
            raise BadInput("launcher=slurm but there is no sbatch on PATH (use launcher=local or launcher=debug here)")
    if cfg.get("python") is not None and not isinstance(cfg["python"], str):
        raise bad("launcher.python", cfg["python"], "a path to a Python interpreter or null")


# ---------------------------------------------------------------------------
# submission
# ---------------------------------------------------------------------------


def _sub_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}"


def _python(cfg: dict) -> str:
    return cfg.get("python") or sys.executable


def _env_pythonpath(env: dict) -> dict:
    repo = str(Path(__file__).resolve().parent.parent)
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = repo + (os.pathsep + pp if pp else "")
    return env


def submit(name: str, items: list[dict], cfg: dict, *, show: Callable | None = None) -> list[dict]:
    """Submit ``items`` (dicts: run_id, overrides, run_dir, label, ref, tokens_total,
    params, index) with launcher ``cfg``; returns [{run_id, job_id}].  Appends one
    ``submit`` event per run to the manifest (before the jobs can start, except
    for slurm where the ids exist only once sbatch has answered)."""
    if not items:
        return []
    pack = int(cfg.get("pack", 1))
    tasks = [items[i:i + pack] for i in range(0, len(items), pack)]
    sub = _sub_id()
    d = store.jobs_dir(name) / sub
    d.mkdir(parents=True, exist_ok=True)
    tasks_file = d / "tasks.json"
    write_json(tasks_file, {"sweep": name, "launcher": cfg["name"], "submission": sub,
                            "runs_root": str(store.runs_root().absolute()),
                            "tasks": [[{k: it[k] for k in ("run_id", "overrides", "run_dir")} for it in t] for t in tasks]})
    kind = cfg["name"]
    if kind == "slurm":
        from depthwidth.launch_slurm import submit_array  # imports submitit

        try:
            job_ids = submit_array(name, d, tasks_file, len(tasks), cfg)
        except BaseException:
            shutil.rmtree(d, ignore_errors=True)  # nothing was queued: leave no half submission
            raise
        _register(name, tasks, job_ids, kind)
        return _pairs(tasks, job_ids)
    job_ids = [f"{kind}-{sub}_{i}" for i in range(len(tasks))]
    for i, j in enumerate(job_ids):
        write_json(d / f"task-{i}.json", {"job_id": j, "index": i, "state": "queued"})
    _register(name, tasks, job_ids, kind)
    if kind == "local":
        _spawn_workers(d, tasks_file, cfg)
    else:
        run_debug(name, d, tasks_file, tasks, job_ids, show=show)
    return _pairs(tasks, job_ids)


def _pairs(tasks, job_ids):
    return [{"run_id": it["run_id"], "job_id": j} for t, j in zip(tasks, job_ids) for it in t]


def _register(name, tasks, job_ids, kind):
    rows = []
    for t, j in zip(tasks, job_ids):
        for it in t:
            rows.append({"event": "submit", "run_id": it["run_id"], "job_id": j, "launcher": kind,
                         **{k: it.get(k) for k in ("overrides", "run_dir", "label", "ref", "tokens_total", "params", "index")}})
    store.append_events(name, rows)


# ---- local ---------------------------------------------------------------------


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without importing torch."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, ln in enumerate(out.splitlines()) if ln.startswith("GPU ")]


def _spawn_workers(d: Path, tasks_file: Path, cfg: dict) -> None:
    gpus = visible_gpus() if cfg.get("gpus", "auto") == "auto" else []
    slots = [{"CUDA_VISIBLE_DEVICES": g} for g in gpus] or [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(int(cfg["workers"]))]
    for slot, extra in enumerate(slots):
        env = _env_pythonpath({**os.environ, **extra, "DW_RUNS": str(store.runs_root().absolute())})
        log = open(d / f"worker-{slot}.log", "ab")
        p = subprocess.Popen(
            [_python(cfg), "-m", "depthwidth.launch", "worker", str(tasks_file), str(slot)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, close_fds=True,
        )
        log.close()
        write_json(d / f"worker-{slot}.json", {"pid": p.pid, "slot": slot, "state": "running", **extra})


# ---------------------------------------------------------------------------
# execution (inside a job)
# ---------------------------------------------------------------------------


def _current_job_id(tasks: dict, index: int) -> str:
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if os.environ.get("SLURM_JOB_ID"):
        return os.environ["SLURM_JOB_ID"]
    return f"{tasks['launcher']}-{tasks['submission']}_{index}"


def _distributed_env() -> None:
    """torch.distributed's variables from SLURM's, for multi-task (multi-GPU) runs."""
    e = os.environ
    if int(e.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in e:
        e.setdefault("RANK", e["SLURM_PROCID"])
        e.setdefault("WORLD_SIZE", e["SLURM_NTASKS"])
        e.setdefault("LOCAL_RANK", e.get("SLURM_LOCALID", "0"))


def run_task(tasks_file: str | os.PathLike, index: int, *, log=print, in_process: bool = False) -> int:
    """Train every run of task ``index``; returns an exit code (0 ok, 1 a run failed, 3 preempted)."""
    doc = json.loads(Path(tasks_file).read_text())
    return run_items(doc["sweep"], doc["tasks"][index], _current_job_id(doc, index), log=log, in_process=in_process)


def run_items(name: str, runs: list[dict], job_id: str, *, log=print, in_process: bool = False) -> int:
    from depthwidth.config import compose
    from depthwidth.train import Preempted, train

    _distributed_env()
    rank0 = os.environ.get("RANK", "0") == "0"
    rc = 0
    for it in runs:
        if rank0:
            store.append_events(name, [{"event": "start", "run_id": it["run_id"], "job_id": job_id,
                                        "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
                                        "host": os.uname().nodename, "pid": os.getpid()}])
        try:
            s = train(compose(it["overrides"]), log=lambda m, r=it["run_id"]: log(f"[{r}] {m}"))
            if s.get("status") != "done":
                rc = 1
        except Preempted as e:
            if str(e).startswith("SIGUSR2") and rank0 and not in_process:
                _requeue(log)
            return EXIT_PREEMPTED
        except BadInput as e:  # validated at submission; a changed conf/ can still break it
            log(f"[{it['run_id']}] bad input: {e}")
            rc = 1
        except Exception as e:  # train() has written summary status=failed
            log(f"[{it['run_id']}] failed: {type(e).__name__}: {e}")
            rc = 1
    return rc


def _requeue(log) -> None:
    """Requeue this task only (SLURM_JOB_ID of an array task may name the whole array)."""
    e = os.environ
    jid = f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}" if e.get("SLURM_ARRAY_JOB_ID") else e.get("SLURM_JOB_ID")
    if not jid:
        return
    p = subprocess.run(["scontrol", "requeue", jid], capture_output=True, text=True)
    log(f"requeue {jid}: " + ("ok" if p.returncode == 0 else " ".join(p.stderr.split())))


def _state(d: Path, index: int, **kw) -> None:
    p = d / f"task-{index}.json"
    prev = store._json(p) or {}
    write_json(p, {**prev, **kw})


def _ended(d: Path, index: int, rc: int) -> None:
    """A task's final state from its exit code."""
    _state(d, index, state={0: "completed", EXIT_PREEMPTED: "preempted"}.get(rc, "failed"), rc=rc, ended=time.time())


def worker(tasks_file: str | os.PathLike, slot: int) -> int:
    """A local worker: claim tasks one at a time (O_EXCL claim files) and run them."""
    tf = Path(tasks_file)
    d = tf.parent
    doc = json.loads(tf.read_text())
    me = d / f"worker-{slot}.json"
    write_json(me, {**(store._json(me) or {}), "pid": os.getpid(), "slot": slot, "state": "running"})
    stop: dict = {}
    signal.signal(signal.SIGTERM, lambda s, f: stop.setdefault("sig", s))
    try:
        for i in range(len(doc["tasks"])):
            if stop:
                break
            try:
                fd = os.open(d / f"task-{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            _state(d, i, state="running", pid=os.getpid(), slot=slot, started=time.time())
            rc = run_task(tf, i, log=lambda m: print(m, flush=True), in_process=True)
            _ended(d, i, rc)
            if rc == EXIT_PREEMPTED:
                break
    finally:
        write_json(me, {**(store._json(me) or {}), "state": "exited"})
    return 0


def run_debug(name: str, d: Path, tasks_file: Path, tasks: list, job_ids: list, *, show=None) -> None:
    """In-process: each task in turn, with a live progress bar (blocks)."""
    import threading

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    n_runs = sum(len(t) for t in tasks)
    lines: list = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=show, transient=False) as prog:
        overall = prog.add_task(f"sweep {name}", total=n_runs)
        cur = prog.add_task("", total=1, visible=False)
        halt = threading.Event()
        watch: dict = {}

        def poll():
            while not halt.wait(0.3):
                it = watch.get("it")
                if it is None:
                    continue
                last = store.last_jsonl(Path(it["run_dir"]) / "metrics.jsonl")
                tot = it.get("tokens_total") or 1
                if last and last.get("tokens") is not None:
                    loss = last.get("loss")
                    prog.update(cur, completed=min(last["tokens"], tot), total=tot,
                                description=f"  run {it['run_id']}" + (f"  loss {loss:.3f}" if loss is not None else ""))

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        try:
            for i, t in enumerate(tasks):
                _state(d, i, state="running", pid=os.getpid(), started=time.time())
                rc = 0
                for k, it in enumerate(t):
                    watch["it"] = it
                    prog.update(cur, completed=0, total=it.get("tokens_total") or 1, visible=True,
                                description=f"  run {it['run_id']}")
                    r = run_items(name, [it], job_ids[i], log=lines.append, in_process=True)
                    rc = r if r else rc
                    prog.advance(overall)
                    if r == EXIT_PREEMPTED:
                        break
                _ended(d, i, rc)
                if rc == EXIT_PREEMPTED:
                    break
        finally:
            halt.set()
            th.join(timeout=1)
            prog.update(cur, visible=False)


# ---------------------------------------------------------------------------
# entry point: python -m depthwidth.launch task FILE INDEX | worker FILE SLOT
# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 3 or argv[0] not in ("task", "worker"):
        sys.stderr.write("usage: python -m depthwidth.launch task TASKS.json INDEX | worker TASKS.json SLOT\n")
        return 2
    if argv[0] == "worker":
        return worker(argv[1], int(argv[2]))
    return run_task(argv[1], int(argv[2]), log=lambda m: print(m, flush=True))


if __name__ == "__main__":
    sys.exit(main())
