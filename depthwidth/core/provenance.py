"""Provenance: what produced a result, recorded beside it.

``record(...)`` is the block every run directory's ``config.yaml`` and
``summary.json``, every W&B run's config and every ``fit.json`` carry:

    dw           dw's version
    git          {commit, dirty, root} of the checkout the code was imported from
                 (commit/dirty null when it is not a git checkout)
    versions     python, torch, numpy, scipy (null where not installed)
    device       e.g. "cpu", "cuda:0 (NVIDIA H200)"        (runs)
    precision    fp32 | bf16                                 (runs)
    data         the data source's fingerprint               (runs; fits: the input table's)
    job_id       the scheduler's id of the job (SLURM_ARRAY_JOB_ID_TASK, SLURM_JOB_ID, or
                 the local/debug launcher's DW_JOB_ID); null when run by hand
    host, time

The git state is read once per process (two ``git`` calls, ~10 ms); torch's
version is read from the package metadata, so recording provenance never
imports torch.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import socket
import subprocess
import time
from pathlib import Path

from depthwidth import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=8)
def git_state(where: str | None = None) -> dict:
    """{commit, dirty, root} of the git checkout holding ``where`` (default: dw's own code).
    ``dirty`` is true when tracked files differ from the commit, or untracked,
    not-ignored files sit where code or configuration lives (``CODE_PATHS``):
    a researcher's own sweep file in ``sweeps/`` or data in ``data/`` (the
    README's workflow) is not a change to the code that produced a run."""
    d = Path(where) if where else PACKAGE_DIR
    out = {"commit": None, "dirty": None, "root": None}
    try:
        top = subprocess.run(
            ["git", "-C", str(d), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if top.returncode != 0:
            return out
        root, commit = top.stdout.split()[:2]
        st = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=all"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        out.update(commit=commit, root=root, dirty=_dirty(st.stdout) if st.returncode == 0 else None)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    return out


CODE_PATHS = ("depthwidth/", "conf/", "pyproject.toml")  # untracked files here change what a run runs


def _dirty(porcelain: str) -> bool:
    for line in porcelain.splitlines():
        if not line.strip():
            continue
        if not line.startswith("??"):
            return True  # a tracked file differs from the commit
        path = line[3:].strip().strip('"')
        if path.startswith(CODE_PATHS):
            return True
    return False


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    return {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
    }


def job_id() -> str | None:
    e = os.environ
    if e.get("SLURM_ARRAY_JOB_ID"):
        return f"{e['SLURM_ARRAY_JOB_ID']}_{e.get('SLURM_ARRAY_TASK_ID', '0')}"
    return e.get("SLURM_JOB_ID") or e.get("DW_JOB_ID") or None


def record(*, device: str | None = None, precision: str | None = None, data: str | None = None) -> dict:
    return {
        "dw": __version__,
        "git": {k: v for k, v in git_state().items()},
        "versions": versions(),
        "device": device,
        "precision": precision,
        "data": data,
        "job_id": job_id(),
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def fingerprint(*parts: bytes | str) -> str:
    """sha256 over the parts (length-prefixed, so ("ab", "c") != ("a", "bc")); 16 hex digits."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:16]


def mixed(records: list[dict]) -> list[str]:
    """Warnings for a set of runs' provenance blocks produced by different commits,
    dirty trees or precisions (what a reader of one sweep's table should know)."""
    out = []
    recs = [r for r in records if isinstance(r, dict)]
    commits = sorted({(r.get("git") or {}).get("commit") or "unknown" for r in recs})
    if len(commits) > 1:
        out.append(f"runs were produced by {len(commits)} different commits: " + ", ".join(c[:10] for c in commits))
    dirty = sum(1 for r in recs if (r.get("git") or {}).get("dirty"))
    if dirty:
        out.append(f"{dirty} of {len(recs)} runs were produced from a dirty tree (uncommitted changes)")
    precs = sorted({str(r.get("precision")) for r in recs})
    if len(precs) > 1:
        out.append(f"runs were trained in {len(precs)} precisions: {', '.join(precs)}")
    return out
