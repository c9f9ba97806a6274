"""Shared pytest fixtures.

Each block below is owned by one part of the test suite; add new fixtures in a
section of their own rather than inside another's.
"""

from __future__ import annotations

import json
import os
import tempfile

# ============================================================================
# OpenMP threads that sleep when they wait (owner: the Makefile's test targets)
#
# `make test` runs 4 workers, their training subprocesses and SLURM jobs on 2 cores.  torch's CPU
# threads are libgomp's, which spin (300,000 rounds) at every barrier before they sleep: on a
# contended core a thread spins while the one it waits for is off the CPU.  A 20-step run at
# train.threads=2 beside two busy processes took 19.9 CPU-s and 21.9 s (8.5 CPU-s and 12.5 s with
# PASSIVE; 9.2 CPU-s alone either way).  Set before torch is first imported, and inherited by every
# subprocess, local worker and SLURM job the tests start; it changes when threads wait, not what
# they compute.
# ============================================================================
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# ============================================================================
# Hugging Face caches (owner: tests/test_export.py, tests/test_eval.py)
#
# transformers and lm-evaluation-harness read these when first imported: the tests never touch the
# user's ~/.cache/huggingface (remote-code modules of exported folders land there otherwise) and
# never reach for the network (the harness's tasks here are local YAMLs and files).
# ============================================================================
os.environ.setdefault("HF_HOME", os.path.join(tempfile.gettempdir(), f"dw-tests-hf-{os.getuid()}"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# ============================================================================
# SLURM cluster fixture (owner: scripts/slurm_cluster.sh, docs/slurm.md)
#
#   def test_x(slurm_cluster):            # mark such tests @pytest.mark.slurm
#       slurm_cluster.conf                # Path of the generated slurm.conf
#       slurm_cluster.sh("squeue", "-h")  # run a SLURM command, CompletedProcess
#
# Session scoped. Starts the single-node cluster with accounting through
# scripts/slurm_cluster.sh (or reuses one that is already running), sets
# SLURM_CONF in os.environ for the whole session, and stops the cluster at the
# end only if this fixture started it. When the cluster cannot start the tests
# are skipped with the script's one-line reason ("SLURM cluster unavailable:
# must run as root (uid 1000)"), except under CI (env CI set, not "0"/"false")
# or DW_REQUIRE_SLURM=1, where they fail instead.
# ============================================================================

import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SLURM_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "slurm_cluster.sh"
SLURM_START_TIMEOUT_S = 900  # a first start installs Debian packages


@dataclasses.dataclass(frozen=True)
class SlurmCluster:
    """A running single-node SLURM cluster (see docs/slurm.md)."""

    conf: Path  # generated slurm.conf; os.environ["SLURM_CONF"] points here
    dir: Path  # DW_SLURM_DIR: config, state, logs
    env: dict  # variables the script's `env` verb exported (SLURM_CONF, ...)
    started_here: bool  # True if this session started it (and will stop it)
    script: Path = SLURM_SCRIPT

    def sh(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a SLURM client command (`sh("scontrol", "requeue", jid)`), text output captured."""
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
            env={**os.environ, **self.env},
        )


# The SLURM tests form two groups, each on its own worker and its own single-node cluster (its own
# folder and ports, so neither stops or fills the other's): the slurm groups were the suite's critical
# path when they ran in one line (1,173 s alone, 2026-12-03).  Both tests on the 2-node cluster are in
# SLURM_B (one fixed folder, one worker).  Balanced by measured time: A ~585 s, B ~560 s.
SLURM_B = {
    "tests/test_slurm_limits.py",
    "tests/test_launch_multinode.py",
    "tests/test_retry.py",
    "tests/test_launch_slurm.py",
}


def _group(item, slow: dict[str, float]) -> tuple[str, bool]:
    """(xdist group, slow?) of a test: a SLURM group, else its module."""
    module = item.nodeid.split("::")[0]
    if item.get_closest_marker("slurm") or {"slurm_cluster", "slurm_cluster_2n"} & set(item.fixturenames):
        return ("slurm-b" if module in SLURM_B else "slurm-a"), True
    return module, module in slow


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """``make test`` runs on 4 workers (pytest-xdist, ``--dist loadgroup --no-loadscope-reorder``) on
    2 cores: the two SLURM groups go first, one to each of the first two workers (xdist hands the
    first work unit of its queue to each worker in turn), and mostly wait on the clusters while the
    other two keep both cores busy.  Then the slow modules, longest first (tests/slow.txt's times),
    then the rest file by file, so a module's expensive fixture is built once."""
    slow = _slow_tests()
    rank = {}
    for item in items:
        group, is_slow = _group(item, slow)
        item.add_marker(pytest.mark.xdist_group(group))
        if is_slow:  # `make test-fast` runs -m "not slow"
            item.add_marker(pytest.mark.slow)
        rank[item.nodeid] = (0, 0) if group == "slurm-a" else (1, 0) if group == "slurm-b" else (2, -slow.get(group, 0))
    items.sort(key=lambda it: rank[it.nodeid])  # stable: the order inside a group is kept


def _slow_tests() -> dict[str, float]:
    """{module: seconds} of the test modules tests/slow.txt lists (over 20 s each, measured)."""
    path = Path(__file__).resolve().parent / "slow.txt"
    out = {}
    for ln in path.read_text().splitlines():
        name, _, comment = ln.partition("#")
        if name.strip():
            secs = comment.strip().removesuffix("s").strip()
            out[name.strip()] = float(secs) if secs.replace(".", "", 1).isdigit() else 0.0
    return out


def _slurm_required() -> bool:
    ci = os.environ.get("CI", "").strip().lower()
    return (ci not in ("", "0", "false", "no")) or os.environ.get("DW_REQUIRE_SLURM") == "1"


def _slurm_unavailable(reason: str):
    message = f"SLURM cluster unavailable: {reason}"
    if _slurm_required():
        pytest.fail(message + " (CI or DW_REQUIRE_SLURM=1: SLURM tests must run)", pytrace=False)
    pytest.skip(message)


def _cluster_env() -> dict:
    """The single-node cluster's folder for this pytest process: the default one (``/tmp/dw-slurm``,
    or ``DW_SLURM_DIR`` when set) for a run without xdist and for its first worker, a folder of its
    own for any other worker that runs SLURM tests (scripts/slurm_cluster.sh derives its ports from
    the folder), so two workers never share, nor stop, one cluster."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker == "gw0" or "DW_SLURM_DIR" in os.environ:
        return {}
    return {"DW_SLURM_DIR": f"/tmp/dw-slurm-{worker}"}


@contextlib.contextmanager
def _start_lock():
    """One cluster start at a time on this machine: a first start installs Debian packages, and two
    apt-get runs at once fail on dpkg's lock."""
    import fcntl

    with open(os.path.join(tempfile.gettempdir(), "dw-slurm-start.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _script(verb: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SLURM_SCRIPT), verb],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **_cluster_env()},
    )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[-1] if lines else "no message"
    return line.removeprefix("slurm_cluster.sh: ")


@pytest.fixture(scope="session")
def slurm_cluster():
    if shutil.which("bash") is None:
        _slurm_unavailable("bash not found")
    if not SLURM_SCRIPT.is_file():
        _slurm_unavailable(f"{SLURM_SCRIPT} missing")

    already = _script("status", 60).returncode == 0
    if not already:
        try:
            with _start_lock():
                proc = _script("start", SLURM_START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _slurm_unavailable(f"start took over {SLURM_START_TIMEOUT_S} s")
        if proc.returncode != 0:
            _slurm_unavailable(_last_line(proc.stderr or proc.stdout))

    exported = {}
    for line in _script("env", 30).stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            exported[key.strip()] = value.strip().strip("'\"")
    if "SLURM_CONF" not in exported:
        _slurm_unavailable("scripts/slurm_cluster.sh env printed no SLURM_CONF")

    saved = {k: os.environ.get(k) for k in exported}
    os.environ.update(exported)
    conf = Path(exported["SLURM_CONF"])
    try:
        yield SlurmCluster(conf=conf, dir=conf.parent.parent, env=exported, started_here=not already)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not already:
            _script("stop", 120)


@pytest.fixture(scope="session")
def slurm_cluster_2n():
    """A second cluster of two nodes on this machine (DW_SLURM_NODES=2: node1 and node2, one
    slurmd each, their own ports; see docs/slurm.md), beside the single-node one.  Yields
    the environment its clients need ({"SLURM_CONF": ...}); os.environ is left alone."""
    env = {**os.environ, "DW_SLURM_DIR": "/tmp/dw-slurm-2n", "DW_SLURM_NODES": "2"}

    def run(verb, t):
        return subprocess.run(
            ["bash", str(SLURM_SCRIPT), verb],
            capture_output=True,
            text=True,  # noqa: E731
            timeout=t,
            stdin=subprocess.DEVNULL,
            env=env,
        )

    if shutil.which("bash") is None:
        _slurm_unavailable("bash not found")
    already = run("status", 60).returncode == 0
    if not already:
        with _start_lock():
            proc = run("start", SLURM_START_TIMEOUT_S)
        if proc.returncode != 0:
            _slurm_unavailable("2-node cluster: " + _last_line(proc.stderr or proc.stdout))
    conf = next(
        line.split("=", 1)[1].strip().strip("'\"")
        for line in run("env", 30).stdout.splitlines()
        if line.startswith("export SLURM_CONF=")
    )
    try:
        yield {"SLURM_CONF": conf}
    finally:
        if not already:
            run("stop", 120)


# ============================================================================
# (end of SLURM section)
# ============================================================================


# ============================================================================
# Reliability ledger (owner: tests/reliability, make test-reliability)
# ``DW_RELIABILITY_LEDGER=FILE`` (set by ``make test-reliability``) collects one JSON line per
# record of what a test injected and measured; ``python -m tests.reliability.summary FILE``
# prints the one-line total.  Without it nothing is recorded (plain ``make test``).
# ============================================================================


@pytest.fixture
def ledger(request):
    def record(*, faults: int, recovered: int, lost: int, duplicates: int) -> None:
        path = os.environ.get("DW_RELIABILITY_LEDGER")
        if not path:
            return
        row = {
            "test": request.node.nodeid,
            "faults": faults,
            "recovered": recovered,
            "lost": lost,
            "duplicates": duplicates,
        }
        with open(path, "a") as f:  # one short line per write: O_APPEND keeps lines whole
            f.write(json.dumps(row) + "\n")

    return record
