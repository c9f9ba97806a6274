"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

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
