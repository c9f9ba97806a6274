"""``dw sweep``: expand a named sweep, validate every run, submit what is not done."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.cli.render import console, emit_json, wide_console


def sweep_cmd(
    name: str = typer.Argument(..., help="sweep name: a file sweeps/NAME.yaml"),
    overrides: Optional[List[str]] = typer.Argument(
        None, help="overrides for every run (train.steps=20) and the launcher (launcher=local, launcher.workers=2, pack=4)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the runs with params, FLOPs, tokens and GPU-hours; submit nothing"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document (each run's exact override list)"),
    only: Optional[str] = typer.Option(None, "--only", help="glob on run id, label or an override, e.g. 'model.depth=16'"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="also resubmit failed, cancelled and lost runs"),
    retry_diverged: Optional[List[str]] = typer.Option(
        None, "--retry-diverged", metavar="OVERRIDE",
        help="start diverged runs afresh with this override (repeatable; it must change the run, e.g. optim.lr=3e-4)"),
    mfu: float = typer.Option(0.40, "--mfu", help="model FLOPs utilisation assumed for GPU-hours"),
    peak: float = typer.Option(989e12, "--peak", help="peak FLOP/s per GPU assumed for GPU-hours (H100 bf16 dense)"),
) -> None:
    """Run a named sweep (sweeps/NAME.yaml): validate every run, then submit those not done or running.

    Examples:

      dw sweep depth_delusion --dry-run

      dw sweep demo launcher=local launcher.workers=2

      dw sweep depth_delusion launcher=slurm launcher.partition=gpu launcher.gpus_per_node=1 pack=2

      dw sweep demo --retry-failed --only 'model.width=64'

      dw sweep demo --retry-diverged optim.lr=3e-4   (diverged runs, afresh under new run ids)

    Returns as soon as the jobs are submitted (launcher=debug runs them here, blocking).
    Exit codes: 0 ok; 2 bad input (nothing submitted); 1 submission failed.
    """
    import time

    from depthwidth.core import store
    from depthwidth.sweep import submission as api
    from depthwidth.sweep.expand import dry_run_rows

    t0 = time.perf_counter()
    if dry_run:
        p = api.plan(name, overrides or [], only=only, mfu=mfu, peak=peak)
        keep = {r.index for r in p.runs}
        rows = [row for row in dry_run_rows(p.sweep, store.runs_root().absolute()) if row["index"] in keep]
        if as_json:
            emit_json({"sweep": name, "description": p.sweep.description, "mfu": mfu, "peak_flops": peak,
                       "device": _devices(rows, p.device), "runs": rows, "seconds": round(time.perf_counter() - t0, 3)})
        else:
            _render_dry(p.sweep, rows, mfu, peak, time.perf_counter() - t0)
        return
    err = console(stderr=True)
    p = api.plan(name, overrides or [], only=only, dry_run=False)
    again = api.plan_retry(name, overrides or [], retry_diverged or [], only=only)
    if p.launcher["name"] == "debug" and not as_json:
        err.print("[dim]dw[/dim] launcher=debug: training the runs here, one after another")
    sub = api.submit_planned(p, retry_failed=retry_failed, retry=again, show=err, t0=t0)
    if as_json:
        emit_json(sub.to_dict())
        return
    _render_submission(sub, retry_failed)


def _devices(rows, default: str) -> str:
    """Where the runs train (cpu | cuda | mixed): per run, from its own launcher settings."""
    found = {r["plan"]["device"] for r in rows if r.get("plan")}
    return found.pop() if len(found) == 1 else ("mixed" if found else default)


def _render_submission(sub, retry_failed: bool) -> None:
    from depthwidth.launch.status import status, summary_line
    from depthwidth.sweep.submission import compress

    c = console()
    for note in sub.notes:
        console(stderr=True).print(f"dw: warning: {note}", highlight=False)
    skip = ", ".join(f"{n} {k}" for k, n in sorted(sub.skipped.items()))
    if not sub.submitted:
        c.print(f"{sub.sweep}: nothing to submit ({skip or 'no runs'})"
                + ("" if retry_failed else "; --retry-failed resubmits failed/cancelled/lost runs"))
        return
    n, k = len(sub.jobs), len(sub.submitted)
    arrays = len({j.split("_")[0] for j in sub.jobs})  # several when the cluster caps an array's size
    what = (f"{'one job array' if arrays == 1 else f'{arrays} job arrays'} of {n} task{'s' * (n != 1)}"
            if sub.launcher == "slurm" else f"{n} {sub.launcher} task{'s' * (n != 1)}")
    c.print(f"{sub.sweep}: submitted {k} run{'s' * (k != 1)} as {what}" + (f"; skipped {skip}" if skip else ""))
    c.print("job ids: " + compress(sub.jobs))
    if sub.launcher == "debug":
        c.print(summary_line(status(sub.sweep)))
    else:
        c.print(f"follow with: dw status {sub.sweep}")


def _si(x: float, unit: str = "") -> str:
    for k, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= k:
            return f"{x / k:.3g}{s}{unit}"
    return f"{x:.3g}{unit}"


def _render_dry(s, rows, mfu, peak, secs) -> None:
    from rich.table import Table

    t = Table(title=f"sweep {s.name} · {len(rows)} runs (dry run)", caption=s.description or None)
    for col, j in (("#", "right"), ("run id", "left"), ("label", "left"), ("L", "right"), ("W", "right"),
                   ("shape", "left"), ("prec", "left"), ("params", "right"), ("tokens", "right"), ("FLOPs", "right"),
                   ("procs", "right"), ("layout", "left"), ("GiB/dev", "right"), ("GPU-h", "right"),
                   ("wall-h", "right"), ("ref loss", "right"), ("ref", "left")):
        t.add_column(col, justify=j, no_wrap=True)
    iso = any((r.get("ref") or {}).get("budget") for r in rows)
    if iso:  # isoFLOP sweeps: each run's FLOPs against its budget C, its params against the target
        t.add_column("C err", justify="right", no_wrap=True)
        t.add_column("N err", justify="right", no_wrap=True)
    tot_f = tot_h = 0.0
    for r in rows:
        ref = r.get("ref") or {}
        loss = ref.get("loss")
        tot_f += r["flops"]
        tot_h += r["gpu_hours"]
        p = r["plan"]
        layout = f"{p['mode']} {p['micro_batch']}×{p['accum']}" + (" AC" if p["activation_checkpointing"] else "")
        mem = f"{p['total'] / 2 ** 30:.1f}" if p["capacity"] else "—"
        cells = [str(r["index"]), r["run_id"], r.get("label") or "", str(r["depth"]), str(r["width"]), r["shape"],
                 r.get("precision") or "", _si(r["params"]), _si(r["tokens"]), f"{r['flops']:.3g}",
                 str(p["processes"]), layout, mem, f"{r['gpu_hours']:,.1f}", f"{r['wall_hours']:,.1f}",
                 "" if loss is None else f"{loss:.3f}", ref.get("source", "")]
        if iso:
            c_err = f"{r['flops'] / ref['budget'] - 1:+.1%}" if ref.get("budget") else ""
            n_err = f"{ref['params_error']:+.1%}" if ref.get("params_error") is not None else ""
            cells += [c_err, n_err]
        t.add_row(*cells)
    c = wide_console()
    c.print(t)
    c.print(f"total {tot_f:.3g} FLOPs ≈ {tot_h:,.0f} GPU-hours at MFU {mfu:.0%} of {peak:.3g} FLOP/s per GPU "
            f"(FLOPs = training FLOPs/token × tokens, 6N + attention; params include embeddings) · {secs:.2f} s")
    c.print("layout: parallel mode, micro-batch × accumulation steps per process, AC = activation checkpointing; "
            "GiB/dev: the memory plan's peak per device (— on the CPU: not checked); wall-h = GPU-h / procs")
