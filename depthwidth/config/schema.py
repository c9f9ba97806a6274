"""Every setting of a run, in one place: its type, default, allowed values and doc.

Each config group is a dataclass below; each field is ``setting(default, doc, ...)``:
its annotation is the type (``Literal[...]`` for a choice), ``default`` the one
default dw has, ``doc`` the line ``dw config show`` prints.  Nothing else in dw
states a default for these settings:

- ``conf/`` presets name their base and hold only what differs from it
  (``conf/model/vwt_1b.yaml`` is ``vwt_500m`` plus its depth and width); the
  bottom of every chain is the schema's defaults, named
  ``GROUP/_base`` (or ``GROUP/_NAME`` for a group with variants, such as
  ``launcher/_slurm``) and ``_base`` for the root (train, probe, run)
  by ``base_nodes()``, which ``config/compose.py`` composes (and the tests
  register in Hydra's ConfigStore, whose compose is the composer's oracle).
- code that is handed part of a group (a test's ``{"name": "synthetic"}``)
  fills the rest with ``complete(group, node)``, never with a literal.

Groups with variants (``launcher``, ``tracker``, ``data``) choose their
dataclass by their ``name`` key.  Validation lives in ``config/check.py``.
No Hydra, OmegaConf or torch here.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional

from depthwidth.core.devices import GPU_MEMORY_GIB
from depthwidth.core.errors import bad

Time = typing.NewType("Time", str)  # SLURM time: minutes (int) or [D-]HH:MM:SS
IntOrAuto = typing.NewType("IntOrAuto", str)  # an integer >= 1, or "auto"
NumberOrAuto = typing.NewType("NumberOrAuto", str)  # a finite number in the field's range, or "auto"
Interpolation = typing.NewType("Interpolation", str)  # an integer, or ${group.key} naming one


@dataclass(frozen=True)
class Range:
    """What one setting allows beyond its type, and what it is for."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    allowed: str | None = None  # the message's "allowed:" text, when the generated one would be unclear
    pattern: str | None = None  # a string must match it whole (re.fullmatch)
    doc: str = ""


