"""`dw train`'s live bar: on a terminal steps, tokens/s, loss and ETA, redrawn at most
every REFRESH_S; anywhere else the plain lines of before.  The terminal is decided by
an injected ``isatty`` and the bar driven by an injected clock: no tty, no sleeps."""

from __future__ import annotations

import io

from rich.console import Console

from depthwidth.cli import train as train_cli
from tests.helpers import run_dw
from tests.test_train import TINY


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _terminal():
    return Console(file=io.StringIO(), force_terminal=True, width=120, highlight=False)


def test_a_bar_only_on_a_terminal():
    assert train_cli.make_progress(_terminal(), isatty=lambda: False) is None
    assert isinstance(train_cli.make_progress(_terminal(), isatty=lambda: True), train_cli.StepBar)
    piped = Console(file=io.StringIO())  # a stream that is no terminal, asked itself
    assert train_cli.make_progress(piped) is None


def test_the_bar_shows_steps_speed_loss_and_eta_and_redraws_at_most_every_refresh():
    con, clock = _terminal(), _Clock()
    bar = train_cli.make_progress(con, isatty=lambda: True, clock=clock)
    bar.begin(10, 110, 512)  # resumed at step 10 of 110, 512 tokens a step
    draws = []
    real = bar.bar.refresh
    bar.bar.refresh = lambda: (draws.append(clock.t), real())[1]
    for step in range(11, 20):  # 9 steps in 0.09 s: within one refresh interval, no redraw
        clock.t += 0.01
        bar.update(step, None)
    assert draws == []
    clock.t += train_cli.REFRESH_S
    bar.update(20, 4.25)  # 10 steps x 512 tokens in 0.34 s
    assert len(draws) == 1
    clock.t += 1.0
    bar.update(30, 4.0)  # 10 steps x 512 tokens in 1 s; 80 steps to go at 10 steps/s
    assert len(draws) == 2
    text = con.file.getvalue()
    assert "20/110" in text and "15.1k tok/s" in text and "loss 4.2500" in text
    assert "30/110" in text and "5.12k tok/s" in text and "loss 4.0000" in text and "ETA" in text
    assert "0:00:" in text.rsplit("30/110", 1)[1]  # a time remaining, not "-:--:--"
    bar.update(110, 3.5)  # the last step is always drawn
    assert len(draws) == 3 and "110/110" in con.file.getvalue()
    bar.close()
    bar.close()  # twice is harmless


def test_train_reports_every_step_to_the_progress(tmp_path):
    from depthwidth.config.compose import compose
    from depthwidth.train.trainer import train

    calls = []

    class Recorder:
        def begin(self, step, steps, tokens_per_step):
            calls.append(("begin", step, steps, tokens_per_step))

        def update(self, step, loss):
            calls.append(("update", step, loss is None or isinstance(loss, float)))

    s = train(
        compose([*TINY, "train.steps=12", f"run.dir={tmp_path / 'run'}"]), log=lambda m: None, progress=Recorder()
    )
    assert s["status"] == "done"
    assert calls == [("begin", 0, 12, 8 * 64)] + [("update", i, True) for i in range(1, 13)]


def test_off_a_terminal_train_prints_the_plain_lines_only(tmp_path):
    p = run_dw("train", *TINY, "train.steps=20", f"run.dir={tmp_path / 'run'}")  # stderr is a pipe
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 2, p.stderr
    assert lines[0] == "dw layout: 1 process, single, micro-batch 8 x 1, activation checkpointing off"
    assert lines[1].startswith("dw budget 10,240 tokens (step 20): val loss ")
    assert "\x1b" not in p.stderr and "\r" not in p.stderr
