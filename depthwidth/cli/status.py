"""``dw status``: each run of a sweep, joined from its run directory and the scheduler."""

from __future__ import annotations

from typing import Optional

import typer

from depthwidth.cli.render import FAST_ABOVE, emit_json, plain_table

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


def status_cmd(
    name: str = typer.Argument(..., help="sweep name (runs/NAME/manifest)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document instead of the table"),
    watch: bool = typer.Option(
        False, "--watch", help="refresh the table live until every run is done, failed, diverged, cancelled or lost"
    ),
    interval: float = typer.Option(2.0, "--interval", help="seconds between refreshes with --watch"),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help="with --watch: give up (exit 1) after this many seconds"
    ),
    backtest: Optional[float] = typer.Option(
        None,
        "--backtest",
        help="forecast finished runs too, from the first FRACTION of their tokens (e.g. 0.5), "
        "beside their measured final loss",
        metavar="FRACTION",
    ),
) -> None:
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
    from depthwidth.core.errors import bad
    from depthwidth.launch import status as runs_status

    if backtest is not None and not 0 < backtest <= 1:
        raise bad("--backtest", backtest, "a fraction of the tokens in (0, 1], e.g. 0.5")
    if watch:
        if as_json:
            raise bad("--json", True, "not with --watch (a live table); use dw status NAME --json")
        if not interval > 0:
            raise bad("--interval", interval, "seconds > 0")
        if timeout is not None and not timeout > 0:
            raise bad("--timeout", timeout, "seconds > 0")
        _watch(name, interval, timeout, backtest)
        return
    st = _status(name, backtest)
    if as_json:
        emit_json(st)
        return
    from depthwidth.cli.render import wide_console

    c = wide_console()
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


