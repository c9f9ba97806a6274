"""Training-step speed of VariableWidthGPT on CPU.

1. The uniform VariableWidthGPT against a plain nanoGPT-like transformer of
   the same shape written below (target: tokens/s ratio >= 0.95), for the
   depth_delusion-like and the vwt-like option sets.
2. An ×-shaped model matched in parameters to the uniform one (target:
   step-time ratio <= 1.0).

One step = forward + backward + AdamW step, fp32, 2 threads.  Models are
timed in interleaved rounds (so drift in the machine hits all alike); the
table shows median step times and the median of the per-round ratios.  Prints a table, then one JSON line.

    python benchmarks/bench_model.py [--rounds 9] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from depthwidth.model.accounting import count_params, total_params_for_widths  # noqa: E402
from depthwidth.core.errors import BadInput  # noqa: E402
from depthwidth.model.gpt import VariableWidthGPT  # noqa: E402
from depthwidth.model.spec import ModelSpec  # noqa: E402


# ---- the reference: a plain uniform pre-LN transformer with RoPE -------------


class RefAttention(nn.Module):
    def __init__(self, d, n_head, bias):
        super().__init__()
        self.d, self.n_head = d, n_head
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.out = nn.Linear(d, d, bias=bias)

    def forward(self, x, cos, sin):
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)

        def rot(t):
            a, b = t.chunk(2, dim=-1)
            return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

        y = F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, d))


class RefBlock(nn.Module):
    def __init__(self, d, n_head, norm, mlp, bias):
        super().__init__()
        Norm = nn.LayerNorm if norm == "layernorm" else nn.RMSNorm
        self.ln1, self.ln2 = Norm(d, eps=1e-5), Norm(d, eps=1e-5)
        self.attn = RefAttention(d, n_head, bias)
        self.swiglu = mlp == "swiglu"
        self.up = nn.Linear(d, (8 if self.swiglu else 4) * d, bias=bias)  # swiglu: gate and up fused
        self.down = nn.Linear(4 * d, d, bias=bias)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.ln1(x), cos, sin)
        u = self.up(self.ln2(x))
        if self.swiglu:
            g, u = u.chunk(2, dim=-1)
            u = F.silu(g) * u
        else:
            u = F.gelu(u)
        return x + self.down(u)


class RefGPT(nn.Module):
    def __init__(self, V, d, L, n_head, norm, mlp, bias, T):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(RefBlock(d, n_head, norm, mlp, bias) for _ in range(L))
        self.ln_f = (nn.LayerNorm if norm == "layernorm" else nn.RMSNorm)(d, eps=1e-5)
        self.head = nn.Linear(d, V, bias=False)
        hs = d // n_head
        ang = torch.outer(torch.arange(T).float(), 10000.0 ** (-torch.arange(0, hs, 2).float() / hs))
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T])
        logits = self.head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---- timing --------------------------------------------------------------------


def step_timer(model, idx, targets):
    # fused, as dw's trainer builds it (train/optim.build_optimizer)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()

    return step


def time_models(
    models: dict, idx, targets, rounds: int, steps: int, warmup: int = 2, clock=time.perf_counter
) -> dict[str, list[float]]:
    """Seconds per step of each model, one entry per round."""
    steppers = {name: step_timer(m, idx, targets) for name, m in models.items()}
    for step in steppers.values():
        for _ in range(warmup):
            step()
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, step in steppers.items():  # interleaved: drift hits every model alike
            t0 = clock()
            for _ in range(steps):
                step()
            times[name].append((clock() - t0) / steps)
    return times


def paired(times: dict, a: str, b: str) -> tuple[float, float, float]:
    """Median step times of a and b, and the median over rounds of a/b: the
    paired ratio cancels load that other processes put on the machine."""
    ratios = [x / y for x, y in zip(times[a], times[b])]
    return statistics.median(times[a]), statistics.median(times[b]), statistics.median(ratios)


def x_widths(h: int, L: int, template: ModelSpec) -> tuple[list[int], str]:
    """×-shape widths matched in true parameter count to the uniform model."""
    try:
        from depthwidth.model.shapes import schedule

        count = lambda ws: total_params_for_widths(ws, template)  # noqa: E731
        return schedule("x", h, L, quantum=32, match="exact", count=count), "shapes.schedule(match=exact)"
    except (ImportError, BadInput):
        # Hand-picked for h = 256, L = 6: Σ w_i² = 391168 ≈ L·h² = 393216, multiples of 32.
        return [384, 224, 128, 64, 160, 384], "hand-picked"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=2, help="steps per timed round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: process CPU time, steadier on a shared machine (use with --threads 1)",
    )
    args = ap.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, B, T = 4096, 8, 128
    idx = torch.randint(0, V, (B, T))
    targets = torch.roll(idx, -1, dims=1)
    rows, out = (
        [],
        {"device": "cpu", "threads": args.threads, "clock": args.clock, "batch": B, "seq_len": T, "vocab": V},
    )

    # 1. uniform VariableWidthGPT vs the plain reference, both option sets.
    presets = {
        "depth_delusion": dict(L=4, d=256, norm="layernorm", mlp="gelu", head_dim=64, n_head=None, bias=True),
        "vwt": dict(L=4, d=256, norm="rmsnorm", mlp="swiglu", head_dim=None, n_head=16, bias=False),
    }
    for name, c in presets.items():
        spec = ModelSpec(
            widths=(c["d"],) * c["L"],
            vocab_size=V,
            embed_width=c["d"],
            norm=c["norm"],
            mlp=c["mlp"],
            head_dim=c["head_dim"],
            n_head=c["n_head"],
            bias=c["bias"],
        )
        model = VariableWidthGPT(spec, T)
        ref = RefGPT(V, c["d"], c["L"], spec.heads(0), c["norm"], c["mlp"], c["bias"], T)
        assert model.num_params() == sum(p.numel() for p in ref.parameters())
        times = time_models({"ref": ref, "dw": model}, idx, targets, args.rounds, args.steps, clock=clock)
        t_ref, t_dw, ratio = paired(times, "ref", "dw")  # tokens/s of dw over tokens/s of the reference
        rows.append((f"uniform {name} {c['L']}x{c['d']}", "dw / plain tok/s", t_dw, t_ref, ratio, ">= 0.95"))
        out[f"uniform_{name}"] = {"dw_step_s": t_dw, "ref_step_s": t_ref, "tokens_per_s_ratio": ratio}

    # 2. × vs uniform at matched parameters (vwt-like options, carry-forward).
    h, L = 256, 6
    uni = ModelSpec(
        widths=(h,) * L,
        vocab_size=V,
        embed_width=h,
        norm="rmsnorm",
        mlp="swiglu",
        n_head=16,
        head_dim=None,
        width_scaled_init=True,
    )
    widths, source = x_widths(h, L, uni)
    xs = replace(uni, widths=tuple(widths))
    p_uni, p_x = count_params(uni)["total"], count_params(xs)["total"]
    times = time_models(
        {"uniform": VariableWidthGPT(uni, T), "x": VariableWidthGPT(xs, T)},
        idx,
        targets,
        args.rounds,
        args.steps,
        clock=clock,
    )
    t_x, t_uni, ratio = paired(times, "x", "uniform")
    rows.append((f"x vs uniform {L}x{h}", "x / uniform step time", t_x, t_uni, ratio, "<= 1.0"))
    out["x_vs_uniform"] = {
        "widths": widths,
        "widths_source": source,
        "params_x": p_x,
        "params_uniform": p_uni,
        "x_step_s": t_x,
        "uniform_step_s": t_uni,
        "step_time_ratio": ratio,
    }

    print(f"{'case':32} {'ratio of':24} {'step s':>8} {'vs s':>8} {'ratio':>7}  target")
    for case, what, a, b, r, target in rows:
        print(f"{case:32} {what:24} {a:8.4f} {b:8.4f} {r:7.3f}  {target}")
    print(f"x widths {widths} ({source}); params x/uniform = {p_x / p_uni:.4f}")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
