"""``dw status`` as a library: a sweep's status with its follow-up, fit verdict and forecasts, its table.

    st = document("demo")            # launch/status.py's document, plus "then", "fit_verdict" and forecasts
    t = table(st, "demo")            # one row per run, each cell as dw status shows it (core.tables.Table)
    watch("demo", show, interval=2)  # show(st), refreshed until every run has ended

The pieces come from the stages that own them (launch/status.py the runs, launch/followup.py the
``--then`` line, fit.json the verdict, fit/run_forecast.py the forecasts); this module is where
they are put together, above both launch/ and fit/.  The options table is standard library only:
``dw --help`` builds the flags from it.
"""

from __future__ import annotations

from typing import Callable

from depthwidth.core.options import Option
from depthwidth.core.tables import Col, Table

STATUS_OPTIONS = (
    Option("as_json", False, "one JSON document instead of the table", flag="--json"),
    Option("watch", False, "refresh the table live until every run is done, failed, diverged, cancelled or lost"),
    Option("interval", 2.0, "seconds between refreshes with --watch"),
    Option("timeout", None, "with --watch: give up (exit 1) after this many seconds", kind=float),
    Option(
        "backtest",
        None,
        "forecast finished runs too, from the first FRACTION of their tokens (e.g. 0.5), "
        "beside their measured final loss",
        kind=float,
        metavar="FRACTION",
    ),
)

COLS = ("run id", "label", "L", "W", "shape", "state", "progress", "tokens", "last loss", "attempts", "job")
RIGHT = {"L", "W", "progress", "tokens", "last loss", "attempts", "forecast [95%]", "final val loss", "law [95%]"}
FORECAST = "forecast [95%]"
# a run in one of these states will not change without a new `dw sweep` (local/debug never requeue preempted runs)
TERMINAL = ("done", "pruned", "failed", "diverged", "cancelled", "lost")


def check(*, as_json: bool, watch: bool, interval: float, timeout: float | None, backtest: float | None) -> None:
    """Refuse options that make no sense (one line, exit 2)."""
    from depthwidth.core.errors import bad

    if backtest is not None and not 0 < backtest <= 1:
        raise bad("--backtest", backtest, "a fraction of the tokens in (0, 1], e.g. 0.5")
    if watch:
        if as_json:
            raise bad("--json", True, "not with --watch (a live table); use dw status NAME --json")
        if not interval > 0:
            raise bad("--interval", interval, "seconds > 0")
        if timeout is not None and not timeout > 0:
            raise bad("--timeout", timeout, "seconds > 0")


def store_for(name: str) -> str:
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


def document(name: str, backtest: float | None = None) -> dict:
    """The status document, with the forecasts filled in where there are any to make (fit/ is
    imported only then: a sweep with nothing running stays as quick to list as before)."""
    from depthwidth.launch import status as runs_status
    from depthwidth.launch.followup import line as then_line

    st = runs_status.status(store_for(name))
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


def finished(st: dict) -> bool:
    """Every run has ended (a preempted run ends only where its backend does not requeue it)."""
    from depthwidth.launch.backend import backend

    return all(
        r["state"] in TERMINAL or (r["state"] == "preempted" and not backend(r.get("launcher")).requeues)
        for r in st["runs"]
    )


def watch(
    name: str,
    show: Callable[[dict], None],
    *,
    interval: float,
    timeout: float | None = None,
    backtest: float | None = None,
    st: dict | None = None,
    t0: float | None = None,
) -> dict:
    """``show(st)``, then refresh every ``interval`` s until every run has ended (the last document);
    WorkFailed once ``timeout`` s have passed since ``t0`` (time.monotonic) with runs still going."""
    import time

    from depthwidth.core.errors import WorkFailed
    from depthwidth.launch import status as runs_status

    t0 = time.monotonic() if t0 is None else t0
    st = document(name, backtest) if st is None else st
    while True:
        show(st)
        if finished(st):
            return st
        if timeout is not None and time.monotonic() - t0 > timeout:
            raise WorkFailed(f"{name}: runs still going after --timeout {timeout:g} s: {runs_status.summary_line(st)}")
        time.sleep(interval)
        st = document(name, backtest)


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


def _row(r: dict, cols: tuple) -> dict:
    from depthwidth.launch.status import varied_cell

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
    return {c: cells[c] if c in cells else "" if "." in c else _early(r, c) for c in cols}


def table(st: dict, name: str) -> Table:
    """One row per run: shape, state, progress, tokens, last loss, the forecasts where there are any,
    attempts and job (each cell as it is shown)."""
    cols = _columns(st)
    rows = [_row(r, cols) for r in st["runs"]]
    return Table("status", f"sweep {name}", [Col(c, c, right=c in RIGHT) for c in cols], rows)
