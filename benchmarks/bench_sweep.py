"""Timing targets of dw sweep / dw status (not tests: run by hand or in CI's bench job).

    python benchmarks/bench_sweep.py                 # dry-run + status
    python benchmarks/bench_sweep.py --slurm         # + a real 30-task array on the test cluster
                                                     #   (SLURM_CONF set, e.g. scripts/slurm_cluster.sh start)
    python benchmarks/bench_sweep.py --demo          # + the demo sweep, launcher=local, 2 CPU workers

    python benchmarks/bench_sweep.py --scale         # + 10,000 configurations of the depth_delusion preset

Targets: dry-run of the 30-run grid <= 1 s (whole command, fresh interpreter);
status of a 1,000-run manifest <= 1 s; submission returns in seconds;
demo sweep <= ~6 min on a 2-core CPU; the dry run of 10,000 depth_delusion configurations
(depths 2-401 x widths 256-1,792, launcher=slurm) <= 10 s and <= 300 MB (whole command; the
machine's load is printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def dw(*args, env=None, check=True):
    e = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "depthwidth", *args], cwd=REPO, env=e, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if check and p.returncode != 0:
        raise SystemExit(f"dw {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return dt, p


def best_of(n, fn):
    times = [fn() for _ in range(n)]
    return min(times), statistics.median(times)


def bench_dry_run(tmp):
    env = {"DW_RUNS": str(tmp / "dry")}
    for fmt in ((), ("--json",)):
        lo, med = best_of(5, lambda: dw("sweep", "depth_delusion", "--dry-run", "--no-data-check", *fmt, env=env)[0])
        print(
            f"dry-run depth_delusion --no-data-check (30 runs){' --json' if fmt else ''}: best {lo:.2f} s, median "
            f"{med:.2f} s  (target <= 1 s)"
        )


SCALE = """\
description: 10,000 configurations of the depth_delusion preset (depths 2-401, widths 256-1792)
groups: {model: depth_delusion, data: slimpajama}
fixed: {train.seq_len: 1024, train.batch_size: 256}
tokens: {per_param: 20}
axes:
  model.depth: {start: 2, stop: 401}
  model.width: {start: 256, stop: 1792, step: 64}
"""


def timed_child(args, env) -> tuple[float, float, float]:
    """``dw ARGS`` in a fresh interpreter: (wall s, CPU s, peak resident MiB) of that process alone."""
    e = {**os.environ, "PYTHONPATH": str(REPO), **env}
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "depthwidth", *args], cwd=REPO, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"dw {' '.join(args)} failed: {p.stderr.read().decode()[-500:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def bench_scale(tmp):
    d = tmp / "scale"
    d.mkdir()
    (d / "dd10k.yaml").write_text(SCALE)
    env = {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp / "scale-runs")}
    for fmt in ((), ("--json",)):
        load = os.getloadavg()[0]
        wall, cpu, rss = timed_child(["sweep", "dd10k", "launcher=slurm", "--dry-run", "--no-data-check", *fmt], env)
        print(
            f"dry-run of 10,000 depth_delusion configurations{' --json' if fmt else ''}: {wall:.1f} s wall, "
            f"{cpu:.1f} s CPU, {rss:.0f} MiB peak (target <= 10 s, <= 300 MB; load {load:.1f} on "
            f"{os.cpu_count()} CPUs)"
        )


def fake_manifest(root: Path, name: str, n: int, launcher: str):
    """n finished runs (summary + metrics) as one manifest; slurm ids in arrays of 500."""
    from depthwidth.core.atomic import append_jsonl, write_json

    events = []
    for i in range(n):
        rid = f"{i:012x}"
        rd = root / name / rid
        rd.mkdir(parents=True)
        jid = f"{900000 + i // 500}_{i % 500}" if launcher == "slurm" else f"local-bench_{i}"
        events += [
            {
                "event": "submit",
                "run_id": rid,
                "job_id": jid,
                "launcher": launcher,
                "run_dir": str(rd),
                "overrides": ["model.depth=2", f"run.seed={i}"],
                "tokens_total": 1000,
            },
            {"event": "start", "run_id": rid, "job_id": jid},
        ]
        write_json(
            rd / "summary.json",
            {
                "run_id": rid,
                "status": "done",
                "tokens": 1000,
                "tokens_total": 1000,
                "final_val_loss": 3.0,
                "last_loss": 3.1,
            },
        )
        (rd / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "tokens": 10 * s, "loss": 3.0}) + "\n" for s in range(1, 101))
        )
    append_jsonl(root / name / "manifest", events)


def bench_status(tmp):
    root = tmp / "status"
    fake_manifest(root, "big", 1000, "local")
    env = {"DW_RUNS": str(root)}
    for fmt in (("--json",), ()):
        lo, med = best_of(5, lambda: dw("status", "big", *fmt, env=env)[0])
        print(
            f"status, 1,000-run manifest (local){' --json' if fmt else ' table'}: best {lo:.2f} s, median {med:.2f} "
            "s  (target <= 1 s)"
        )
    if os.environ.get("SLURM_CONF"):
        fake_manifest(root, "bigslurm", 1000, "slurm")
        lo, med = best_of(5, lambda: dw("status", "bigslurm", "--json", env=env)[0])
        print(
            f"status, 1,000-run manifest (slurm, one sacct call): best {lo:.2f} s, median {med:.2f} s  (target <= 1 s)"
        )


TINY = """\
groups: {model: vwt, data: pydoc}
fixed: {model.heads: 4, model.shape: uniform, model.width: 32, model.depth: 1, train.seq_len: 32,
        train.batch_size: 4, train.steps: 4, train.log_every: 2, train.threads: 1, train.eval_batches: 1,
        probe.every: 0, probe.at: []}
