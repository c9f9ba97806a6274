"""Data parallelism for runs that span several processes (GPUs, or CPU
processes under ``torchrun`` / ``srun`` with ``tasks_per_node > 1``).

Every rank draws the same global batch from the deterministic sampler and
trains on its own slice of rows; DDP averages the gradients, so the
optimiser sees the gradient of the whole batch, checkpoints stay
rank-independent and a resumed run continues the same token stream.  Only
rank 0 writes to the run directory.  The environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) comes from torchrun or the launcher.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def world_from_env() -> World:
    e = os.environ
    return World(int(e.get("RANK", "0")), int(e.get("WORLD_SIZE", "1")), int(e.get("LOCAL_RANK", "0")))


def init(world: World, device_type: str, force: bool = False) -> None:
    """The process group, for a run of several processes (or ``force``: FSDP on one)."""
    import torch.distributed as dist

    if (world.distributed or force) and not dist.is_initialized():
        if not world.distributed:  # one process, no launcher: a group of one on this host
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(free_port()))
            os.environ.setdefault("RANK", "0")
            os.environ.setdefault("WORLD_SIZE", "1")
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")


def barrier(world: World) -> None:
    """Every rank waits here for the others (nothing on one process)."""
    if world.distributed:
        import torch.distributed as dist

        dist.barrier()


def shutdown(world: World) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(world: World, x, y):
    """This rank's slice of a global batch."""
    if not world.distributed:
        return x, y
    n = x.size(0) // world.size
    sl = slice(world.rank * n, (world.rank + 1) * n)
    return x[sl], y[sl]


def mean(world: World, t):
    """All-reduce mean of a tensor (identity on one process)."""
    if not world.distributed:
        return t
    import torch.distributed as dist

    t = t.clone()
    dist.all_reduce(t)
    return t / world.size


def smallest(world: World, value: float, device=None) -> float:
    """The smallest of every rank's ``value`` (``value`` on one process), e.g. the memory of the
    smallest GPU of an allocation, so that every rank plans alike."""
    return _all_reduce(world, value, device, "MIN")


def largest(world: World, value: float, device=None) -> float:
    """The largest of every rank's ``value`` (``value`` on one process)."""
    return _all_reduce(world, value, device, "MAX")


def _all_reduce(world: World, value: float, device, op: str) -> float:
    if not world.distributed:
        return value
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(value)], dtype=torch.float64, device=device)  # float32 would round bytes of memory
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    return t.item()
