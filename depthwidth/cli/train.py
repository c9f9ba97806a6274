"""``dw train``: one run from Hydra overrides.

On a terminal (stderr), a live bar: steps, tokens/s, last loss, ETA, redrawn at
most every ``REFRESH_S`` (a step costs one clock read otherwise); elsewhere (a
pipe, a log file, ``--quiet``) the plain lines only.  Ctrl-C: one line saying
what was saved (exit 3), or, a second time, what was not (exit 130)."""

from __future__ import annotations

import functools
import time
from typing import List, Optional

import typer

from depthwidth.report.render import console, emit_json


def train_cmd(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. model.depth=4 train.steps=200"),
    as_json: bool = typer.Option(False, "--json", help="print the run's summary.json instead of a table"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
) -> None:
    """Train one model; rerun with the same overrides to resume it.

    Example: dw train model=depth_delusion model.depth=4 model.width=128 model.shape=x
    data=pydoc optim.lr=3e-4 train.steps=200 train.batch_size=16 train.seq_len=128
    train.ckpt_every=50 run.dir=runs/try1 run.seed=42

    Exit codes: 0 done; 1 diverged or failed; 2 bad input; 3 preempted
    (checkpoint written; rerun or requeue to resume; also on Ctrl-C); 130 a second
    Ctrl-C within 5 s (exits at once, without a checkpoint).
    """
    import os
    import sys

    from depthwidth.config.compose import compose
    from depthwidth.evals import run as evals
    from depthwidth.train.signals import interrupted_line
    from depthwidth.train.trainer import EXIT_PREEMPTED, Preempted, train

    cfg = compose(overrides or [])
    err = console(stderr=True)
    say = lambda m: err.print(f"[dim]dw[/dim] {m}", markup=True, highlight=False, soft_wrap=True)  # noqa: E731
    # --quiet drops progress lines but never a warning
    log = (lambda m: say(m) if m.startswith("warning:") else None) if quiet else say
    bar = None if quiet or os.environ.get("RANK", "0") != "0" else make_progress(err)
    try:
        summary = train(cfg, log=log, progress=bar)
    except Preempted as e:
        if bar:
            bar.close()
        if e.signal == "SIGINT" and os.environ.get("RANK", "0") == "0":  # one line, from rank 0
            sys.stderr.write(interrupted_line(e.step, e.where) + "\n")
        raise typer.Exit(EXIT_PREEMPTED)
    except OSError as e:  # an uncreatable or read-only run directory, a full disk: say so, no traceback
        from depthwidth.core.errors import WorkFailed

        where = e.filename or cfg.run.dir or "the run directory"
        raise WorkFailed(
            f"cannot write {where}: {e.strerror or e}; every file written so far is whole, "
            "so the same command resumes the run once it can write there"
        ) from None
    finally:
        if bar:
            bar.close()
    evals.at_end(cfg, summary, log)  # train.eval_tasks: here, not in the trainer (a stage below evals)
    if os.environ.get("RANK", "0") != "0":
        pass  # data-parallel ranks > 0: rank 0 reports
    elif as_json:
        emit_json(summary)
    else:
        _render(summary)
    _leave_worker(0 if summary["status"] == "done" else 1)
    if summary["status"] != "done":
        raise typer.Exit(1)


def _leave_worker(code: int) -> None:
    """A rank of a multi-process run (torchrun sets WORLD_SIZE) leaves without the interpreter's
    teardown: that teardown races gloo's background threads, and a rank of a finished run was seen to
    abort there (SIGABRT, "terminate called without an active exception"), which torchrun reports as a
    failed run.  By now every file is written, the tracker finished and the process group destroyed."""
    import os
    import sys

    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return
    import logging

    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _render(s: dict) -> None:
    from rich.table import Table

    t = Table(title=f"run {s['run_id']} · {s['status']}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    rows = [
        (
            "shape",
            f"{s['depth']}L × {s['width']} ({s['shape']}), widths "
            f"{s['widths'] if len(set(s['widths'])) > 1 else s['width']}",
        ),
        ("params (total)", f"{s['params']:,}"),
        ("tokens", f"{s['tokens']:,} of {s['tokens_total']:,} ({s['steps']} steps)"),
        ("final held-out loss", "—" if s["final_val_loss"] is None else f"{s['final_val_loss']:.4f} nats/token"),
    ]
    if s.get("bayes_loss") is not None:
        rows.append(("Bayes-optimal loss", f"{s['bayes_loss']:.4f} nats/token"))
    for b in s["budgets"]:
        rows.append((f"  at {b['tokens']:,} tokens", "—" if b["val_loss"] is None else f"{b['val_loss']:.4f}"))
    if s.get("reason"):
        rows.append(("reason", s["reason"]))
    rows.append(("wall time", f"{s['wall_time_s']:.1f} s on {s['device']}"))
    for k, v in rows:
        t.add_row(k, v)
    console().print(t)


REFRESH_S = 0.25  # the bar is redrawn at most this often


def make_progress(err, isatty=None, clock=time.monotonic):
    """A ``StepBar`` on console ``err`` when its stream is a terminal (``isatty()``; by default
    the stream's own), else None: the plain lines, as in a log file."""
    tty = isatty if isatty is not None else getattr(err.file, "isatty", lambda: False)
    return StepBar(err, clock) if tty() else None


class StepBar:
    """train()'s ``progress``: steps, tokens/s, loss and ETA on a rich bar, redrawn by ``update``
    at most every REFRESH_S (no refresh thread; between redraws a step costs one clock read)."""

    def __init__(self, err, clock=time.monotonic):
        self.err, self.clock, self.bar, self._hook = err, clock, None, None

    def begin(self, step: int, steps: int, tokens_per_step: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from depthwidth.train.signals import BEFORE_HARD_EXIT, give_terminal_back

        self.steps, self.tokens_per_step, self._at = steps, tokens_per_step, (self.clock(), step)
        self.bar = Progress(
            TextColumn("[dim]dw[/dim] step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[speed]}"),
            TextColumn("{task.fields[loss]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.err,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
            get_time=self.clock,
        )
        self.task = self.bar.add_task("train", total=steps, completed=step, speed="", loss="")
        self.bar.start()
        try:  # a second Ctrl-C exits from inside the signal handler: this gives the terminal back
            self._hook = functools.partial(give_terminal_back, self.err.file.fileno())
            BEFORE_HARD_EXIT.append(self._hook)
        except (AttributeError, OSError, ValueError):  # a stream without a descriptor (a test's StringIO)
            self._hook = None

    def update(self, step: int, loss: float | None) -> None:
        now = self.clock()
        t, s = self._at
        if now - t < REFRESH_S and step < self.steps:
            return
        tps = (step - s) * self.tokens_per_step / (now - t) if now > t else 0.0
        self.bar.update(
            self.task, completed=step, speed=f"{_si(tps)} tok/s", loss="" if loss is None else f"loss {loss:.4f}"
        )
        self.bar.refresh()
        self._at = (now, step)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        from depthwidth.train.signals import BEFORE_HARD_EXIT

        if self._hook in BEFORE_HARD_EXIT:
            BEFORE_HARD_EXIT.remove(self._hook)


def _si(x: float) -> str:
    for k, s in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= k:
            return f"{x / k:.3g}{s}"
    return f"{x:.3g}"
