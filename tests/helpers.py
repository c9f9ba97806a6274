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
        cwd=cwd or REPO, env=e, capture_output=True, text=True, timeout=timeout,
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
