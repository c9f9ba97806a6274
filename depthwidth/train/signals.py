"""Stop signals: SIGUSR2 (SLURM's time-limit warning, ``scancel --signal=USR2``),
SIGTERM (preemption, ``scontrol requeue``) and SIGINT (Ctrl-C) ask a run to
finish its step, checkpoint and stop.  ``StopFlag`` records the first one; the
loop reads it at the end of every step, so no signal is acted on mid-update.

A second SIGINT within ``AGAIN_WITHIN_S`` of the previous one does not wait:
``on_again`` (the trainer's) writes what can be written at once and returns
the one line to print, and the process exits ``EXIT_INTERRUPTED`` (130) there
and then, inside the handler, so no code between here and the exit (a
checkpoint writer, a collective) can swallow or delay it.  Processes of a
multi-process run never escalate: torchrun forwards the user's one Ctrl-C to
every rank a second time, and a rank leaving alone would hang the others in
their next collective (torchrun kills its ranks after its own timeout)."""

from __future__ import annotations

import os
import signal
import threading
import time

SIGNALS = (signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)
AGAIN_WITHIN_S = 5.0  # a second Ctrl-C this soon after the previous one exits at once
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended
BEFORE_HARD_EXIT: list = []  # callables run just before that exit (a live progress bar gives the terminal back)


class Preempted(Exception):
    """The run checkpointed on a stop signal and should be requeued (or rerun).
    ``signal``: the signal's name; ``step``: the step it stopped after (checkpointed);
    ``where``: "" or e.g. "in the decay branch to step 800"."""

    def __init__(self, signame: str, step: int, where: str = ""):
        self.signal, self.step, self.where = signame, step, where
        super().__init__(f"{signame} at step {step}" + (f" ({where})" if where else ""))


class Interrupted(BaseException):
    """Ctrl-C, handled: ``str(e)`` is the one line to print and ``exit_code`` the exit code
    (3: checkpointed; 130: not).  ``dw``'s main prints and exits with it.  Like KeyboardInterrupt
    no ``except Exception`` takes it, and unlike it the CLI framework passes it through as it is."""

    def __init__(self, line: str, exit_code: int = EXIT_INTERRUPTED):
        super().__init__(line)
        self.exit_code = exit_code


def give_terminal_back(fd: int = 2) -> None:
    """A BEFORE_HARD_EXIT hook for a live display on ``fd``: end its line, show the cursor."""
    try:
        if os.isatty(fd):
            os.write(fd, b"\n\x1b[?25h")
    except OSError:
        pass


def interrupted_line(
    step: int, where: str = "", resume: str = "rerun the same command to resume", run: str | None = None
) -> str:
    """What a Ctrl-C'd run says on stderr, in one line."""
    return (
        f"dw: interrupted {f'run {run} ' if run else ''}at step {step}"
        + (f" ({where})" if where else "")
        + f": checkpointed, summary preempted; {resume}"
    )


class StopFlag:
    """``with StopFlag(install=True) as stop:`` ... ``if stop.requested: ...``.

    Handlers are installed only in the main thread (a debug launcher may run a
    sweep from another one) and the previous ones come back on exit.
    ``on_again() -> str``: called on a second SIGINT within AGAIN_WITHIN_S (when
    ``escalate``), returns the line to print before exiting; ``clock`` and ``exit``
    are there for tests."""

    def __init__(
        self, install: bool = True, *, on_again=None, escalate: bool = True, clock=time.monotonic, exit=os._exit
    ):
        self.install = install and threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._old: dict = {}
        self._on_again, self._escalate, self._clock, self._exit = on_again, escalate, clock, exit
        self._last_int: float | None = None
        self._leaving = False

    def __enter__(self) -> "StopFlag":
        if self.install:
            for sig in SIGNALS:
                self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for sig, h in self._old.items():
            signal.signal(sig, h)
        self._old.clear()

    def _on_signal(self, signum, frame) -> None:
        if signum == signal.SIGINT and self._escalate:
            now = self._clock()
            if self._last_int is not None and now - self._last_int <= AGAIN_WITHIN_S:
                return self._again()
            self._last_int = now
        self.signum = self.signum or signum

    def _again(self) -> None:
        """The second Ctrl-C: say what was not saved, and exit now."""
        if not self._leaving:  # a third Ctrl-C while the line is being written: just go
            self._leaving = True
            for hook in list(BEFORE_HARD_EXIT):
                try:
                    hook()
                except Exception:
                    pass
            try:
                line = self._on_again() if self._on_again else "dw: interrupted again: exiting without a checkpoint"
            except Exception as e:  # never let a failing write keep the process alive
                line = f"dw: interrupted again: exiting without a checkpoint ({type(e).__name__}: {e})"
            try:
                os.write(2, (" ".join(str(line).split()) + "\n").encode())
            except OSError:
                pass
        self._exit(EXIT_INTERRUPTED)

    def agree(self, world, device=None) -> bool:
        """Whether to stop after this step: on every rank of ``world`` the same answer and signal
        (the highest number any rank got), in one all-reduce per step."""
        if world.distributed:
            from depthwidth.train import dist

            self.signum = int(dist.largest(world, self.signum or 0, device)) or None
        return self.requested

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def clear(self) -> None:
        self.signum = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""
