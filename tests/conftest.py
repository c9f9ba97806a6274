"""Shared pytest fixtures.

Each block below is owned by one part of the test suite; add new fixtures in a
section of their own rather than inside another's.
"""

from __future__ import annotations

import json
import os
import tempfile

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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """``make test`` runs on 2 workers (pytest-xdist, ``--dist loadgroup``).  Every test that
    uses a SLURM test cluster runs on one of them, in order, so the clusters (session
    fixtures, fixed directories) are started once and never shared by two workers; the
    other tests go file by file, so a module's expensive fixture is built once."""
    slow = _slow_tests()
    for item in items:
        slurm = item.get_closest_marker("slurm") or {"slurm_cluster", "slurm_cluster_2n"} & set(item.fixturenames)
        item.add_marker(pytest.mark.xdist_group("slurm" if slurm else item.nodeid.split("::")[0]))
        if slurm or item.nodeid.split("::")[0] in slow:  # `make test-fast` runs -m "not slow"
            item.add_marker(pytest.mark.slow)


def _slow_tests() -> set[str]:
    """The test modules tests/slow.txt lists (over 20 s each, measured)."""
    path = Path(__file__).resolve().parent / "slow.txt"
    lines = (ln.split("#")[0].strip() for ln in path.read_text().splitlines())
    return {ln for ln in lines if ln}


def _slurm_required() -> bool:
    ci = os.environ.get("CI", "").strip().lower()
    return (ci not in ("", "0", "false", "no")) or os.environ.get("DW_REQUIRE_SLURM") == "1"


def _slurm_unavailable(reason: str):
    message = f"SLURM cluster unavailable: {reason}"
    if _slurm_required():
        pytest.fail(message + " (CI or DW_REQUIRE_SLURM=1: SLURM tests must run)", pytrace=False)
    pytest.skip(message)


def _script(verb: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SLURM_SCRIPT), verb],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
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
