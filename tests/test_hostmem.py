"""train/hostmem.py: with glibc's thresholds raised, a freed 48 MB tensor's memory is
reused by the next one without the kernel faulting a page in; without, every allocation
faults all of its pages in (what made a wide layer cost more per step than its FLOPs on
the CPU).  Each case in a fresh process, as dw train's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

PROBE = """
import resource, sys
from depthwidth.train.hostmem import hold_freed_memory
held = hold_freed_memory() if sys.argv[1] == "hold" else None
import torch
torch.set_num_threads(1)
n = 12_000_000  # 48 MB of float32: over glibc's largest dynamic mmap threshold (32 MiB)
for _ in range(20):  # warm-up: the heap grows for the first few (posix_memalign's slack), then holds
    a = torch.empty(n); a.fill_(1.0); del a
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    a = torch.empty(n); a.fill_(1.0); del a
print(held, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 10)
"""


def _faults(mode: str) -> tuple[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[-2], float(out[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_held_memory_is_reused_without_page_faults():
    held, faults = _faults("hold")
    assert held == "True"
    assert faults < 100  # 48 MB = 11,719 pages of 4 KiB
    _, default = _faults("default")
    # every allocation mapped afresh and faulted in page by page (11,719 faults here; fewer
    # but still some with transparent huge pages always on)
    assert default > 10 * faults + 20
