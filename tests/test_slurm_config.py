"""The test cluster's node line (scripts/slurm_cluster.sh ``node_line``), without starting a cluster."""

from __future__ import annotations

import os
import re
import subprocess

from tests.helpers import REPO


def test_the_node_line_counts_this_machines_cpus_whatever_omp_num_threads_says():
    """A benchmark module the tests import sets OMP_NUM_THREADS=1 in the pytest worker; nproc honours it,
    so a cluster started from that worker declared CPUs=1 against the 2 cores slurmd -C reports, and
    slurmctld refused to start (every SLURM test of that run skipped: 2026-12-05)."""
    script = (REPO / "scripts" / "slurm_cluster.sh").read_text()
    fn = re.search(r"^node_line\(\) \{\n.*?^\}\n", script, re.S | re.M).group(0)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_THREAD_LIMIT": "1"}
    out = subprocess.run(
        ["bash", "-c", f"{fn}\nNODES=1\nnode_line"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert f"CPUs={len(os.sched_getaffinity(0))} " in out, out
