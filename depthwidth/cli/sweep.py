"""``dw sweep``: expand a named sweep, validate every run, submit what is not done."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from depthwidth.cli.options import command_flags, taken, with_options
from depthwidth.report.render import console, emit_json, print_rows, wide_console
from depthwidth.sweep.options import SWEEP_OPTIONS  # every option of dw sweep: one home (sweep/options.py)


@with_options(SWEEP_OPTIONS)
def sweep_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="sweep name: a file sweeps/NAME.yaml"),
    overrides: Optional[List[str]] = typer.Argument(
        None,
        help="overrides for every run (train.steps=20) and the launcher (launcher=local, launcher.workers=2, pack=4)",
    ),
    **kw,
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

    from depthwidth.launch.backend import backend
    import depthwidth.sweep.submission as api
    from depthwidth.sweep.options import SweepOptions, then_actions

    t0 = time.perf_counter()
    as_json = kw.pop("as_json")
    o = SweepOptions(**taken((SWEEP_OPTIONS,), kw)).check()
    if o.dry_run:
        from depthwidth.sweep.dry_run import document

        doc = document(name, overrides or [], o)
        if as_json:
            return emit_json({**doc, "seconds": round(time.perf_counter() - t0, 3)})
        return _render_dry(doc, time.perf_counter() - t0)
    # bad input: before anything is planned
    then = then_actions(name, o.then, lambda a: command_flags(ctx, a)) if o.then is not None else None
    err = console(stderr=True)
    p = api.plan(name, overrides or [], only=o.only, dry_run=False, extend_tuning=o.extend_tuning)
    again = api.plan_retry(name, overrides or [], o.retry_diverged or [], only=o.only)
    for w in p.warnings:  # one line each, before anything trains
        sys.stderr.write(f"dw: warning: {w}\n")
    if backend(p.launcher["name"]).runs_here and not as_json:
        err.print(f"[dim]dw[/dim] launcher={p.launcher['name']}: training the runs here, one after another")
    sub = api.submit_planned(p, retry_failed=o.retry_failed, retry=again, show=err, t0=t0, then=then)
    if as_json:
        return emit_json(sub.to_dict())
    _render_submission(sub, o.retry_failed)


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


def _render_dry(doc: dict, secs: float) -> None:
    """The dry run's table (sweep/dry_run.py), the lines below it, its warnings on stderr."""
    import depthwidth.sweep.dry_run as dry_run

    c = wide_console()
    print_rows(c, dry_run.table(doc, doc["sweep"], doc["description"]))
    for line in dry_run.footer(doc, secs):
        c.print(line, highlight=False, soft_wrap=True)
    for w in doc["warnings"]:  # one line each, unwrapped
        sys.stderr.write(f"dw: warning: {w}\n")
