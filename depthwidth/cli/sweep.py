"""``dw sweep``: expand a named sweep, validate every run, submit what is not done."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.cli.app import app, console, emit_json


@app.command(
    "sweep",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def sweep_cmd(
    name: str = typer.Argument(..., help="sweep name: a file sweeps/NAME.yaml"),
    overrides: Optional[List[str]] = typer.Argument(
        None, help="overrides for every run (train.steps=20) and the launcher (launcher=local, launcher.workers=2, pack=4)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the runs with params, FLOPs, tokens and GPU-hours; submit nothing"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document (each run's exact override list)"),
    only: Optional[str] = typer.Option(None, "--only", help="glob on run id, label or an override, e.g. 'model.depth=16'"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="also resubmit failed, diverged, cancelled and lost runs"),
    mfu: float = typer.Option(0.40, "--mfu", help="model FLOPs utilisation assumed for GPU-hours"),
    peak: float = typer.Option(989e12, "--peak", help="peak FLOP/s per GPU assumed for GPU-hours (H100 bf16 dense)"),
) -> None:
    """Run a named sweep (sweeps/NAME.yaml): validate every run, then submit those not done or running.

    Examples:

      dw sweep depth_delusion --dry-run

      dw sweep demo launcher=local launcher.workers=2

      dw sweep depth_delusion launcher=slurm launcher.partition=gpu launcher.gpus_per_node=1 pack=2

      dw sweep demo --retry-failed --only 'model.width=64'

    Returns as soon as the jobs are submitted (launcher=debug runs them here, blocking).
    Exit codes: 0 ok; 2 bad input (nothing submitted); 1 submission failed.
    """
    import time

    from depthwidth import sweep as sw
    from depthwidth.errors import bad

    t0 = time.perf_counter()
    if not 0 < mfu <= 1:
        raise bad("--mfu", mfu, "a fraction in (0, 1]")
    if not peak > 0:
        raise bad("--peak", peak, "FLOP/s > 0")
    from depthwidth import launch, store

    run_ovr, launch_ovr = launch.split_overrides(overrides or [])
    lcfg = None if dry_run else launch.launcher_config(launch_ovr)
    if dry_run and launch_ovr:
        launch.launcher_config(launch_ovr, need_scheduler=False)  # still reject a bad launcher key
    s = sw.expand(name, run_ovr, mfu=mfu, peak=peak)
    runs = sw.select(s.runs, only)
    if not dry_run:
        sw.check_data(s, runs)
    sw.check(s, runs)
    root = store.runs_root().absolute()
    if dry_run:
        rows = [row for row in sw.dry_run_rows(s, root) if row["index"] in {r.index for r in runs}]
        if as_json:
            emit_json({"sweep": name, "description": s.description, "mfu": mfu, "peak_flops": peak,
                       "runs": rows, "seconds": round(time.perf_counter() - t0, 3)})
        else:
            _render_dry(s, rows, mfu, peak, time.perf_counter() - t0)
        return

    with _sweep_lock(name):  # two `dw sweep NAME` at once must not submit a run twice
        _submit(name, runs, lcfg, root, retry_failed, as_json, t0)


def _submit(name, runs, lcfg, root, retry_failed, as_json, t0) -> None:
    import time

    from depthwidth import launch, store

    prior = {}
    if store.manifest_path(name).exists():
        prior = {r["run_id"]: r for r in store.status(name)["runs"]}
    todo, skipped = [], {}
    for r in runs:
        p = prior.get(r.run_id)
        state = p["state"] if p else None
        retry = retry_failed and (state in store.RETRYABLE or (state == "preempted" and p.get("launcher") != "slurm"))
        if state is None or retry:
            if state == "diverged":
                _archive_summary(p["run_dir"])
            todo.append(r)
        else:
            skipped[state] = skipped.get(state, 0) + 1
    items = [{"run_id": r.run_id, "index": r.index, "label": r.label, "ref": r.ref,
              "run_dir": str(root / name / r.run_id), "overrides": r.full_overrides(name, root / name / r.run_id),
              "tokens_total": r.figures["tokens"], "params": r.figures["params"]} for r in todo]
    err = console(stderr=True)
    if items and lcfg["name"] == "debug" and not as_json:
        err.print(f"[dim]dw[/dim] launcher=debug: training {len(items)} runs here, one after another")
    subs = launch.submit(name, items, lcfg, show=err) if items else []
    jobs = sorted({x["job_id"] for x in subs}, key=_job_key)
    out = {"sweep": name, "launcher": lcfg["name"], "submitted": subs, "jobs": jobs, "skipped": skipped,
           "seconds": round(time.perf_counter() - t0, 3)}
    if as_json:
        emit_json(out)
        return
    c = console()
    skip = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
    if not subs:
        c.print(f"{name}: nothing to submit ({skip or 'no runs'})" + ("" if retry_failed else "; --retry-failed resubmits failed/diverged/cancelled/lost runs"))
        return
    n = len(jobs)
    what = f"one job array of {n} task{'s' * (n != 1)}" if lcfg["name"] == "slurm" else f"{n} {lcfg['name']} task{'s' * (n != 1)}"
    c.print(f"{name}: submitted {len(subs)} run{'s' * (len(subs) != 1)} as {what}" + (f"; skipped {skip}" if skip else ""))
    c.print("job ids: " + _compress(jobs))
    if lcfg["name"] == "debug":
        st = store.status(name)
        c.print(store.summary_line(st))
    else:
        c.print(f"follow with: dw status {name}")


class _sweep_lock:
    """Exclusive flock on runs/NAME/.lock for the status check + submission."""

    def __init__(self, name: str):
        from depthwidth import store

        self.path = store.sweep_dir(name) / ".lock"

    def __enter__(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()  # releases the lock


def _archive_summary(run_dir: str) -> None:
    """A diverged run is final to train(); move its summary aside so a retry trains again."""
    import os
    from pathlib import Path

    p = Path(run_dir) / "summary.json"
    if p.exists():
        n = len(list(p.parent.glob("summary.diverged*.json")))
        os.replace(p, p.parent / f"summary.diverged{n}.json")


def _job_key(j: str):
    head, _, tail = j.rpartition("_")
    return (head, int(tail)) if tail.isdigit() else (j, 0)


def _compress(jobs: list[str]) -> str:
    """['12_0', '12_1', '12_2'] -> '12_[0-2]'."""
    groups: dict = {}
    for j in jobs:
        head, _, tail = j.rpartition("_")
        if head and tail.isdigit():
            groups.setdefault(head, []).append(int(tail))
        else:
            groups.setdefault(j, [])
    parts = []
    for head, idx in groups.items():
        if not idx:
            parts.append(head)
            continue
        idx.sort()
        spans, a = [], idx[0]
        for x, y in zip(idx, idx[1:] + [None]):
            if y != x + 1:
                spans.append(f"{a}" if a == x else f"{a}-{x}")
                a = y
        parts.append(f"{head}_[{','.join(spans)}]" if len(idx) > 1 else f"{head}_{idx[0]}")
    return " ".join(parts)


def wide_console():
    """Tables are wide: when stdout is not a terminal, do not squeeze them into 80 columns."""
    import sys

    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def _si(x: float, unit: str = "") -> str:
    for k, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= k:
            return f"{x / k:.3g}{s}{unit}"
    return f"{x:.3g}{unit}"


def _render_dry(s, rows, mfu, peak, secs) -> None:
    from rich.table import Table

    t = Table(title=f"sweep {s.name} · {len(rows)} runs (dry run)", caption=s.description or None)
    for col, j in (("#", "right"), ("run id", "left"), ("label", "left"), ("L", "right"), ("W", "right"),
                   ("shape", "left"), ("params", "right"), ("tokens", "right"), ("FLOPs", "right"),
                   ("GPU-h", "right"), ("ref loss", "right"), ("ref", "left")):
        t.add_column(col, justify=j, no_wrap=True)
    tot_f = tot_h = 0.0
    for r in rows:
        ref = r.get("ref") or {}
        loss = ref.get("loss")
        tot_f += r["flops"]
        tot_h += r["gpu_hours"]
        t.add_row(str(r["index"]), r["run_id"], r.get("label") or "", str(r["depth"]), str(r["width"]), r["shape"],
                  _si(r["params"]), _si(r["tokens"]), f"{r['flops']:.3g}", f"{r['gpu_hours']:,.1f}",
                  "" if loss is None else f"{loss:.3f}", ref.get("source", ""))
    c = wide_console()
    c.print(t)
    c.print(f"total {tot_f:.3g} FLOPs ≈ {tot_h:,.0f} GPU-hours at MFU {mfu:.0%} of {peak:.3g} FLOP/s per GPU "
            f"(FLOPs = training FLOPs/token × tokens, 6N + attention; params include embeddings) · {secs:.2f} s")
