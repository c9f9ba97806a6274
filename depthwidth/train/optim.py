"""AdamW, learning-rate schedules and the token-budget plan of one run.

Schedules (``optim.schedule``):
  constant  linear warm-up, then the peak lr;
  cosine    warm-up, then cosine decay to ``min_lr_ratio``·peak at the last step;
  wsd       warm-up-stable-decay: warm-up, the peak lr, then a linear decay to
            ``min_lr_ratio``·peak over the last ``decay_fraction`` of the run;
  power     the Power scheduler (Shen et al. 2024, "Power Scheduler: a batch size
            and token number agnostic learning rate scheduler"), as lm-engine's
            ``PowerScheduler`` computes it for the VWT configs:
                lr(n) = min(lr_peak, a · n^b),   n = tokens seen,
            b = ``power_exponent`` (−0.566 in every VWT config) and
            a = ``power_a`` (``auto``: tokens per step / 1024, which is what all
            five VWT configs set: a = 512, 1024, 2048, 4096 at 0.5M/1M/2M/4M
            tokens per step).  Warm-up (``warmup``, 0.08 in the configs) rises
            linearly to the value the power law has where warm-up ends, so the
            curve is continuous.  For 0-based step s with c tokens per step and
            W warm-up steps: s < W: lr = (s+1)/W · min(lr_peak, a·(W·c)^b);
            else lr = min(lr_peak, a·((s+1)·c)^b).  (lm-engine indexes its steps
            from 1 at the same points, dw's warm-up convention.)  No final decay:
            as in the configs, the run ends on the power law.

Token budgets (``train.budgets``): every budget is a point (tokens, held-out
loss) for the data term of a scaling law.  With ``wsd`` each budget b < total
gets its own decay *branch*: at step (1 − f)·S_b (``fork_step``) the model,
optimiser and data stream are copied, the copy decays to S_b steps and is
evaluated, and the main run continues in its stable phase — one run, several
properly decayed points.  A warm-up given as a fraction resolves against the
whole run (the trunk's S steps), for every branch too, so each branch shares
the trunk's schedule up to its fork and never retrains it: a branch equals the
run trained to its budget alone with the trunk's warm-up in steps
(``optim.warmup=round(warmup·S)``).
With the other schedules a budget is evaluated as the main run passes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from depthwidth.core.errors import bad, number


def warmup_steps(o: Any, total: int) -> int:
    w = float(o.warmup)
    return int(w) if w >= 1 else int(round(w * total))


def power_a(o: Any, tokens_per_step: int) -> float:
    a = o.power_a
    return tokens_per_step / 1024 if a == "auto" else float(a)


def power_lr(tokens: float, o: Any, tokens_per_step: int) -> float:
    """min(lr_peak, a · tokens^b): the power schedule after warm-up."""
    return min(float(o.lr), power_a(o, tokens_per_step) * float(tokens) ** float(o.power_exponent))


def lr_at(step: int, total: int, o: Any, tokens_per_step: int | None = None, run_steps: int | None = None) -> float:
    """Learning rate for 0-based ``step`` of a run of ``total`` steps (``power`` needs
    ``tokens_per_step``: it decays in tokens seen, not in steps).  ``run_steps``: the whole run's
    steps when ``total`` is a decay branch's (a fractional warm-up resolves against the whole run;
    default ``total``)."""
    peak, floor = float(o.lr), float(o.lr) * float(o.min_lr_ratio)
    w = warmup_steps(o, total if run_steps is None else run_steps)
    if o.schedule == "power":
        if tokens_per_step is None:
            raise ValueError("lr_at: the power schedule needs tokens_per_step")
        if step < w:
            return (step + 1) / w * power_lr(w * tokens_per_step, o, tokens_per_step)
        return power_lr((step + 1) * tokens_per_step, o, tokens_per_step)
    if step < w:
        return peak * (step + 1) / w
    if o.schedule == "constant":
        return peak
    if o.schedule == "cosine":
        span = max(1, total - w)
        t = min(1.0, (step - w) / span)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * t))
    # wsd
    start = decay_start(total, o)
    if step < start:
        return peak
    t = (step - start + 1) / max(1, total - start)
    return peak + (floor - peak) * min(1.0, t)


def decay_start(total: int, o: Any) -> int:
    return int(math.floor((1.0 - float(o.decay_fraction)) * total))


def fork_step(steps: int, o: Any) -> int:
    """Where the decay branch of a budget of ``steps`` leaves a wsd run: where the budget's decay
    starts.  The branch's warm-up is the trunk's (a fraction resolves against the whole run:
    ``lr_at``'s ``run_steps``), so the two schedules agree on every step before the
    decay and the branch trains only its decay, ``steps − fork_step`` steps, never the trunk again."""
    return decay_start(steps, o)


@dataclass(frozen=True)
class Budget:
    tokens: int  # tokens at the end of the budget
    steps: int  # S_b: optimizer steps of a run with this budget
    branch_at: int | None  # wsd: main-run step at which the decay branch forks


def plan_budgets(budgets_tokens, total_steps: int, tokens_per_step: int, o: Any) -> list[Budget]:
    """Budgets sorted, deduplicated, the full run last; validated against the run."""
    out = {}
    if isinstance(budgets_tokens, (str, int, float)):
        raise bad("train.budgets", budgets_tokens, "a list of token counts, e.g. [1e6,4e6]")
    for b in budgets_tokens or []:
        s = int(round(number("train.budgets", b, "a list of token counts, e.g. [1e6,4e6]") / tokens_per_step))
        if s < 1 or s > total_steps:
            raise bad("train.budgets", b, f"token counts between {tokens_per_step} and {total_steps * tokens_per_step}")
        if s < total_steps:
            out[s] = Budget(s * tokens_per_step, s, fork_step(s, o) if o.schedule == "wsd" else None)
    out[total_steps] = Budget(total_steps * tokens_per_step, total_steps, None)
    return [out[k] for k in sorted(out)]


def planned_steps(steps: int, budgets: list[Budget]) -> int:
    """Optimizer steps of the whole plan: the main run and every WSD decay branch."""
    return steps + sum(b.steps - b.branch_at for b in budgets if b.branch_at is not None)


def trained_steps(step: int, recorded: set, budgets: list[Budget]) -> int:
    """Optimizer steps taken by a run at main-run step ``step`` whose budgets ``recorded`` (their
    steps) are evaluated: the main run's and those decay branches' (successive halving's saving is
    ``planned_steps`` minus this)."""
    return step + sum(b.steps - b.branch_at for b in budgets if b.branch_at is not None and b.steps in recorded)


def plan_steps(t: Any) -> tuple[int, int]:
    """(optimizer steps, tokens per step) of a ``train`` group that passed the schema."""
    per_step = t.batch_size * t.seq_len
    if t.tokens is not None:
        if not number("train.tokens", t.tokens, "a token count") >= per_step:
            raise bad("train.tokens", t.tokens, f"a token count >= one step ({per_step})")
        return math.ceil(float(t.tokens) / per_step), per_step
    return t.steps, per_step


def build_optimizer(model, o: Any):
    """AdamW; weight decay on matrices only (norm gains and biases are not decayed).

    With µP (``model.mup``) the hidden matrices (``model.hidden_matrices()``: q/k/v/o,
    MLP, MoE router and expert matrices, resize projections) form a third group that
    trains at lr / m_width, as lm-engine's ``params_group_method: mup`` does; embedding,
    LM head, norms and biases train at lr.  ``lr_scale`` in each group carries the
    factor through every ``set_lr``.

    The fused kernel (one pass over each parameter, CPU and CUDA) wherever the parameters
    are plain tensors: torch's CPU default otherwise builds two parameter-sized temporaries
    per matrix every step (sqrt(v), then its quotient), and glibc hands a tensor over its
    mmap threshold (32 MB at most) back at free, so a wide layer's matrices were
    page-faulted in again every step (the 12 × 1024 × model's AdamW step: 0.56 s, fused
    0.07 s; the uniform model's 0.35 s, fused 0.13 s).  FSDP's sharded (DTensor)
    parameters keep torch's default."""
    import torch
    from torch.distributed.tensor import DTensor

    spec = model.spec
    hidden = {id(p) for p in model.hidden_matrices()} if spec.mup else set()
    decay, no_decay, mup = [], [], []
    for p in model.parameters():
        if p.requires_grad:
            (mup if id(p) in hidden else decay if p.dim() >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": float(o.weight_decay), "lr_scale": 1.0},
        {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
    ]
    if spec.mup:
        groups.append({"params": mup, "weight_decay": float(o.weight_decay), "lr_scale": 1.0 / spec.m_width})
    params = [p for g in groups for p in g["params"]]
    fused = all(not isinstance(p, DTensor) and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(groups, lr=float(o.lr), betas=tuple(o.betas), eps=float(o.eps), fused=fused or None)


def set_lr(opt, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr * g.get("lr_scale", 1.0)
