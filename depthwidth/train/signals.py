"""Preemption signals: SIGUSR2 (SLURM's time-limit warning, ``scancel --signal=USR2``)
and SIGTERM (preemption, ``scontrol requeue``) ask a run to finish its step,
checkpoint and stop.  ``StopFlag`` records the first one; the loop reads it
at the end of every step, so no signal is acted on mid-update."""

from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGUSR2, signal.SIGTERM)


class StopFlag:
    """``with StopFlag(install=True) as stop:`` ... ``if stop.requested: ...``.

    Handlers are installed only in the main thread (a debug launcher may run a
    sweep from another one) and the previous ones come back on exit."""

    def __init__(self, install: bool = True):
        self.install = install and threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._old: dict = {}

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
        self.signum = self.signum or signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def set(self, signum: int = signal.SIGUSR2) -> None:
        self.signum = self.signum or signum

    def clear(self) -> None:
        self.signum = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""
