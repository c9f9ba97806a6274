"""The wave job: ``python -m depthwidth.launch.waves runs/NAME/jobs/SUB``.

A submission larger than the scheduler's limit on queued jobs (launch/limits.py) goes in as
waves: launch/slurm_waves.py submits the first one with this job behind it (``afterany`` on that wave);
when the wave has ended this job submits the next wave and the next wave job, and records their
job ids in the sweep's manifest (slurm_waves.py ``next_wave``).  So the cluster carries a sweep through,
one wave after another, with no process left on the login node.  See docs/slurm.md.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from depthwidth.launch.slurm import clean_env
from depthwidth.launch.slurm_waves import next_wave
from depthwidth.launch.task import array_task


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    me = os.environ.get("SLURM_JOB_ID")
    if len(argv) != 1 or not me:
        sys.stderr.write("usage (inside its SLURM job): python -m depthwidth.launch.waves runs/NAME/jobs/SUB\n")
        return 2
    clean_env()
    return next_wave(argv[0], me, array_task, log=lambda m: print(m, flush=True))


if __name__ == "__main__":
    sys.exit(main())
