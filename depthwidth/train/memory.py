"""The memory plan of a run: bytes per device, before anything is submitted.

Static part (exact; tests count every tensor on every rank):
    params      fp32 master weights: 4·N replicated (single, DDP), or for FSDP2
                the rank's dim-0 shard of every tensor, padded to ceil(d0/S) rows
                (FSDP2 keeps one padded buffer per parameter);
    grads       the same layout in fp32 (DDP: views into its buckets);
    optimizer   AdamW: exp_avg + exp_avg_sq in fp32 over the rank's (unpadded)
                elements, plus one 4-byte step counter per tensor;
    branch      WSD decay branches clone the model and the optimiser state
                once more (params + optimizer) while a branch trains;
    buffers     RoPE tables, replicated.
Working set (estimates, stated):
    compute     bf16 copies of the weights being multiplied: autocast's
                weight cache (2·N) for single/DDP; for FSDP the unsharded
                bf16 (fp32 on CPU) parameters and gradients of the two largest
                blocks in flight (current + prefetched) and of the root;
    activations what autograd saves for backward, per micro-batch: per token
                and layer 19·w_i values (GELU) or 29·w_i (SwiGLU), measured
                by counting autograd's saved tensors (test), plus the head
                (logits and their log-softmax, 10·V bytes/token in bf16);
                bf16 on CUDA stores those values in 2 bytes, except the
                fp32 residual stream and norm inputs/outputs (+8·w_i bytes);
                with ``activation_checkpointing=block`` only each block's
                input stays (w_i values) plus one block recomputed in backward;
    reserve     2 GiB on CUDA for the context, NCCL buffers and allocator slack.

``layout(...)`` resolves ``train.parallel``/``micro_batch_size``/
``activation_checkpointing`` = auto against the device's memory and returns
the plan; a run that cannot fit is ``fits=False`` with the settings that
would make it fit.  No torch here: ``dw sweep --dry-run`` plans every run.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from depthwidth.core.errors import bad
from depthwidth.model.accounting import param_shapes
from depthwidth.model.spec import ModelSpec

GiB = 2**30
CUDA_RESERVE = 2 * GiB
SAVED_PER_WIDTH = {"gelu": 19, "swiglu": 29}  # values saved per token per layer, in units of w_i
HEAD_BYTES_BF16 = 10  # per token per vocabulary entry: bf16 logits + fp32 log-softmax + its gradient


@dataclass
class MemoryPlan:
    processes: int
    mode: str  # single | ddp | fsdp
    micro_batch: int  # sequences per process per micro-batch
    accum: int  # micro-batches per optimiser step
    ac: bool  # activation checkpointing per block
    precision: str
    device: str  # cuda | cpu
    capacity: int | None  # bytes per device (None: not checked, e.g. a CPU run)
    bytes: dict = field(
        default_factory=dict
    )  # params, grads, optimizer, branch, buffers, compute, activations, reserve
    fits: bool = True
    advice: str = ""

    @property
    def total(self) -> int:
        return int(sum(self.bytes.values()))

    def to_dict(self) -> dict:
        return {
            "processes": self.processes,
            "mode": self.mode,
            "micro_batch": self.micro_batch,
            "accum": self.accum,
            "activation_checkpointing": self.ac,
            "precision": self.precision,
            "device": self.device,
            "capacity": self.capacity,
            "bytes": dict(self.bytes),
            "total": self.total,
            "fits": self.fits,
            "advice": self.advice,
        }


@functools.lru_cache(maxsize=64)
def shape_counts(spec: ModelSpec) -> tuple:
    """((unit, shape, count), ...): every parameter of ``spec`` (``accounting.param_shapes``), each
    block's tensors with how many blocks hold them.  A block's shapes depend only on its width and the
    width entering it, so the blocks are listed one of each class (``spec.layer_classes``: a run of
    equal widths is its first block, entered from the previous width, and its second, standing for the
    rest): a 400-layer uniform model is read as a 2-layer one (the dry run of 10,000 deep configurations
    spent most of its time listing every layer's tensors, three times a run).  Cached per spec."""
    classes = spec.layer_classes()
    short = (
        spec
        if len(classes) == spec.depth
        else dataclasses.replace(spec, widths=tuple(spec.widths[i] for i, _ in classes))
    )
    return tuple((unit, shape, 1 if c is None else classes[c][1]) for unit, shape, c in _listed(short))


@functools.lru_cache(maxsize=256)
def _listed(spec: ModelSpec) -> tuple:
    """((unit, shape, class), ...) of ``param_shapes``, ``class`` the index of block ``blocks.i`` in
    the short spec's layers (None: the root), read from the unit's name once here: a short spec recurs
    across depths (every uniform model of one width deeper than 2 layers reads as the same 2-layer one)."""
    return tuple(
        (unit, shape, None if unit == "root" else int(unit.split(".", 1)[1])) for unit, _, shape in param_shapes(spec)
    )


def _units(spec: ModelSpec) -> dict:
    """{unit: elements}: the root's, and each distinct block's (its count beside it: ``_block_sizes``)."""
    units: dict = {}
    for unit, shape, _ in shape_counts(spec):
        units[unit] = units.get(unit, 0) + _numel(shape)
    return units


def _block_sizes(spec: ModelSpec) -> list:
    """Every block's elements, largest first (one entry per block of the model)."""
    units = _units(spec)
    count = {unit: k for unit, _, k in shape_counts(spec) if unit != "root"}
    return sorted((n for u, n in units.items() if u != "root" for _ in range(min(count[u], 2))), reverse=True)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def static_bytes(spec: ModelSpec, mode: str, world: int, rank: int = 0) -> dict:
    """params, grads and optimizer bytes on ``rank`` (exact, see the module docstring)."""
    return dict(_static(spec, mode, world, rank))


@functools.lru_cache(maxsize=64)
def _static(spec: ModelSpec, mode: str, world: int, rank: int) -> tuple:
    return tuple(_static_bytes(spec, mode, world, rank).items())


@functools.lru_cache(maxsize=64)
def _elements(spec: ModelSpec) -> tuple[int, int]:
    """(tensors, elements) of every parameter of ``spec``: the static bytes and the weight cache of an
    unsharded model both read them (once per spec, not once each)."""
    shapes = shape_counts(spec)
    return sum(k for _, _, k in shapes), sum(k * _numel(s) for _, s, k in shapes)


def _static_bytes(spec: ModelSpec, mode: str, world: int, rank: int) -> dict:
    tensors, n = _elements(spec)
    if mode != "fsdp" or world == 1:
        return {"params": 4 * n, "grads": 4 * n, "optimizer": 8 * n + 4 * tensors}
    shapes = shape_counts(spec)
    padded = mine = 0
    for _, s, k in shapes:
        d0, row = (s[0], _numel(s[1:])) if s else (1, 1)
        c = -(-d0 // world)
        padded += k * c * row
        mine += k * max(0, min(c, d0 - rank * c)) * row
    return {"params": 4 * padded, "grads": 4 * padded, "optimizer": 8 * mine + 4 * tensors}


def buffer_bytes(spec: ModelSpec, seq_len: int) -> int:
    sizes = {spec.head_size(i) for i, _ in spec.layer_classes()} if spec.rope else set()
    return sum(2 * seq_len * (hs // 2) * 4 for hs in sizes)


def _saved(spec: ModelSpec, i: int) -> int:
    """Values layer i saves per token for backward.  MoE (an estimate, not yet measured):
    the attention half of a SwiGLU layer (12·w) plus, per routed expert, its gathered input,
    output and weighted output (3·w) and four hidden-width tensors, plus the router's logits
    and probabilities (2·E)."""
    w = spec.widths[i]
    if spec.mlp == "moe":
        return 12 * w + spec.top_k * (3 * w + 4 * spec.mlp_hidden(i)) + 2 * spec.n_experts
    return (SAVED_PER_WIDTH[spec.mlp] + (2 if spec.stabiliser == "normformer" else 0)) * w


def activation_bytes(spec: ModelSpec, tokens: int, precision: str, device: str, ac: bool) -> int:
    """Bytes autograd keeps for backward over ``tokens`` tokens of one micro-batch."""
    return int(tokens * _per_token(spec, precision, device, ac))


@functools.lru_cache(maxsize=64)
def _per_token(spec: ModelSpec, precision: str, device: str, ac: bool) -> int:
    """activation_bytes per token (the memory plan asks it of every micro-batch size it tries)."""
    bf16 = precision == "bf16" and device == "cuda"
    e = 2 if bf16 else 4
    classes = spec.layer_classes()  # one layer of each class, counted n times
    layer = []
    for i, _ in classes:
        w = spec.widths[i]
        b = 2 * _saved(spec, i) + 8 * w if bf16 else 4 * _saved(spec, i)
        if spec.resize == "proj" and spec.input_width(i) != w:  # a learned resize keeps its input
            b += e * spec.input_width(i)
        layer.append(b)
    h, V = spec.embed_width, spec.vocab_size
    head = HEAD_BYTES_BF16 * V + 8 * h if bf16 else 4 * V + 8 * h
    if spec.resize == "proj" and spec.widths[-1] != h:
        head += e * spec.widths[-1]
    if ac:
        keep = (2 if bf16 else 4) * sum(n * spec.widths[i] for i, n in classes)  # each block's input
        return keep + max(layer) + head
    return sum(n * b for b, (_, n) in zip(layer, classes)) + head


def compute_bytes(spec: ModelSpec, mode: str, world: int, precision: str, device: str) -> int:
    if mode != "fsdp" or world == 1:
        n = _elements(spec)[1]
        return 2 * n if precision == "bf16" and device == "cuda" else 0
    e = 2 if precision == "bf16" and device == "cuda" else 4
    in_flight = sum(_block_sizes(spec)[:2]) + _units(spec).get("root", 0)
    return 2 * e * in_flight  # unsharded parameters + their unsharded gradients before reduce-scatter


def _fixed(spec, seq_len, mode, world, precision, device, wsd_branches) -> dict:
    """Everything but the activations (independent of the micro-batch)."""
    b = static_bytes(spec, mode, world)
    b["branch"] = b["params"] + b["optimizer"] if wsd_branches else 0
    b["buffers"] = buffer_bytes(spec, seq_len)
    b["compute"] = compute_bytes(spec, mode, world, precision, device)
    b["reserve"] = CUDA_RESERVE if device == "cuda" else 0
    return b


@functools.lru_cache(maxsize=64)
def _divisors_desc(n: int) -> tuple[int, ...]:
    """Once per batch size: a sweep's runs share a few (a loop of n steps, every run)."""
    return tuple(d for d in range(n, 0, -1) if n % d == 0)


def layout(
    spec: ModelSpec,
    *,
    seq_len: int,
    batch_size: int,
    world: int,
    parallel: str,
    micro_batch,
    ac: str,
    precision: str,
    device: str,
    capacity: int | None,
    wsd_branches: bool,
) -> MemoryPlan:
    """Resolve the ``auto`` settings for ``world`` processes on devices of ``capacity`` bytes."""
    per_rank = batch_size // world
    if world == 1:  # one process: nothing to replicate; FSDP only when asked for (it still shards nothing)
        modes = ["fsdp"] if parallel == "fsdp" else ["single"]
    elif parallel == "single":
        raise bad("train.parallel", parallel, f"auto|ddp|fsdp for a run of {world} processes (single: one process)")
    else:
        modes = ["ddp", "fsdp"] if parallel == "auto" else [parallel]
    acs = [False, True] if ac == "auto" else [ac == "block"]
    if micro_batch is None:
        mbs = [per_rank]
    elif micro_batch == "auto":
        mbs = _divisors_desc(per_rank) if capacity is not None else [per_rank]
    else:
        mbs = [int(micro_batch)]
    best = None
    for mode in modes:
        fixed = _fixed(spec, seq_len, mode, world, precision, device, wsd_branches)
        for use_ac in acs:
            for mb in mbs:
                by = {**fixed, "activations": activation_bytes(spec, mb * seq_len, precision, device, use_ac)}
                p = MemoryPlan(world, mode, mb, per_rank // mb, use_ac, precision, device, capacity, by)
                p.fits = capacity is None or p.total <= capacity
                if p.fits:
                    return p
                if best is None or p.total < best.total:
                    best = p
    best.advice = _advice(best)
    return best


def _advice(p: MemoryPlan) -> str:
    tips = []
    more = "more GPUs (launcher.gpus_per_node up to the node's, then launcher.nodes)"
    tips.append(f"train.parallel=fsdp with {more}" if p.mode != "fsdp" else more)
    if not p.ac:
        tips.append("train.activation_checkpointing=block")
    if p.micro_batch > 1:
        tips.append("train.micro_batch_size=auto (or smaller)")
    return "; ".join(tips)