def setting(default, doc: str, *, ge=None, gt=None, le=None, lt=None, allowed=None, pattern=None):
    """A field with its one default and its doc (``dw config show``); lists and dicts are copied."""
    meta = {"range": Range(ge, gt, le, lt, allowed, pattern, doc)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


# W&B refuses these characters in project and entity names, and names over 128 characters
WANDB_NAME = r"[^/\\#?%:]{1,128}"
WANDB_NAME_ALLOWED = "1-128 characters, none of / \\ # ? % :"
WANDB_ENTITY = r"[^/\\#?%:\s]{1,128}"  # a user or team name: no spaces either
WANDB_ENTITY_ALLOWED = "1-128 characters, no spaces, none of / \\ # ? % :"


_GPU_MEMORY_DOC = "GiB per GPU for the memory plan (dw sweep --dry-run refuses runs that do not fit)"
_GPU_MEMORY_ALLOWED = "GiB per GPU for the memory plan, a number > 0"
_PYTHON_DOC = "interpreter for the runs; null: the one running dw"
_PACK_DOC = "runs per task, trained one after another"

# ---------------------------------------------------------------------------
# the root: train, probe, run
# ---------------------------------------------------------------------------


@dataclass
class Train:
    """How long and how a run trains."""

    steps: int = setting(200, "optimizer steps (ignored when train.tokens is set)", ge=1)
    tokens: Optional[float] = setting(
        None,
        "total training tokens; steps = ceil(tokens / (batch_size * seq_len))",
        gt=0,
        allowed="a token count or null",
    )
    batch_size: int = setting(16, "sequences per optimiser step (the global batch, over all processes)", ge=1)
    micro_batch_size: Optional[IntOrAuto] = setting(
        None,
        "sequences per process per forward/backward: null (the whole per-process batch) | auto (the largest "
        "that fits, train/memory.py) | N",
        allowed="sequences per process per micro-batch: an integer >= 1, auto (the largest that fits) or null "
        "(no accumulation)",
    )
    parallel: Literal["auto", "single", "ddp", "fsdp"] = setting(
        "auto", "auto: single on one process, DDP if it fits, else FSDP2"
    )
    activation_checkpointing: Literal["none", "block", "auto"] = setting(
        "none", "block: recompute each block in backward | auto: block when needed to fit"
    )
    seq_len: int = setting(128, "tokens per sequence", ge=1)
    log_every: int = setting(10, "steps between metrics.jsonl lines", ge=1)
    eval_every: int = setting(0, "steps between held-out evaluations (0: only at token budgets / end)", ge=0)
    eval_batches: int = setting(8, "held-out batches per evaluation", ge=1)
    ckpt_every: int = setting(100, "steps between checkpoints", ge=0)
    keep_ckpts: int = setting(2, "newest checkpoints kept (older ones deleted)", ge=0)
    budgets: list[float] = setting(
        [],
        "token budgets evaluated on the way (WSD: a decay branch each)",
        gt=0,
        allowed="a list of token counts, e.g. [1e6,4e6]",
    )
    compile: bool = setting(False, "torch.compile the model (CUDA)")
    device: Literal["auto", "cpu", "cuda"] = setting("auto", "where it runs (not part of the run id)")
    precision: Literal["auto", "fp32", "bf16"] = setting(
        "auto", "auto: bf16 on CUDA, fp32 elsewhere; part of the run id"
    )
    threads: int = setting(0, "CPU threads (0: torch default)", ge=0)
    analyze_at_end: bool = setting(
        False, "write analysis.json (dw analyze: entropy, MLP density, logit lens) when the run is done"
    )
    eval_tasks: list[str] = setting(
        [],
        "lm-eval tasks scored on the final checkpoint when the run is done (dw eval: eval.json); a failure "
        "is a warning in the run's log",
        pattern=r"[\w.\-]+",
        allowed="a list of lm-eval task names, e.g. [lambada_openai,hellaswag]",
    )


@dataclass
class Probe:
    """What is measured inside the model while it trains."""

    every: int = setting(
        100, "steps between per-layer gradient-norm probes (0: off)", ge=0, allowed="an integer >= 0 (0: off)"
    )
    at: list[int] = setting(
        [1000],
        "extra probe steps (the Depth-Delusion paper measures around step 1000)",
        ge=1,
        allowed="a list of steps >= 1",
    )
    entropy_every: int = setting(
        0,
        "steps between residual-stream entropy profiles on a fixed 512-token batch (0: off)",
        ge=0,
        allowed="an integer >= 0 (0: off)",
    )


@dataclass
class Run:
    """Where a run lives and its seed."""

    dir: Optional[str] = setting(None, "run directory; null: runs/adhoc/<run_id>")
    seed: int = setting(42, "the one source of randomness (model init, data order)")
    sweep: Optional[str] = setting(None, "set by dw sweep")


# ---------------------------------------------------------------------------
# model (conf/model/*.yaml; model/resolve.py turns it into a ModelSpec)
# ---------------------------------------------------------------------------


# Bounds of the model's integer settings, checked by model/resolve.py before anything loops over them
# (a width of 1e11 once spun for minutes in the head-count search).  Far beyond any model trained: the
# widest published dense models have h ~ 25,600, the deepest ~ 1,000 layers, vocabularies ~ 256k tokens.
MAX_WIDTH = 1 << 20  # 1,048,576: width, per-layer widths, quantum, heads, head_dim, expert_hidden
MAX_DEPTH = 10_000
MAX_VOCAB = 1 << 24  # 16,777,216
MAX_EXPERTS = 4096
# and of the machine a run or a local sweep uses: train.threads (train/plan.check) and launcher.workers
# (launch/config.py; the dry run lists every worker: 1e11 of them had spun for minutes, and
# train.threads=1e11 was an OverflowError traceback at set-up).  The largest machines have ~1,000 cores.
MAX_CPUS = 4096


@dataclass
class Model:
    """The transformer: depth, widths and their shape, and the architecture options."""

    preset: str = setting("base", "the preset's name (a label: not read by the model)")
    depth: int = setting(16, "L (n_layer)", ge=1)
    width: int = setting(512, "h: the uniform width, also the embedding / LM-head width", ge=1)
    shape: Literal["uniform", "increasing", "decreasing", "diamond", "x"] = setting(
        "uniform", "the width-shape family (model/shapes.py)"
    )
    ratio: float = setting(0.3, "narrowest width / h, for non-uniform shapes", gt=0)
    turn: Optional[int] = setting(
        None, "turning layer k (1-indexed); null: 0.75·L for x, 0.5·L for diamond", allowed="an integer layer or null"
    )
    symmetric: Optional[bool] = setting(None, "force w_1 = w_L; null: on for x and diamond")
    quantum: int = setting(64, "widths rounded to a multiple of this (= head_dim keeps heads whole)", ge=1)
    match: Literal["exact", "vwt"] = setting(
        "exact",
        "parameter matching: exact (the true count: embeddings, norms, rounding included) | vwt (the VWT "
        "paper's convention)",
    )
    widths: Optional[list[int]] = setting(
        None,
        "explicit per-layer widths (a list of depth ints); overrides shape",
        ge=1,
        allowed="a list of model.depth widths >= 1, or null",
    )
    embed: Literal["h", "first"] = setting("h", "h: embedding/head at width h | first: at the first layer's width")
    norm: Literal["layernorm", "rmsnorm"] = setting("layernorm", "on each layer's active prefix")
    mlp: Literal["gelu", "swiglu", "moe"] = setting(
        "gelu", "gelu: 2 matrices | swiglu: 3 matrices | moe: a mixture of SwiGLU experts (model/moe.py)"
    )
    mlp_ratio: float = setting(4, "MLP hidden width m_i = int(mlp_ratio * w_i)", gt=0)
    heads: Optional[int] = setting(
        None,
        "fixed head count per layer (VWT style) ... (set exactly one of the two)",
        ge=1,
        allowed="an integer >= 1 or null",
    )
    head_dim: Optional[int] = setting(64, "... or fixed head dimension", ge=1, allowed="an integer >= 1 or null")
    rope: bool = setting(True, "rotary position embeddings")
    rope_base: float = setting(10000.0, "RoPE base", gt=0)
    tied: bool = setting(False, "the LM head shares the embedding matrix")
    bias: bool = setting(False, "biases in Linear layers")
    resize: Literal["carry", "zero", "proj"] = setting(
        "carry", "how the stream meets a layer of another width: carry-forward | zero-padding | learned projection"
    )
    stabiliser: Literal["none", "post", "deepnorm", "rezero", "normformer"] = setting(
        "none", "depth stabiliser: none (pre-LN) | post (post-LN) | deepnorm | rezero | normformer"
    )
    init_std: float = setting(0.02, "init std of the weight matrices", gt=0)
    width_scaled_init: bool = setting(False, "layer i init std x sqrt(h / w_i)")
    mup: bool = setting(False, "µP as the VWT configs set it (model/gpt.py says where each multiplier acts)")
    m_width: float = setting(8, "µP: logits / m_width; hidden-matrix init / sqrt(m_width), their lr / m_width", gt=0)
    m_emb: float = setting(12, "µP: embedding output x m_emb", gt=0)
    m_residual: float = setting(0.22, "µP: attention / MLP outputs x m_residual", gt=0)
    attn_scale: Literal["auto", "inv", "inv_sqrt"] = setting(
        "auto", "softmax scale: auto (1/head_dim with µP, 1/sqrt(head_dim) without) | inv | inv_sqrt"
    )
    n_experts: int = setting(22, "mlp=moe: SwiGLU experts per layer (no shared expert)", ge=1)
    top_k: int = setting(3, "mlp=moe: experts per token (softmax over the top-k router logits)", ge=1)
    expert_hidden: int = setting(
        512, "mlp=moe: an expert's hidden width at width h; layer i: round(w_i * expert_hidden / h)", ge=1
    )
    aux_loss_coef: float = setting(
        0.01, "mlp=moe: coefficient of each layer's auxiliary loss (load balance + router_z x z-loss)", ge=0
    )
    router_z: float = setting(0.1, "mlp=moe: router z-loss weight inside it (lm-engine's built-in 0.1)", ge=0)
    vocab_size: Interpolation = setting("${data.vocab_size}", "V: the data's vocabulary (keep the interpolation)")


# ---------------------------------------------------------------------------
# data (conf/data/*.yaml; data/source.py opens it), by name
# ---------------------------------------------------------------------------


@dataclass
class PydocData:
    """The English reference text shipped inside every CPython (pydoc_data.topics)."""

    name: Literal["pydoc"] = setting("pydoc", "the source")
    tokenizer: Literal["byte", "bpe"] = setting(
        "byte", "byte (vocab_size 256) | bpe (trained locally on the train split)"
    )
    vocab_size: int = setting(256, "256 for byte; the BPE size for bpe, e.g. 1024 (257..65536)", ge=1)
    val_fraction: float = setting(0.1, "held-out tail, in (0, 0.5]", gt=0, le=0.5)
    cache_dir: Optional[str] = setting(
        None, "where trained BPE tokenizers are cached; null: $DW_CACHE_DIR or ~/.cache/dw"
    )


@dataclass
class SyntheticData:
    """A seeded order-k Markov chain whose Bayes-optimal loss is known exactly."""

    name: Literal["synthetic"] = setting("synthetic", "the source")
    vocab_size: int = setting(64, "V, symbols (2..65536; V^(order+1) <= 2^24)", ge=2)
    order: int = setting(2, "k, tokens of context the next token depends on (1..8)", ge=1, le=8)
    alpha: float = setting(0.1, "Dirichlet concentration: smaller = sparser transitions, lower entropy", gt=0)
    seed: int = setting(0, "fixes the chain and the validation set (not the training order)")


@dataclass
class MemmapData:
    """Pretokenized .bin shards + meta.json written by ``dw data prepare --out PATH``."""

    name: Literal["memmap"] = setting("memmap", "the source")
    path: str = setting(
        "data/tokens", "the prepared directory (~ and $VARS expanded; relative to the working directory)"
    )
    vocab_size: int = setting(257, "must equal meta.json's vocab_size (byte tokenizer: 257)", ge=1)


# ---------------------------------------------------------------------------
# optim
# ---------------------------------------------------------------------------


@dataclass
class Optim:
    """AdamW and its learning-rate schedule (defaults: the Depth-Delusion paper's lr 3e-4, wd 0.1, clip 1.0)."""

    lr: float = setting(3.0e-4, "peak learning rate", gt=0)
    betas: list[float] = setting(
        [0.9, 0.95], "AdamW betas", ge=0, lt=1, allowed="two numbers in [0, 1), e.g. [0.9,0.95]"
    )
    eps: float = setting(1.0e-8, "AdamW epsilon", gt=0)
    weight_decay: float = setting(0.1, "decoupled weight decay", ge=0)
    grad_clip: float = setting(1.0, "gradient-norm clip", ge=0, allowed="a number >= 0 (0: no clipping)")
    schedule: Literal["constant", "cosine", "wsd", "power"] = setting("cosine", "the learning-rate schedule")
    warmup: float = setting(
        0.02,
        "warm-up as a fraction of steps (or an int number of steps when >= 1)",
        ge=0,
        allowed="a fraction in [0, 1) or a step count >= 1",
    )
    min_lr_ratio: float = setting(0.1, "final lr / peak lr (cosine, wsd)", ge=0, le=1)
    decay_fraction: float = setting(0.2, "wsd: the decay phase's share of each (branch) run", ge=0, le=1)
    power_a: NumberOrAuto = setting(
        "auto",
        "power: lr = min(lr, power_a * tokens^power_exponent); auto = tokens per step / 1024",
        gt=0,
        allowed="a number > 0, or auto (tokens per step / 1024)",
    )
    power_exponent: float = setting(-0.566, "power: the exponent b of the VWT configs", lt=0)


# ---------------------------------------------------------------------------
# launcher, by name
# ---------------------------------------------------------------------------


_RETRIES_DOC = (
    "a failed run is retried this many times, resuming from its checkpoint, unless it fails twice with "
    "the same error (launch/retry.py); diverged runs never"
)
_DELAY_DOC = "seconds before the first automatic retry, doubled for each further one"


@dataclass
class DebugLauncher:
    """In-process, one run after another, with a live display (blocks until the sweep ends)."""

    name: Literal["debug"] = setting("debug", "the launcher")
    pack: int = setting(1, _PACK_DOC, ge=1)
    max_retries: int = setting(2, _RETRIES_DOC, ge=0)
    retry_delay_s: float = setting(0.0, _DELAY_DOC, ge=0)
    gpu_memory: float = setting(GPU_MEMORY_GIB, _GPU_MEMORY_DOC, gt=0, allowed=_GPU_MEMORY_ALLOWED)


@dataclass
class LocalLauncher:
    """Detached worker processes on this machine: one per visible GPU, else ``workers`` CPU workers."""

    name: Literal["local"] = setting("local", "the launcher")
    workers: int = setting(2, "CPU workers (ignored when GPUs are visible and gpus=auto)", ge=1)
    gpus: Literal["auto", "none"] = setting("auto", "auto: one worker per visible GPU | none: CPU workers only")
    gpus_per_run: int = setting(1, "GPUs per run: >1 runs one multi-process (torchrun) run per group of GPUs", ge=1)
    gpu_memory: float = setting(GPU_MEMORY_GIB, _GPU_MEMORY_DOC, gt=0, allowed=_GPU_MEMORY_ALLOWED)
    pack: int = setting(1, _PACK_DOC + "; a worker claims whole tasks", ge=1)
    max_retries: int = setting(2, _RETRIES_DOC, ge=0)
    retry_delay_s: float = setting(60.0, _DELAY_DOC, ge=0)
    python: Optional[str] = setting(None, _PYTHON_DOC, allowed="a path to a Python interpreter or null")


@dataclass
class SlurmLauncher:
    """One SLURM job array per submission, through submitit (``dw sweep`` returns once sbatch answers)."""

    name: Literal["slurm"] = setting("slurm", "the launcher")
    partition: Optional[str] = setting(None, "--partition (null: the cluster's default)")
    account: Optional[str] = setting(None, "--account")
    qos: Optional[str] = setting(None, "--qos")
    constraint: Optional[str] = setting(None, '--constraint, e.g. "h100|a100"')
    nodes: int = setting(1, "--nodes: one array task spans this many nodes (every rank started by srun)", ge=1)
    gpus_per_node: int = setting(0, "--gpus-per-node; >1 runs one srun task per GPU (torch distributed env set)", ge=0)
    tasks_per_node: Optional[int] = setting(
        None, "--ntasks-per-node; null: max(1, gpus_per_node)", ge=1, allowed="an integer >= 1 or null"
    )
    gpu_memory: float = setting(GPU_MEMORY_GIB, _GPU_MEMORY_DOC, gt=0, allowed=_GPU_MEMORY_ALLOWED)
    cpus_per_task: int = setting(1, "--cpus-per-task", ge=1)
    mem: Optional[str] = setting(None, "--mem, e.g. 64G (null: the partition's default)")
    time: Time = setting(
        "01:00:00",
        "--time, [D-]HH:MM:SS or minutes (submitit gets whole minutes)",
        allowed="minutes (int) or [D-]HH:MM:SS",
    )
    array_parallelism: int = setting(64, "at most this many array tasks run at once (--array=...%N)", ge=1)
    max_array_size: Optional[int] = setting(
        None,
        "tasks per job array; null: the cluster's MaxArraySize (scontrol show config); more tasks go in as "
        "several arrays",
        ge=1,
        allowed="an integer >= 1, or null (the cluster's MaxArraySize)",
    )
    max_submit: Optional[int] = setting(
        None,
        "at most this many of your jobs queued (pending + running) at once, every array task counting; "
        "it caps the limits read from sacctmgr (association MaxSubmitJobs, the QOS's MaxSubmitJobsPerUser) "
        "and stands in for them without accounting; null: only those; a larger sweep goes in as waves",
        ge=1,
        allowed="an integer >= 1, or null (the limits sacctmgr shows, if any)",
    )
    pack: int = setting(1, _PACK_DOC, ge=1)
    signal_delay_s: int = setting(
        120, "--signal=USR2@N: SIGUSR2 this long before the time limit: checkpoint + requeue", ge=0
    )
    max_retries: int = setting(2, _RETRIES_DOC, ge=0)
    retry_delay_s: float = setting(60.0, _DELAY_DOC, ge=0)
    mail: Optional[str] = setting(
        None,
        "an address SLURM mails when the follow-up job of --then ends or fails (--mail-type=END,FAIL)",
        allowed="an e-mail address or null",
    )
    job_name: Optional[str] = setting(None, "null: dw-SWEEP")
    setup: list[str] = setting(
        [], 'shell lines run in the batch script before srun (e.g. "module load cuda")', allowed="a list of shell lines"
    )
    additional: dict = setting(
        {},
        'further sbatch options, e.g. {exclude: "node[1-3]", nice: 10} (--requeue is always on)',
        allowed="a mapping of sbatch option -> value",
    )
    python: Optional[str] = setting(
        None,
        "interpreter on the compute nodes; null: the one running dw",
        allowed="a path to a Python interpreter or null",
    )


# ---------------------------------------------------------------------------
# tracker, by name
# ---------------------------------------------------------------------------


@dataclass
class NoTracker:
    """Local files only (metrics.jsonl, probes.jsonl, summary.json in the run directory)."""

    name: Literal["none"] = setting("none", "the tracker")
    seed_in_name: bool = setting(False, "kept so sweeps may set it whatever the tracker (used by wandb)")


@dataclass
class WandbTracker:
    """Mirror each run to Weights & Biases (one W&B run per dw run, across every restart)."""

    name: Literal["wandb"] = setting("wandb", "the tracker")
    project: str = setting(
        "depthwidth",
        "W&B project",
        pattern=WANDB_NAME,
        allowed=f"a W&B project name: {WANDB_NAME_ALLOWED} (the entity goes in tracker.entity)",
    )
    entity: Optional[str] = setting(
        None,
        "W&B entity (user or team); null: the account's default",
        pattern=WANDB_ENTITY,
        allowed=f"a W&B entity: {WANDB_ENTITY_ALLOWED}, or null",
    )
    mode: Literal["auto", "online", "offline"] = setting(
        "auto", "auto: online if an API key / login is configured, else offline"
    )
    init_timeout: float = setting(
        30, "seconds wandb.init may take before dw gives up on W&B for this attempt", gt=0, allowed="seconds > 0"
    )
    finish_timeout: float = setting(
        120,
        "seconds the end of a run may wait for uploads (the rest stays on disk for dw sync)",
        gt=0,
        allowed="seconds > 0",
    )
    seed_in_name: bool = setting(False, "append -s{seed} to the run name (dw sweep sets it when seeds vary)")
    tags: list[str] = setting([], "W&B tags")
    probes: Literal["table", "histogram", "both"] = setting(
        "histogram", "per-layer probe vectors as: histogram (a layer x step heatmap) | table | both"
    )


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------

ROOT: dict[str, Any] = {"train": Train, "probe": Probe, "run": Run}  # conf/config.yaml's own groups
GROUPS: dict[str, Any] = {**ROOT, "optim": Optim, "model": Model}
VARIANTS: dict[str, dict[str, Any]] = {  # groups whose fields depend on their ``name``
    "data": {"pydoc": PydocData, "synthetic": SyntheticData, "memmap": MemmapData},
    "launcher": {"debug": DebugLauncher, "local": LocalLauncher, "slurm": SlurmLauncher},
    "tracker": {"none": NoTracker, "wandb": WandbTracker},
}
ALL_GROUPS = (*GROUPS, *VARIANTS)
LAUNCHERS = tuple(VARIANTS["launcher"])
SOURCES = tuple(VARIANTS["data"])


def schema_of(group: str, node: Mapping | None = None):
    """The dataclass that describes ``group`` (for launcher/tracker/data: of ``node['name']``)."""
    if group in GROUPS:
        return GROUPS[group]
    options = VARIANTS[group]
    name = (node or {}).get("name")
    if name not in options:
        raise bad(group if group == "launcher" else f"{group}.name", name, "|".join(options))
    return options[name]


def defaults(cls) -> dict:
    """A schema class's defaults as a plain dict (a fresh copy; its fields read once, ``field_map``:
    ``dataclasses.fields`` was a third of resolving each of a sweep's 10,000 models)."""
    return {
        name: (f.default_factory() if f.default is dataclasses.MISSING else f.default)
        for name, f in field_map(cls).items()
    }


@functools.lru_cache(maxsize=None)
def hints(cls) -> dict:
    """``typing.get_type_hints(cls)`` of a schema class, resolved once (a sweep of 10,000 runs checks
    every setting of every run: resolving the annotations each time was most of its dry run)."""
    return typing.get_type_hints(cls)


@functools.lru_cache(maxsize=None)
def field_map(cls) -> dict:
    """{name: dataclasses.Field} of a schema class, in order, once."""
    return {f.name: f for f in dataclasses.fields(cls)}


def choices(cls, name: str) -> tuple:
    """The values a ``Literal`` field allows (``choices(Model, "norm")``)."""
    tp = hints(cls)[name]
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else ()


def complete(group: str, node: Mapping) -> dict:
    """``node`` over its group's defaults: what code handed part of a group (a test's
    ``{"name": "synthetic", "order": 1}``) reads, so that no caller restates a default."""
    node = dict(node.items())
    return {**defaults(schema_of(group, node)), **node}


def base_nodes() -> dict[tuple[str | None, str], dict]:
    """The schema's defaults as config nodes, keyed (group, name): the bottom of every
    preset chain in conf/ (``_base`` for a plain group and for the root, ``_NAME`` per variant)."""
    out: dict[tuple[str | None, str], dict] = {(None, "_base"): {g: defaults(c) for g, c in ROOT.items()}}
    for g, cls in GROUPS.items():
        if g not in ROOT:
            out[(g, "_base")] = defaults(cls)
    for g, options in VARIANTS.items():
        for name, cls in options.items():
            out[(g, f"_{name}")] = defaults(cls)
    return out
