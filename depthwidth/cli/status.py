"""``dw status``: each run of a sweep, joined from its run directory and the scheduler."""

from __future__ import annotations


import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import FAST_ABOVE, emit_json, plain_table, wide_console
from depthwidth.sweep.status import STATUS_OPTIONS  # every option of dw status (sweep/status.py)

STYLE = {
    "done": "green",
    "running": "cyan",
    "pending": "dim",
    "waiting": "dim",
    "pruned": "blue",
    "failed": "red",
    "diverged": "magenta",
    "preempted": "yellow",
    "cancelled": "red",
    "lost": "red",
    "unknown": "yellow",
}
WHY_SHOWN = 10  # failed runs whose reason dw status prints below its table


@with_options(STATUS_OPTIONS)
def status_cmd(name: str = typer.Argument(..., help="sweep name (runs/NAME/manifest)"), **kw) -> None:
    """State, progress, last loss and attempts of every submitted run of a sweep.

    Example: dw status depth_delusion

    Example: dw status demo --watch        (live until every run has ended)

    States: pending, running, done, failed, diverged, preempted (checkpointed,
    waiting to be requeued; a local or debug one resumes with dw sweep NAME
    --retry-failed), cancelled, lost (the scheduler no longer knows the
    job and the run did not finish), unknown (the scheduler could not be asked:
    no sacct, or sacct failing).  One sacct call for the whole sweep.

    L, W, shape: the run's depth, width and width shape (its summary.json, or
    what its submission planned before it starts).  Sweeps are read from $DW_RUNS, else ./runs.

    forecast [95%]: a running run's final loss forecast from its loss curve so
    far (held-out when it logs one, train.eval_every > 0; else training) and its
    learning-rate schedule, with a 95% interval; "—" until it has 8 points past
    warm-up and 20% of its tokens (docs/forecast.md).  --json: each run's
    forecast, forecast_note (why there is none), law_pred and flag.

    Example: dw status demo --backtest 0.5   (finished runs forecast from their
    first half, beside their measured final loss: the forecast checked on the
    sweep's own runs)
    """
    from depthwidth.sweep import status

    o = taken((STATUS_OPTIONS,), kw)
    status.check(**o)
    if o["watch"]:
        return _watch(name, o["interval"], o["timeout"], o["backtest"])
    st = status.document(name, o["backtest"])
    if o["as_json"]:
        return emit_json(st)
    _render(wide_console(), name, st)


def _render(c, name: str, st: dict) -> None:
    """The table, the summary line, the follow-up and fit lines, why runs failed, the problems."""
    from depthwidth.launch import status as runs_status

    _print_table(c, name, st)
    c.print(runs_status.summary_line(st))
    if line := runs_status.halving_line(st.get("halving")):
        c.print(line, highlight=False)
    if line := st.get("then"):
        c.print(line, highlight=False, soft_wrap=True)
    if line := st.get("fit_verdict"):
        c.print(line, highlight=False, soft_wrap=True)
    why = [r for r in st["runs"] if r["state"] == "failed" and r.get("reason")]
    for r in why[:WHY_SHOWN]:  # the retry policy's last word (launch/retry.py), else the error
        c.print(f"[red]failed[/] {r['run_id']}: {r['reason']}", highlight=False)
    if len(why) > WHY_SHOWN:
        c.print(f"… and {len(why) - WHY_SHOWN} more failed runs (dw status {name} --json has every reason)")
    for p in st.get("problems") or []:
        c.print(f"[yellow]problem:[/] {p}", highlight=False)


def _renderable(name, st):
    from depthwidth.sweep.status import table

    t = table(st, name)
    cols, rows = t.display()
    if len(rows) <= FAST_ABOVE:
        from rich.table import Table

        rt = Table(title=t.title)
        for col in t.cols:
            rt.add_column(col.label, justify="right" if col.right else "left", no_wrap=True)
        si = cols.index("state")
        for row in rows:
            rt.add_row(*row[:si], f"[{STYLE[row[si]]}]{row[si]}[/]", *row[si + 1 :])
        return rt
    return plain_table(t.title, cols, rows, {col.label for col in t.cols if col.right}, styled=("state", STYLE))


def _print_table(c, name, st):
    c.print(_renderable(name, st), soft_wrap=True)


def _progress_line(st, t0) -> str:
    import time

    from depthwidth.launch import status as runs_status

    tok = sum(r["tokens"] or 0 for r in st["runs"])
    tot = sum(r["tokens_total"] or 0 for r in st["runs"])
    el = int(time.monotonic() - t0)
    share = f" · {100 * tok / tot:.0f}% of all tokens" if tot else ""
    return runs_status.summary_line(st) + share + f" · {el // 60}:{el % 60:02d} elapsed"


def _watch(name, interval, timeout, backtest=None) -> None:
    """Live table (a terminal) or one line per change (a pipe) until every run has ended (sweep/status.py's
    ``watch`` refreshes, this draws)."""
    import time
    from functools import partial

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from depthwidth.sweep import status

    c = wide_console()
    t0 = time.monotonic()
    st = status.document(name, backtest)  # bad sweep name: exit 2 before anything is drawn
    poll = partial(status.watch, name, interval=interval, timeout=timeout, backtest=backtest, st=st, t0=t0)
    if c.is_terminal:
        with Live(console=c, refresh_per_second=4, transient=False) as live:
            poll(lambda s: live.update(Group(_renderable(name, s), Text(_progress_line(s, t0)))))
        return
    last: list = [None]

    def line_on_change(s) -> None:  # a pipe (a log): one line when a run ends, not at every start
        ended = sorted((k, n) for k, n in s["counts"].items() if k in status.TERMINAL or k == "preempted")
        if ended != last[0]:
            c.print(_progress_line(s, t0))
            last[0] = ended

    _print_table(c, name, poll(line_on_change))