def _store(name: str) -> str:
    """The run store a name means: its own, else the one its sweep file joins (``store:``, as the
    files ``dw suggest`` writes say), so ``dw status NAME_next`` shows the store the runs are in."""
    from depthwidth.core import store

    if store.manifest_path(name).exists():
        return name
    import yaml

    from depthwidth.core.errors import BadInput
    from depthwidth.sweep.file import store_of, sweeps_dir

    try:  # plain YAML, not the sweep loader: dw status stays quick
        doc = yaml.safe_load((sweeps_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
        return store_of(name, doc) if isinstance(doc, dict) else name
    except (OSError, yaml.YAMLError, BadInput):
        return name


def _status(name: str, backtest: float | None) -> dict:
    """The status document, with the forecasts filled in where there are any to make (fit/ is
    imported only then: a sweep with nothing running stays as quick to list as before)."""
    from depthwidth.launch import status as runs_status

    from depthwidth.launch.followup import line as then_line

    st = runs_status.status(_store(name))
    st["then"] = then_line(st["sweep"])  # --then's follow-up: waiting, or what it did
    st["fit_verdict"] = fit_verdict(st["sweep"])
    if backtest is not None or any(r["state"] == "running" for r in st["runs"]):
        from depthwidth.fit.run_forecast import attach

        attach(st, backtest)
    return st


def fit_verdict(name: str) -> str | None:
    """The sweep's fit.json verdict as ``dw fit`` wrote it (``identification.line``: read, never decided
    again here), with the law and when it was made; None without a fit or a verdict."""
    import json

    from depthwidth.core.store import sweep_dir

    try:
        doc = json.loads((sweep_dir(name) / "fit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ident = doc.get("identification") if isinstance(doc, dict) else None
    line = ident.get("line") if isinstance(ident, dict) else None
    if not isinstance(line, str):
        return None
    made = (doc.get("provenance") or {}).get("time") if isinstance(doc.get("provenance"), dict) else None
    return f"fit ({doc.get('law')}{f', {made}' if made else ''}): {line}"


COLS = ("run id", "label", "L", "W", "shape", "state", "progress", "tokens", "last loss", "attempts", "job")
RIGHT = {"L", "W", "progress", "tokens", "last loss", "attempts", "forecast [95%]", "final val loss", "law [95%]"}
FORECAST = "forecast [95%]"
# a run in one of these states will not change without a new `dw sweep` (local/debug never requeue preempted runs)
TERMINAL = ("done", "pruned", "failed", "diverged", "cancelled", "lost")
WHY_SHOWN = 10  # failed runs whose reason dw status prints below its table


def _columns(st) -> tuple:
    """COLS, with the early warning's after ``last loss`` when a run has one: the forecast, the
    measured final loss beside a finished run's backtest, the law's prediction and the flag."""
    from depthwidth.launch.status import varied_columns

    rows = st["runs"]
    extra = []
    if any(r.get("forecast") or r.get("forecast_note") for r in rows):
        extra.append(FORECAST)
    if any(r.get("forecast") is not None and r["state"] != "running" for r in rows):
        extra.append("final val loss")
    if any(r.get("law_pred") for r in rows):
        extra += ["law [95%]", "flag"]
    at = COLS.index("last loss") + 1
    cols = COLS[:at] + tuple(extra) + COLS[at:]
    at = cols.index("shape") + 1
    if any(r.get("group") for r in rows):  # a tuned sweep: each run's tuning group, after its shape
        cols = cols[:at] + ("group",) + cols[at:]
        at += 1
    cols = cols[:at] + varied_columns(rows) + cols[at:]
    if any(r.get("pid") for r in rows):  # running runs: the worker and process that train them (dw stop)
        at = cols.index("state") + 1
        cols = cols[:at] + ("worker", "pid") + cols[at:]
    return cols


def _interval(x: dict | None) -> str:
    return "" if not x else f"{x['mean']:.3f} [{x['lo']:.3f}, {x['hi']:.3f}]"


def _early(r, col) -> str:
    if col == FORECAST:
        f = r.get("forecast")
        if f is None:
            return "—" if r.get("forecast_note") else ""
        return f"{_interval(f)} {f['curve']}"
    if col == "final val loss":
        return "" if r.get("final_val_loss") is None or r.get("forecast") is None else f"{r['final_val_loss']:.4f}"
    if col == "law [95%]":
        return _interval(r.get("law_pred"))
    return {True: "FLAG", False: "ok", None: ""}[r.get("flag")]


def _rows(st, cols):
    from depthwidth.launch.status import varied_cell

    rows = []
    for r in st["runs"]:
        prog = "" if r["progress"] is None else f"{100 * r['progress']:.0f}%"
        tok = f"{r['tokens']:,} / {r['tokens_total']:,}" if r["tokens_total"] else f"{r['tokens']:,}"
        loss = "" if r["last_loss"] is None else f"{r['last_loss']:.4f}"
        label = r.get("label") or ""
        if r.get("retry_of"):  # --retry-diverged: the run this one replaces, and the other way round
            label += f" (retry of {r['retry_of']})"
        if r.get("retried_as"):
            label += f" (retried as {r['retried_as']})"
        shape = ["" if r.get(k) is None else str(r[k]) for k in ("depth", "width", "shape")]  # "": not known yet
        base = (r["run_id"], label.strip(), *shape, r["state"], prog, tok, loss, str(r["attempts"]), r["job_id"])
        cells = {**dict(zip(COLS, base)), "group": r.get("group") or ""}
        cells.update({c: varied_cell(r, c) for c in cols if c == "seed" or c in (r.get("tuned") or {})})
        cells.update({c: "" if r.get(c) is None else str(r[c]) for c in ("worker", "pid")})
        rows.append(tuple(cells[c] if c in cells else "" if "." in c else _early(r, c) for c in cols))
    return rows


def _renderable(name, st):
    cols = _columns(st)
    rows = _rows(st, cols)
    if len(rows) <= FAST_ABOVE:
        from rich.table import Table

        t = Table(title=f"sweep {name}")
        for col in cols:
            t.add_column(col, justify="right" if col in RIGHT else "left", no_wrap=True)
        si = cols.index("state")
        for row in rows:
            t.add_row(*row[:si], f"[{STYLE[row[si]]}]{row[si]}[/]", *row[si + 1 :])
        return t
    return plain_table(f"sweep {name}", cols, rows, RIGHT, styled=("state", STYLE))


def _print_table(c, name, st):
    c.print(_renderable(name, st), soft_wrap=True)


def _finished(st) -> bool:
    from depthwidth.launch.backend import backend

    return all(
        r["state"] in TERMINAL or (r["state"] == "preempted" and not backend(r.get("launcher")).requeues)
        for r in st["runs"]
    )


def _progress_line(st, t0) -> str:
    import time

    from depthwidth.launch import status as runs_status

    tok = sum(r["tokens"] or 0 for r in st["runs"])
    tot = sum(r["tokens_total"] or 0 for r in st["runs"])
    el = int(time.monotonic() - t0)
    share = f" · {100 * tok / tot:.0f}% of all tokens" if tot else ""
    return runs_status.summary_line(st) + share + f" · {el // 60}:{el % 60:02d} elapsed"


def _watch(name, interval, timeout, backtest=None) -> None:
    """Live table (a terminal) or one line per change (a pipe) until every run has ended."""
    import time

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from depthwidth.cli.render import wide_console
    from depthwidth.core.errors import WorkFailed
    from depthwidth.launch import status as runs_status

    c = wide_console()
    t0 = time.monotonic()
    st = _status(name, backtest)  # bad sweep name: exit 2 before anything is drawn

    def poll(show) -> dict:
        """Show, then refresh every ``interval`` s until every run has ended."""
        nonlocal st
        while True:
            show(st)
            if _finished(st):
                return st
            if timeout is not None and time.monotonic() - t0 > timeout:
                raise WorkFailed(
                    f"{name}: runs still going after --timeout {timeout:g} s: {runs_status.summary_line(st)}"
                )
            time.sleep(interval)
            st = _status(name, backtest)

    if c.is_terminal:
        with Live(console=c, refresh_per_second=4, transient=False) as live:
            poll(lambda s: live.update(Group(_renderable(name, s), Text(_progress_line(s, t0)))))
        return
    last: list = [None]

    def line_on_change(s) -> None:  # a pipe (a log): one line when a run ends, not at every start
        ended = sorted((k, n) for k, n in s["counts"].items() if k in TERMINAL or k == "preempted")
        if ended != last[0]:
            c.print(_progress_line(s, t0))
            last[0] = ended

    _print_table(c, name, poll(line_on_change))