seeds: {start: 1, stop: 30}
"""


def bench_slurm(tmp):
    d = tmp / "sweeps"
    d.mkdir()
    (d / "tiny30.yaml").write_text(TINY)
    env = {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp / "slurm")}
    dt, p = dw("sweep", "tiny30", "launcher=slurm", "launcher.array_parallelism=2", "--json", env=env)
    out = json.loads(p.stdout)
    print(
        f"submission of a 30-task array (launcher=slurm, whole command): {dt:.2f} s "
        f"(in-process {out['seconds']:.2f} s; {len(out['jobs'])} tasks)"
    )
    t0 = time.perf_counter()
    while True:
        _, p = dw("status", "tiny30", "--json", env=env)
        st = json.loads(p.stdout)
        if st["counts"]["done"] == 30 or time.perf_counter() - t0 > 600:
            break
        time.sleep(2)
    print(f"  30 tiny runs done after {time.perf_counter() - t0:.0f} s on the 2-CPU test cluster: {st['counts']}")
    lo, med = best_of(5, lambda: dw("status", "tiny30", "--json", env=env)[0])
    print(f"  status of the 30-run slurm sweep (one sacct call): best {lo:.2f} s, median {med:.2f} s")


def bench_demo(tmp):
    env = {"DW_RUNS": str(tmp / "demo")}
    t0 = time.perf_counter()
    dt, _ = dw("sweep", "demo", "launcher=local", "launcher.workers=2", env=env)
    while True:
        _, p = dw("status", "demo", "--json", env=env)
        st = json.loads(p.stdout)
        if st["counts"]["running"] + st["counts"]["pending"] == 0:
            break
        time.sleep(2)
    print(
        f"demo sweep, launcher=local, 2 CPU workers: {time.perf_counter() - t0:.0f} s (submission {dt:.2f} s): "
        f"{st['counts']}"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slurm", action="store_true", help="submit a real 30-task array (needs SLURM_CONF)")
    ap.add_argument("--demo", action="store_true", help="run the demo sweep with launcher=local")
    ap.add_argument("--scale", action="store_true", help="dry-run 10,000 depth_delusion configurations")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dw-bench-") as t:
        tmp = Path(t)
        bench_dry_run(tmp)
        bench_status(tmp)
        if a.slurm:
            bench_slurm(tmp)
        if a.demo:
            bench_demo(tmp)
        if a.scale:
            bench_scale(tmp)


if __name__ == "__main__":
    main()
