"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_dw(*args: str, cwd: str | os.PathLike | None = None, env: dict | None = None, timeout: float = 300):
    """Run ``dw ARGS`` as a real subprocess; returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.setdefault("PYTHONPATH", str(REPO))
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "depthwidth", *args],
        cwd=cwd or REPO,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_bad_input(proc) -> str:
    """Exit 2, exactly one line on stderr, no traceback; returns that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def dw_in_process(capsys, *argv: str):
    """Run ``dw ARGV`` in this process (pytest's ``capsys``); returns (exit code, stdout, stderr)."""
    from depthwidth.cli import main

    code = 0
    try:
        main(list(argv))
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


class _Stream(io.TextIOWrapper):
    """A text stream over bytes, as a pipe looks to dw (not a terminal); ``text()`` reads it back."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", "backslashreplace")


_INTERPRETER_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def dw(
    *args: str,
    cwd: str | os.PathLike | None = None,
    env: dict | None = None,
    replace_env: bool = False,
    timeout: float | None = None,
):
    """``dw ARGS`` in this process, as ``run_dw`` runs it in a new one: same ``main(argv)``, exit code
    (SystemExit, or 1 and the traceback on stderr for an exception that escapes, as the interpreter
    would), stdout and stderr (with the warnings a fresh interpreter would print there), cwd (the
    repository unless ``cwd``), environment (``env`` added, or the whole of it with ``replace_env``).
    Returns a CompletedProcess (text); ``timeout`` is only accepted (``run_dw``'s signature).
    Nothing stays behind: os.environ, the cwd, sys.argv, the umask, signal handlers and torch's
    thread count are put back, and the cached git state is read afresh as a new process would.
    For tests where a new process adds nothing; those about the process (signals, kill -9, what is
    imported, several processes) use ``run_dw``."""
    import contextlib
    import signal
    import traceback
    import warnings

    from depthwidth.cli import main
    from depthwidth.core.provenance import git_state

    git_state.cache_clear()  # a new process would look at the checkout again (it may have a new commit)
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    sigs = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)]
    saved_sigs = {s: signal.getsignal(s) for s in sigs}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch else None
    out, err = _Stream(), _Stream()
    code = 0
    try:
        if replace_env:
            os.environ.clear()
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        os.chdir(cwd or REPO)
        sys.argv = ["dw", *args]
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("default")
            for category in _INTERPRETER_WARNINGS:
                warnings.filterwarnings("ignore", category=category)
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if e.code is not None and not isinstance(e.code, int):
                    err.write(f"{e.code}\n")
            except BaseException:  # noqa: BLE001 - what the interpreter does with it
                err.write(traceback.format_exc())
                code = 1
            finally:
                for w in caught:
                    err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        os.umask(saved_umask)
        for s, h in saved_sigs.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        torch = sys.modules.get("torch")
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["dw", *args], code, out.text(), err.text())


GATE_CODE = REPO / "tests" / "gate"


def gate_env(gate_dir: Path, *steps: int) -> dict:
    """Environment that holds every run trained under it before each of ``steps`` until a
    stop signal reaches it or ``open_gate(gate_dir)`` (tests/gate/sitecustomize.py): a
    signal sent while the run waits there cannot race the run's end."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    return {"PYTHONPATH": f"{GATE_CODE}{os.pathsep}{REPO}", "DW_TEST_GATE": f"{gate_dir}:{','.join(map(str, steps))}"}


def start_gate_env(gate_dir: Path, task: int) -> dict:
    """Environment that holds SLURM array task ``task`` before its first run trains, with
    submitit's signal handlers already installed (tests/gate/sitecustomize.py)."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    return {"PYTHONPATH": f"{GATE_CODE}{os.pathsep}{REPO}", "DW_TEST_GATE_START": f"{gate_dir}:{task}"}


def at_gate(gate_dir: Path, step: int | None = None) -> int:
    """How many processes wait (or waited) at the gate before ``step`` (any step: None)."""
    return len(list(gate_dir.glob(f"at-{'*' if step is None else step}-*")))


def open_gate(gate_dir: Path) -> None:
    (gate_dir / "open").write_text("")


def sweep_store(root: Path, name: str, text: str) -> dict:
    """A sweep file ``root/sweeps/NAME.yaml`` (``text`` dedented) and a run store ``root/runs``: the
    environment that points dw at both."""
    import textwrap

    (root / "sweeps").mkdir(exist_ok=True)
    (root / "sweeps" / f"{name}.yaml").write_text(textwrap.dedent(text))
    return {"DW_SWEEPS": str(root / "sweeps"), "DW_RUNS": str(root / "runs")}
