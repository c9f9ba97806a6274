"""What the loop measures between host syncs.

``LossWatch`` keeps the last steps' loss tensors on the device and checks
them for NaN/inf only where the loop must know (a metrics line, an
evaluation, a checkpoint, a stop): one host transfer for all of them, so the
GPU is never stalled every step.  ``Throughput`` turns token counts and wall
time into the metrics line's tokens/s and MFU.
"""

from __future__ import annotations

import math
import time

from depthwidth.core.devices import PEAK_FLOPS
from depthwidth.train import dist


def peak_flops(device) -> float | None:
    import torch

    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


class LossWatch:
    def __init__(self, world, last_finite: float | None = None):
        self.world = world
        self.pending: list = []  # (step, loss tensor)
        self.last_finite = last_finite

    def add(self, step: int, loss) -> None:
        self.pending.append((step, loss))

    def first_bad_step(self) -> int | None:
        """The first pending step whose (data-parallel mean) loss is not finite, else None."""
        import torch

        if not self.pending:
            return None
        vals = dist.mean(self.world, torch.stack([l for _, l in self.pending]).float()).tolist()
        steps = [s for s, _ in self.pending]
        self.pending.clear()
        for s, v in zip(steps, vals):
            if not math.isfinite(v):
                return s
            self.last_finite = v
        return None


class Throughput:
    def __init__(self, tokens: int, flops_per_token: float, peak: float | None):
        self.t, self.tokens = time.perf_counter(), tokens
        self.fpt, self.peak = flops_per_token, peak

    def row(self, tokens: int) -> dict:
        """tokens/s and MFU since the previous row."""
        now = time.perf_counter()
        tps = (tokens - self.tokens) / max(now - self.t, 1e-9)
        self.t, self.tokens = now, tokens
        return {"tokens_per_s": round(tps, 1), "mfu": round(tps * self.fpt / self.peak, 4) if self.peak else None}

    @staticmethod
    def memory(device) -> dict:
        """Peak bytes allocated on a CUDA device so far (the memory plan's measured side)."""
        if device.type != "cuda":
            return {}
        import torch

        return {"peak_memory_bytes": int(torch.cuda.max_memory_allocated(device))}


def describe_device(device) -> str:
    """The device for provenance: ``cuda:0 (NVIDIA H200)``, or ``cpu``."""
    if device.type != "cuda":
        return str(device)
    import torch

    return f"{device} ({torch.cuda.get_device_name(device)})"
