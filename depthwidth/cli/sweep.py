"""``dw sweep``: expand a named sweep, validate every run, submit what is not done."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from depthwidth.cli.render import (
    FAST_ABOVE,
    console,
    emit_json,
    print_plain_table,
    varied_cell,
    varied_columns,
    wide_console,
)
from depthwidth.core.devices import PLAN_CPU_FLOPS, PLAN_MFU, PLAN_PEAK_FLOPS


def sweep_cmd(
    name: str = typer.Argument(..., help="sweep name: a file sweeps/NAME.yaml"),
    overrides: Optional[List[str]] = typer.Argument(
        None,
        help="overrides for every run (train.steps=20) and the launcher (launcher=local, launcher.workers=2, pack=4)",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="check every run as the submission does (the data too) and list them with params, "
        "FLOPs, GPU- or CPU-hours, requeues, nodes, calendar time and checkpoint disk; submit nothing",
    ),
    no_data_check: bool = typer.Option(
        False,
        "--no-data-check",
        help="with --dry-run: plan even where the data are missing or do not match "
        "(e.g. before preparing them); each problem is a warning, the submission still refuses it",
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON document (each run's exact override list)"),
    only: Optional[str] = typer.Option(
        None, "--only", help="glob on run id, label or an override, e.g. 'model.depth=16'"
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="also resubmit failed, cancelled and lost runs"),
    retry_diverged: Optional[List[str]] = typer.Option(
        None,
        "--retry-diverged",
        metavar="OVERRIDE",
        help="start diverged runs afresh with this override (repeatable; it must change the run, e.g. optim.lr=3e-4)",
    ),
    mfu: float = typer.Option(PLAN_MFU, "--mfu", help="model FLOPs utilisation assumed for GPU- and CPU-hours"),
    peak: float = typer.Option(
        PLAN_PEAK_FLOPS, "--peak", help="peak FLOP/s per GPU assumed for GPU-hours (H100 bf16 dense)"
    ),
    cpu_peak: float = typer.Option(
        PLAN_CPU_FLOPS, "--cpu-peak", help="peak FLOP/s per CPU process assumed for CPU-hours (fp32)"
    ),
    extend_tuning: bool = typer.Option(
        False,
        "--extend-tuning",
        help="a tuned sweep (tune:): add one value beyond the grid's end for every group whose best finished run "
        "is at that end (the next log-spaced value)",
    ),
    prior: Optional[str] = typer.Option(
        None,
        "--prior",
        help="with --dry-run: predict from the papers' law (published) instead of the sweep's fit.json "
        "(predictions appear on their own when the sweep has a fit)",
    ),
    then: Optional[str] = typer.Option(
        None,
        "--then",
        help="when every run has ended: fit,report[,analyze,eval] (dw's own commands, with the arguments of the "
        "sweep file's then: mapping), then runs/NAME/DONE; SLURM: a CPU job after the arrays, which also "
        "retries runs SLURM ended OUT_OF_MEMORY/TIMEOUT/PREEMPTED (none: only that)",
        metavar="ACTIONS",
    ),
    probe: bool = typer.Option(
        False,
        "--probe",
        help="with --dry-run: time a few real steps of the smallest and largest runs here (process start, set-up, "
        "evaluation, checkpoint, analysis included), record them in runs/NAME/probe.json and plan the hours with them "
        "(later dry runs read the record)",
    ),
    max_days: Optional[float] = typer.Option(
        None,
        "--max-days",
        help="with --dry-run: propose the nodes per run (launcher.nodes) that finish every SLURM run within this "
        "many days, requeue restarts, queue waits and checkpoint writes counted",
    ),
    queue_wait: float = typer.Option(
        1.0, "--queue-wait", help="with --dry-run: hours a requeued SLURM task waits in the queue (an assumption)"
    ),
    target: Optional[str] = typer.Option(
        None,
        "--target",
        help="with --dry-run predictions: the number a run's value is measured against (dcrit@512, alpha, "
        "W_exponent, optimum@1e21; default the law's claim)",
    ),
) -> None:
    """Run a named sweep (sweeps/NAME.yaml): validate every run, then submit those not done or running.

    Examples:

      dw sweep depth_delusion launcher=slurm --dry-run --no-data-check   (plan before the data exist)

      dw sweep demo launcher=local launcher.workers=2

      dw sweep depth_delusion launcher=slurm launcher.partition=gpu launcher.gpus_per_node=1 pack=2

      dw sweep demo --retry-failed --only 'model.width=64'

      dw sweep demo --retry-diverged optim.lr=3e-4   (diverged runs, afresh under new run ids)

      dw sweep depth_delusion launcher=slurm --then fit,report   (unattended, through to the report)

    Returns as soon as the jobs are submitted (launcher=debug runs them here, blocking).
    The dry run refuses what the submission refuses (missing data included; --no-data-check
    plans anyway), except that sbatch need not be on PATH.
    Exit codes: 0 ok; 2 bad input (nothing submitted); 1 submission failed.
    """
    import time

    from depthwidth.core import store
    from depthwidth.core.errors import bad
    from depthwidth.launch.backend import backend
    from depthwidth.sweep import plan_costs
    from depthwidth.sweep import submission as api
    from depthwidth.sweep.expand import dry_run_rows

    t0 = time.perf_counter()
    if (prior or target) and not dry_run:
        raise bad("--prior" if prior else "--target", prior or target, "only with --dry-run")
    if probe and not dry_run:
        raise bad("--probe", True, "only with --dry-run")
    if max_days is not None and not (dry_run and max_days > 0):
        raise bad("--max-days", max_days, "days > 0, with --dry-run")
    if not queue_wait >= 0:
        raise bad("--queue-wait", queue_wait, "hours >= 0")
    if no_data_check and not dry_run:
        raise bad("--no-data-check", True, "only with --dry-run (the submission always checks the data)")
    if dry_run:
        data = "warn" if no_data_check else "refuse"
        p = api.plan(
            name,
            overrides or [],
            only=only,
            mfu=mfu,
            peak=peak,
            cpu_peak=cpu_peak,
            data=data,
            extend_tuning=extend_tuning,
        )
        again = api.plan_retry(name, overrides or [], retry_diverged or [], only=only, dry_run=True, data=data)
        pre = api.preflight(p, retry_failed=retry_failed, retry=again)
        keep = {r.index for r in p.runs}
        rows = [row for row in dry_run_rows(p.sweep, store.runs_root().absolute()) if row["index"] in keep]
        from depthwidth.launch.workers import visible_gpus
        from depthwidth.sweep import probe as probes

        here = "cuda" if visible_gpus() else "cpu"
        measured = probes.run_probe(name, p.sweep.store, p.runs, here) if probe else probes.read(p.sweep.store)
        probes.apply(measured, rows)
        from depthwidth.sweep import longruns

        plan_costs.annotate(p.runs, rows)
        long = longruns.plan(p.runs, rows, max_days=max_days, queue_wait_h=queue_wait, probe=measured)
        s = plan_costs.summarize(name, p.runs, rows)
        s["long_runs"] = {k: long[k] for k in ("proposals", "unmet")}
        s["notes"] = long["lines"] + [x for x in (longruns.seed_line(rows),) if x]
        s["warnings"] = p.warnings + s["warnings"]
        from depthwidth.sweep.suggest import dry_run_predictions

        predicted = dry_run_predictions(name, rows, prior, target)
        doc = {
            "sweep": name,
            "description": p.sweep.description,
            "mfu": mfu,
            "peak_flops": peak,
            "cpu_peak_flops": cpu_peak,
            "device": _devices(rows, p.device),
            **s,
            "data": p.data,
            "probe": measured,
            "submit": pre.to_dict() if store.manifest_path(p.sweep.store).exists() else None,
            "waves": api.wave_plans(pre),  # SLURM: the limit on queued jobs, the waves it makes
            "prediction": predicted,
            "runs": rows,
        }
        if as_json:
            emit_json({**doc, "seconds": round(time.perf_counter() - t0, 3)})
        else:
            _render_dry(p.sweep, doc, time.perf_counter() - t0)
        return
    then_spec = _then(name, then) if then is not None else None  # bad input: before anything is planned
    err = console(stderr=True)
    p = api.plan(name, overrides or [], only=only, dry_run=False, extend_tuning=extend_tuning)
    again = api.plan_retry(name, overrides or [], retry_diverged or [], only=only)
    for w in p.warnings:  # one line each, before anything trains
        sys.stderr.write(f"dw: warning: {w}\n")
    if backend(p.launcher["name"]).runs_here and not as_json:
        err.print(f"[dim]dw[/dim] launcher={p.launcher['name']}: training the runs here, one after another")
    sub = api.submit_planned(p, retry_failed=retry_failed, retry=again, show=err, t0=t0, then=then_spec)
    if as_json:
        emit_json(sub.to_dict())
        return
    _render_submission(sub, retry_failed)


def _then(name: str, spec: str) -> tuple[list, dict]:
    """``--then ACTIONS`` and the sweep file's ``then:`` arguments, each option checked against the
    dw command it is for (one line, exit 2, nothing submitted)."""
    import importlib
    import inspect

    from depthwidth.core.errors import bad
    from depthwidth.launch.followup import parse
    from depthwidth.sweep.file import load_file, then_args

    actions = parse(spec)
    args = then_args(name, load_file(name))
    for action, argv in args.items():
        cmd = getattr(importlib.import_module(f"depthwidth.cli.{action}"), f"{action}_cmd")
        opts = set()
        for prm in inspect.signature(cmd).parameters.values():
            if type(prm.default).__name__ == "OptionInfo":  # typer's option: its flags (default --name)
                decls = [d for d in (prm.default.param_decls or ()) for d in d.split("/")]
                opts |= {d for d in decls if d.startswith("-")} or {"--" + prm.name.replace("_", "-")}
        for a in argv:
            if a.startswith("-") and a.split("=", 1)[0] not in opts:
                raise bad(f"sweep {name}: then.{action}", a, f"an option of dw {action} ({', '.join(sorted(opts))})")
    if "eval" in actions and not any(a.split("=", 1)[0] == "--tasks" for a in args.get("eval", [])):
        raise bad("--then", "eval", f'eval with its tasks in sweeps/{name}.yaml: then: {{eval: "--tasks TASK[,TASK]"}}')
    return actions, {a: args.get(a, []) for a in actions}


def _devices(rows, default: str) -> str:
    """Where the runs train (cpu | cuda | mixed): per run, from its own launcher settings."""
    found = {r["plan"]["device"] for r in rows if r.get("plan")}
    return found.pop() if len(found) == 1 else ("mixed" if found else default)


def _render_submission(sub, retry_failed: bool) -> None:
    from depthwidth.launch.backend import backend
    from depthwidth.launch.limits import how_many
    from depthwidth.launch.status import status, summary_line
    from depthwidth.sweep.submission import compress

    c = console()
    for note in sub.notes:
        console(stderr=True).print(f"dw: warning: {note}", highlight=False)
    skip = ", ".join(f"{n} {k}" for k, n in sorted(sub.skipped.items()))
    if not sub.submitted:
        c.print(
            f"{sub.sweep}: nothing to submit ({skip or 'no runs'})"
            + ("" if retry_failed else "; --retry-failed resubmits failed/cancelled/lost runs")
        )
        if sub.then:
            from depthwidth.launch.followup import line

            c.print(line(sub.sweep) or "", highlight=False, soft_wrap=True)
        return
    k = len(sub.submitted)
    what = backend(sub.launcher).describe(sub.jobs)  # one job array of 30 tasks; 30 local tasks
    if sub.waves:  # the limit on queued jobs: the first wave now, the rest behind a wave job
        now = sum(len(w["first"]["arrays"]) for w in sub.waves)
        what = f"waves ({'one job array now' if now == 1 else f'{now} job arrays now' if now else 'none yet'})"
    c.print(f"{sub.sweep}: submitted {k} run{'s' * (k != 1)} as {what}" + (f"; skipped {skip}" if skip else ""))
    for w in sub.waves:
        first, left = w["first"], w["tasks"] - w["first"]["tasks"]
        said = (
            f"wave 1 of {how_many(len(w['planned']), w['in_use'])} holds {first['tasks']} of {w['tasks']} "
            f"array tasks; the other {left} "
            f"wait for wave job {first['wave_job']}, which submits the next wave when this one has ended"
            if first["tasks"]
            else f"no room for a wave now; all {left} array tasks wait for wave job {first['wave_job']}, which "
            "submits them in waves as room frees"
        )
        c.print(f"queue limit {w['limit']} jobs ({w['source']}): {said}", highlight=False, soft_wrap=True)
    c.print("job ids: " + compress(sub.jobs))
    if sub.then:
        from depthwidth.launch.followup import line

        c.print(line(sub.sweep) or "", highlight=False, soft_wrap=True)
    if backend(sub.launcher).runs_here:
        c.print(summary_line(status(sub.sweep)))
    else:
        c.print(f"follow with: dw status {sub.sweep}")


def _si(x: float, unit: str = "") -> str:
    for k, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= k:
            return f"{x / k:.3g}{s}{unit}"
    return f"{x:.3g}{unit}"


def _prediction_cells(p: dict | None) -> list[str]:
    if not p:
        return ["—"] * 4
    after = p.get("interval_after")
    return [
        f"{p['loss']:.3f} [{p['pi'][0]:.3f}, {p['pi'][1]:.3f}]",
        "" if p.get("measured") is None else f"{p['measured']:.3f}",
        "" if after is None else f"{after:.3g}",
        "" if p.get("value_per_hour") is None else f"{p['value_per_hour']:.3g}",
    ]


def _render_dry(s, doc, secs) -> None:
    from rich.table import Table

    from depthwidth.launch.limits import plan_line
    from depthwidth.sweep import plan_costs
    from depthwidth.sweep.plan_costs import lines, short

    rows, hu = doc["runs"], doc["hours_unit"]
    hcol = {"GPU": "GPU-h", "CPU": "CPU-h"}.get(hu, "dev-h")
    requeue = any(r.get("requeues") is not None for r in rows)
    cols: list = []  # (name, justify)
    body: list = []
    varied = varied_columns(rows)  # seed, tuned settings: what tells two runs of one configuration apart
    for col, j in (
        ("#", "right"),
        ("run id", "left"),
        ("label", "left"),
        ("L", "right"),
        ("W", "right"),
        ("shape", "left"),
        *((c, "right") for c in varied),
        ("prec", "left"),
        ("params", "right"),
        ("tokens", "right"),
        ("FLOPs", "right"),
        ("procs", "right"),
        ("layout", "left"),
        ("GiB/dev", "right"),
        (hcol, "right"),
        ("wall-h", "right"),
        *((("requeues", "right"),) if requeue else ()),
        ("ckpt GiB", "right"),
        ("ref loss", "right"),
        ("ref", "left"),
    ):
        cols.append((col, j))
    pred = doc.get("prediction")
    if pred:  # the law's prediction of each run, its measured loss, and what running it would teach
        lvl = f"{100 * pred['level']:.0f}%"
        for col in (f"pred. loss [{lvl} PI]", "measured", f"{pred['target_label']} CI after", "value/h"):
            cols.append((col, "right"))
    iso = any((r.get("ref") or {}).get("budget") for r in rows)
    if iso:  # isoFLOP sweeps: each run's FLOPs against its budget C, its params against the target
        cols += [("C err", "right"), ("N err", "right")]
    tot_f = 0.0
    for r in rows:
        ref = r.get("ref") or {}
        loss = ref.get("loss")
        tot_f += r["flops_planned"]
        p = r["plan"]
        layout = f"{p['mode']} {p['micro_batch']}×{p['accum']}" + (" AC" if p["activation_checkpointing"] else "")
        mem = f"{p['total'] / 2**30:.1f}" if p["capacity"] else "—"
        hours = short(r["device_hours"]) + ("" if hu != "device" else f" {'GPU' if p['device'] == 'cuda' else 'CPU'}")
        cells = [
            str(r["index"]),
            r["run_id"],
            r.get("label") or "",
            str(r["depth"]),
            str(r["width"]),
            r["shape"],
            *(varied_cell(r, c) for c in varied),
            r.get("precision") or "",
            _si(r["params"]),
            _si(r["tokens"]),
            f"{r['flops']:.3g}",
            str(p["processes"]),
            layout,
            mem,
            hours,
            short(r["wall_hours"]),
            *(("" if r.get("requeues") is None else f"{r['requeues']:,}",) if requeue else ()),
            short(r["ckpt_disk_bytes"] / 2**30),
            "" if loss is None else f"{loss:.3f}",
            ref.get("source", ""),
        ]
        if pred:
            cells += _prediction_cells(r.get("prediction"))
        if iso:
            c_err = f"{r['flops'] / ref['budget'] - 1:+.1%}" if ref.get("budget") else ""
            n_err = f"{ref['params_error']:+.1%}" if ref.get("params_error") is not None else ""
            cells += [c_err, n_err]
        body.append(cells)
    c = wide_console()
    title = f"sweep {s.name} · {len(rows)} runs (dry run)"
    if len(body) <= FAST_ABOVE:
        t = Table(title=title, caption=s.description or None)
        for col, j in cols:
            t.add_column(col, justify=j, no_wrap=True)
        for cells in body:
            t.add_row(*cells)
        if not c.is_terminal:  # piped: as wide as the table needs, never a column squeezed to "s…"
            from rich.measure import Measurement

            c.width = max(c.width, Measurement.get(c, c.options.update(max_width=10**5), t).maximum)
        c.print(t)
    else:  # thousands of runs: drawn directly (rich measures every cell)
        names = [col for col, _ in cols]
        print_plain_table(c, title, names, body, {col for col, j in cols if j == "right"})
        if s.description:
            c.print(s.description, highlight=False, soft_wrap=True)
    dh = doc["device_hours"]
    probed = {r["plan"]["device"] for r in rows if r.get("time") == "measured"}
    at = {
        "cuda": f"{short(dh.get('cuda', 0))} GPU-hours at MFU {doc['mfu']:.0%} of {doc['peak_flops']:.3g} FLOP/s per "
        "GPU",
        "cpu": f"{short(dh.get('cpu', 0))} CPU-hours at MFU {doc['mfu']:.0%} of {doc['cpu_peak_flops']:.3g} FLOP/s "
        "per CPU process (--cpu-peak)",
    }
    for d in probed:  # measured by the probe (its line below says where and when)
        at[d] = f"{short(dh.get(d, 0))} {'GPU' if d == 'cuda' else 'CPU'}-hours as measured by the probe"
    c.print(
        f"total {tot_f:.3g} FLOPs ≈ {' + '.join(at[d] for d in sorted(dh, reverse=True))} "
        f"(FLOPs = training FLOPs/token × tokens, 6N + attention; params include embeddings) · {secs:.2f} s",
        highlight=False,
        soft_wrap=True,
    )
    measured = [r for r in rows if r.get("time") == "measured"]
    if doc.get("probe") and measured:
        from depthwidth.sweep.probe import line as probe_line

        c.print(probe_line(doc["probe"], measured, rows), highlight=False, soft_wrap=True)
    elif doc.get("probe"):
        c.print(
            f"assumed: the probe of {doc['probe']['time']} measured {doc['probe']['device']}; these runs train on "
            "another device, so their hours rest on the stated MFU",
            highlight=False,
            soft_wrap=True,
        )
    if branch := plan_costs.branch_line(rows):
        c.print(branch, highlight=False, soft_wrap=True)
    for d in doc.get("data") or []:
        c.print(plan_costs.data_line(d), highlight=False, soft_wrap=True)
    for line in lines(doc, rows) + doc.get("notes", []):
        c.print(line, highlight=False, soft_wrap=True)
    for w in doc.get("waves") or []:
        c.print(plan_line(w), highlight=False, soft_wrap=True)
    if doc.get("submit"):
        sub = doc["submit"]
        skip = ", ".join(f"{n} {k}" for k, n in sub["skipped"].items())
        c.print(
            f"submitting now: {sub['would_submit']} of {len(rows)} runs" + (f" (skipped: {skip})" if skip else ""),
            highlight=False,
            soft_wrap=True,
        )
    if pred:
        c.print(
            f"predictions: from the {pred['from']}; {pred['target_label']}'s {100 * pred['level']:.0f}% interval "
            f'is {pred["interval_now"]:.3g} wide now; "CI after": its expected width once that run is measured; '
            "value/h: how much narrower per device-hour (dw suggest NAME --budget H picks the best set)",
            highlight=False,
            soft_wrap=True,
        )
        for n in pred.get("notes") or []:
            c.print(f"note: {n}", highlight=False, soft_wrap=True)
    if doc.get("advice"):
        c.print(f"advice: {doc['advice']}", highlight=False, soft_wrap=True)
    c.print(
        f"layout: parallel mode, micro-batch × accumulation steps per process, AC = activation checkpointing; "
        f"GiB/dev: the memory plan's peak per device (— on the CPU: not checked); wall-h = {hcol} / procs"
        + ("; requeues: ceil(wall-h / launcher.time) − 1" if requeue else "")
        + "; ckpt GiB: the checkpoints a run keeps",
        highlight=False,
        soft_wrap=True,
    )
    for w in doc["warnings"]:  # one line each, unwrapped
        sys.stderr.write(f"dw: warning: {w}\n")
