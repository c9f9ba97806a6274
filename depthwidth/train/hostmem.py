"""Host memory for training on the CPU: keep freed tensors' memory in the process.

glibc's malloc serves a block over its mmap threshold (128 KiB, raised on the fly to at
most 32 MiB) with a fresh mapping and unmaps it at free, and trims the heap's free top
back to the kernel.  A training step frees and re-allocates the same tensors every time
(activations, gradients after ``zero_grad``), so every tensor over the threshold is
page-faulted in and zeroed by the kernel again on every step: a model with wide layers
(the 12 × 1024 × model's 1728 × 6912 MLP matrices, 48 MB each) pays for it and a uniform
model of the same parameters, whose tensors are smaller, does not.  CUDA's caching
allocator keeps its blocks for this reason; on the CPU, raising both thresholds
(``mallopt``) does the same: after the first few steps (while the heap grows to fit
torch's aligned blocks) no step faults its tensors in (tests/test_hostmem.py).  The
process keeps its peak memory, which a training process reaches every step anyway.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 1 << 30  # blocks up to 1 GiB come from the heap
TRIM_THRESHOLD = (1 << 31) - 1  # the heap's free top is never handed back


def hold_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False where there is no
    glibc (macOS, musl) or it refused, and nothing changed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")  # glibc's own name: no ldconfig lookup at start-up
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
