"""A gate in a training run, for tests that signal a run while it trains.

A test that sends SIGUSR2 "once the run is past step N" races the run: on a fast
machine it may finish before the signal lands.  With this directory first on
PYTHONPATH and ``DW_TEST_GATE=DIR:STEP[,STEP...]`` in the environment of the job,
every Python process that trains stops before step STEP (STEP steps done; in a
decay branch too), writes ``DIR/at-STEP-<pid>`` and waits until a stop signal reaches that process
(dw's own handler runs, sets its flag, and the step goes on as it would have
mid-step) or ``DIR/open`` exists.  So a test waits for the gate files, sends the
signal, and the run cannot have finished before it lands.  A gate that let a
process through writes ``DIR/passed-STEP``: later attempts pass it.

Nothing in dw knows about this: it wraps ``optim.lr_at`` (called once per step
with the number of steps done) from outside, as tests/reliability/faults.py does.
The test helpers are ``tests.helpers.gate_env`` and ``tests.helpers.open_gate``.

``DW_TEST_GATE_SIGNALS=N`` (default 1) holds the process at the gate until N
stop signals have reached it, writing ``DIR/signal-K-<pid>`` once dw's handler
has run for the K-th; with N > 1 it also makes dw's "again within
AGAIN_WITHIN_S" window unbounded, so a test that sends the second Ctrl-C after
seeing ``signal-1-<pid>`` tests "a second Ctrl-C exits at once" without racing
a clock.

``DW_TEST_GATE_START=DIR:TASK`` holds SLURM array task TASK before its first run
starts training (inside the job's call, so submitit's own signal handlers are
installed, and dw's are not yet): it writes ``DIR/at-start-<pid>`` and waits
until something ends the process (submitit's SIGUSR2 handler requeues and
exits) or ``DIR/open`` exists; its next attempt goes straight on.
"""

import os

_spec = os.environ.get("DW_TEST_GATE", "")
if _spec:
    import functools
    import time
    from pathlib import Path

    _dir, _step = _spec.rsplit(":", 1)
    _gate, _at = Path(_dir), {int(x) for x in _step.split(",")}

    from depthwidth.train import optim as _optim
    from depthwidth.train import signals as _signals

    _real, _on_signal = _optim.lr_at, _signals.StopFlag._on_signal
    _signalled = []
    _need = int(os.environ.get("DW_TEST_GATE_SIGNALS", "1"))
    if _need > 1:
        _signals.AGAIN_WITHIN_S = float("inf")

    def _noted(self, signum, frame):
        _signalled.append(signum)
        out = _on_signal(self, signum, frame)
        (_gate / f"signal-{len(_signalled)}-{os.getpid()}").write_text(str(signum))
        return out

    @functools.wraps(_real)
    def _gated(step, total, *a, **kw):
        passed = _gate / f"passed-{step}"
        if step in _at and not passed.exists() and not (_gate / "open").exists():
            (_gate / f"at-{step}-{os.getpid()}").write_text(str(step))
            while len(_signalled) < _need and not (_gate / "open").exists():
                time.sleep(0.05)
            passed.write_text("")
        return _real(step, total, *a, **kw)

    _optim.lr_at = _gated
    _signals.StopFlag._on_signal = _noted

_start = os.environ.get("DW_TEST_GATE_START", "")
if _start:
    import time as _time
    from pathlib import Path as _Path

    _sdir, _task_id = _start.rsplit(":", 1)
    from depthwidth.launch import task as _task

    _train = _task.train

    def _held(*a, **kw):
        g = _Path(_sdir)
        if os.environ.get("SLURM_ARRAY_TASK_ID") == _task_id and not (g / "passed-start").exists():
            (g / "passed-start").write_text("")  # the next attempt goes straight on
            (g / f"at-start-{os.getpid()}").write_text("")
            while not (g / "open").exists():
                _time.sleep(0.05)
        return _train(*a, **kw)

    _task.train = _held

# ``DW_TEST_RAISE=DIR:STEP:MODE``: a run raises RuntimeError before step STEP (STEP steps done), as a
# CUDA or NCCL error would: MODE ``once`` on its first attempt only (a transient fault), ``always``
# with the same message every time (a deterministic one), ``vary`` with a new message each time.
# Each raise writes DIR/raised-K-<pid>.  Nothing in dw knows about this (it wraps optim.lr_at).
_raise = os.environ.get("DW_TEST_RAISE", "")
if _raise:
    import functools as _functools
    from pathlib import Path as _RPath

    _rdir, _rstep, _rmode = _raise.rsplit(":", 2)
    from depthwidth.train import optim as _roptim

    _rreal = _roptim.lr_at

    @_functools.wraps(_rreal)
    def _raising(step, total, *a, **kw):
        d = _RPath(_rdir)
        n = len(list(d.glob("raised-*")))
        if step == int(_rstep) and (_rmode != "once" or n == 0):
            (d / f"raised-{n + 1}-{os.getpid()}").write_text(str(step))
            raise RuntimeError(
                "CUDA error: an illegal memory access was encountered" + (f" #{n + 1}" if _rmode == "vary" else "")
            )
        return _rreal(step, total, *a, **kw)

    _roptim.lr_at = _raising

# ``DW_TEST_HANG=DIR:STEP``: the first process to reach step STEP hangs there for good, deaf to every
# signal but SIGKILL (as a process stuck in a collective or a driver call is): it writes
# DIR/hung-<pid>, blocks USR2/TERM/INT and sleeps.  Later attempts pass (DIR/hung-* exists).
_hang = os.environ.get("DW_TEST_HANG", "")
if _hang:
    import functools as _hfunctools
    import signal as _hsignal
    import time as _htime
    from pathlib import Path as _HPath

    _hdir, _hstep = _hang.rsplit(":", 1)
    from depthwidth.train import optim as _hoptim

    _hreal = _hoptim.lr_at

    @_hfunctools.wraps(_hreal)
    def _hanging(step, total, *a, **kw):
        d = _HPath(_hdir)
        if step == int(_hstep) and not list(d.glob("hung-*")):
            _hsignal.pthread_sigmask(_hsignal.SIG_BLOCK, {_hsignal.SIGUSR2, _hsignal.SIGTERM, _hsignal.SIGINT})
            (d / f"hung-{os.getpid()}").write_text(str(step))
            while True:
                _htime.sleep(3600)
        return _hreal(step, total, *a, **kw)

    _hoptim.lr_at = _hanging
