"""How one run is laid out over its processes, applied to the model from outside it.

``train.parallel``:
  single  one process holds the whole model (the only choice on one process);
  ddp     every process holds the whole model, gradients are averaged (DDP);
  fsdp    parameters, gradients and optimiser state are sharded over the
          processes with FSDP2 (``fully_shard`` on every block, then on the
          root): each block is one shard unit, so blocks of different widths
          are simply units of different sizes, and ``model.resize=proj``
          projections ride with the root;
  auto    single on one process; DDP when the replicated model, its
          optimiser and the activations of one micro-batch fit the device
          (train/memory.py), FSDP otherwise.

On CUDA with ``train.precision=bf16`` FSDP computes with bf16 parameters
and keeps fp32 master weights and fp32 gradient reductions
(``MixedPrecisionPolicy``); single/DDP use bf16 autocast over fp32 weights.

``train.activation_checkpointing``: ``block`` recomputes each block's
activations in the backward pass (non-reentrant ``torch.utils.checkpoint``;
the block's forward is wrapped, so parameter names and checkpoints do not
change); ``auto`` does so when the plan says the run does not fit without it.

Micro-batches (``train.micro_batch_size``, per process): ``sync(fwd, mode,
last)`` suspends DDP's gradient all-reduce for every micro-batch but the last,
so an accumulated DDP step communicates once; FSDP reduce-scatters every
micro-batch's gradients into the shards (memory over communication).
"""

from __future__ import annotations

import contextlib

MODES = ("single", "ddp", "fsdp")


def checkpoint_blocks(model) -> None:
    """Recompute each block's forward in backward (non-reentrant)."""
    from torch.utils.checkpoint import checkpoint

    for block in model.blocks:
        inner = block.forward

        def forward(*args, _inner=inner, **kwargs):
            return checkpoint(_inner, *args, use_reentrant=False, **kwargs)

        block.forward = forward  # an instance attribute: Module.__call__ (and FSDP's hooks) stay in place


RECOMPILE_MARGIN = 8  # graphs beyond the blocks' own shapes (a last partial batch, eval vs train)


def compile_blocks(model) -> None:
    """``torch.compile`` each block: one graph per distinct block shape, reused by every layer of
    that shape.  Dynamo keeps the graphs of one code object together (``Block.forward`` is one for
    every block) and, past ``recompile_limit`` (8) shapes, silently runs the rest eager: a × or ◇
    model has up to D/2 + 1 distinct widths, so the limit is raised to cover every block shape of
    the model (and of models compiled before it in this process)."""
    import torch._dynamo

    from depthwidth.model.moe import MoE

    shapes = {tuple(tuple(p.shape) for p in b.parameters()) for b in model.blocks}
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_MARGIN) + len(shapes)
    for block in model.blocks:
        if isinstance(block.mlp, MoE):  # data-dependent dispatch: as the VWT setup, MoE stays eager
            block.attn.compile()
        else:
            block.compile()


def apply(model, mode: str, device, precision: str, *, ac: bool = False, compile: bool = False):
    """Lay ``model`` out for ``mode``; returns the module the loop calls (``model`` keeps
    the parameters: for FSDP they become DTensor shards in place)."""
    import torch

    if ac:
        checkpoint_blocks(model)
    if compile:
        compile_blocks(model)
    if mode == "single":
        return model
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True
        )  # .grad are views into the buckets: no 2nd copy
    if mode == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = None
        if device.type == "cuda" and precision == "bf16":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        kw = {"mp_policy": mp} if mp is not None else {}
        for block in model.blocks:
            fully_shard(block, **kw)
        fully_shard(model, **kw)
        return model
    raise ValueError(f"unknown parallel mode {mode!r}")


def sync(fwd, mode: str, last: bool):
    """Context for one micro-batch's forward+backward.  DDP synchronises on the last
    micro-batch only.  FSDP reduce-scatters after every micro-batch: skipping it would
    keep each parameter's whole unsharded fp32 gradient (4·N bytes per rank) until the
    last one, which is what sharding is there to avoid."""
    if mode == "ddp" and not last:
        return fwd.no_sync()
    return contextlib.nullcontext()


def autocast(device, precision: str, mode: str):
    """bf16 autocast for single/DDP in bf16; FSDP casts its parameters itself."""
    import torch

    if precision == "bf16" and not (mode == "fsdp" and device.type == "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def local(t):
    """The tensor this rank holds (a DTensor's shard, or the tensor itself)."""
    return t.to_local() if hasattr(t, "to_local") else t


def global_sq_norms(world, tensors):
    """Squared L2 norm of each (possibly sharded) tensor, over all ranks: one all-reduce."""
    import torch

    sharded = any(hasattr(t, "to_local") for t in tensors)
    sq = torch.stack(torch._foreach_norm([local(t) for t in tensors])).float() ** 2
    if sharded and world.distributed:
        import torch.distributed as dist

        dist.all_reduce(sq)
    return sq
