"""Step time of the shaped models against the uniform one they match, on CPU (issue: a ×
model costs what its FLOPs cost).

For each size (8 × 512, 8 × 768, 12 × 1024 as measured in the issue, and the 200M VWT
recipe's 16 × 640 at short context) the uniform model and its ×, <, >, ◇ shapes matched
exactly in parameters (vwt options: RMSNorm, SwiGLU, 16 heads, widths rounded to 32) train
one step = forward + backward + AdamW, fp32, batch 8 × 128 tokens, interleaved rounds.
Each shaped model runs in two stream layouts: ``segments`` (model/gpt.py ``Stream``, today)
and ``whole`` (the R-wide concatenation of before, tests/test_stream_layout.py's
reference).  The table: median step time over ≥ 8 rounds, the median per-round ratio to
the uniform model, and the training-FLOP ratio beside it.  Target: every shaped model's
ratio ≤ its FLOP ratio + 0.02, compiled (``--compile``: per block, as train/parallel.py).

On this 2-core machine one process's ratio moves by about ±2% from one process to the
next (how glibc happens to place and return the big tensors: a tensor over its mmap
threshold is unmapped at free and page-faulted in again next step), more than rounds
inside a process cancel.  ``--repeats N`` therefore runs every size in N fresh processes
and reports per family the median of their ratios with the range.  Like ``dw train`` on
the CPU, each process keeps freed host memory (train/hostmem.py; ``--default-malloc``:
glibc's own thresholds, under which a tensor over 32 MiB is faulted in every step).

    python benchmarks/bench_shapes.py [--rounds 8] [--compile] [--sizes 8x512,12x1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import paired, step_timer  # noqa: E402

from depthwidth.model.figures import figures  # noqa: E402
from depthwidth.train.hostmem import hold_freed_memory  # noqa: E402
from depthwidth.train.parallel import compile_blocks  # noqa: E402
from depthwidth.model.gpt import VariableWidthGPT  # noqa: E402
from depthwidth.model.resolve import from_config  # noqa: E402
from tests.test_stream_layout import reference_forward  # noqa: E402

SIZES = {"8x512": (8, 512), "8x768": (8, 768), "12x1024": (12, 1024), "16x640 (200m)": (16, 640)}
FAMILIES = ("x", "increasing", "decreasing", "diamond")
SYMBOL = {"uniform": "uniform", "x": "×", "increasing": "<", "decreasing": ">", "diamond": "◇"}


def spec_of(depth: int, width: int, shape: str, vocab: int):
    return from_config(
        {
            "preset": "bench",
            "depth": depth,
            "width": width,
            "shape": shape,
            "quantum": 32,
            "match": "exact",
            "norm": "rmsnorm",
            "mlp": "swiglu",
            "heads": 16,
            "head_dim": None,
            "width_scaled_init": True,
            "vocab_size": vocab,
        }
    )


class Whole(torch.nn.Module):
    """The same model run in the whole-stream layout (the concatenation of before)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        return reference_forward(self.model, idx, targets)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="torch.compile each block (train.compile's way)")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--no-whole", action="store_true", help="skip the whole-stream layout (before)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated: " + ", ".join(FAMILIES))
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per size (median)")
    ap.add_argument(
        "--default-malloc", action="store_true", help="leave glibc's thresholds as they are (dw train raises them)"
    )
    args = ap.parse_args(argv)
    if args.repeats > 1:
        return repeated(args)
    torch.set_num_threads(args.threads)
    if not args.default_malloc:
        hold_freed_memory()  # as dw train does on the CPU (train/hostmem.py)
    V, B, T = 4096, 8, 128
    torch.manual_seed(0)
    idx = torch.randint(0, V, (B, T))
    targets = torch.roll(idx, -1, dims=1)
    out = {
        "threads": args.threads,
        "compile": args.compile,
        "batch": B,
        "seq_len": T,
        "rounds": args.rounds,
        "sizes": {},
    }
    print(
        f"{'size':14} {'shape':8} {'params/uni':>10} {'FLOPs/uni':>9} {'segments/uni':>12} {'whole/uni':>9}"
        f"  {'target':>7}  ok"
    )
    for size in args.sizes.split(","):
        L, h = SIZES[size]
        uni_spec = spec_of(L, h, "uniform", V)
        fu = figures(uni_spec, T)
        families = args.families.split(",")
        specs = {f: spec_of(L, h, f, V) for f in families}
        models = {}
        for name, s_ in (("uniform", uni_spec), *specs.items()):  # every model of the size, interleaved
            torch.manual_seed(0)
            m = VariableWidthGPT(s_, T)
            if args.compile:
                compile_blocks(m)
            models[name] = m
            if name != "uniform" and not args.no_whole:
                models[name + "/whole"] = Whole(m)
        steps = {name: step_timer(m, idx, targets) for name, m in models.items()}
        for st in steps.values():  # warm-up (and compilation)
            st(), st()
        times = {name: [] for name in steps}
        for _ in range(args.rounds):
            for name, st in steps.items():  # interleaved: drift hits every model alike
                t0 = time.perf_counter()
                st()
                times[name].append(time.perf_counter() - t0)
        del models, steps
        rows = {}
        for f, spec in specs.items():
            fig = figures(spec, T)
            flop = fig["flops_per_token"] / fu["flops_per_token"]
            seg = paired(times, f, "uniform")[2]
            whole = None if args.no_whole else paired(times, f + "/whole", "uniform")[2]
            ok = seg <= flop + 0.02
            rows[f] = {
                "widths": list(spec.widths),
                "params_ratio": fig["params"] / fu["params"],
                "flop_ratio": flop,
                "step_ratio": seg,
                "step_ratio_whole": whole,
                "step_s": statistics.median(times[f]),
                "ok": ok,
            }
            print(
                f"{size:14} {SYMBOL[f]:8} {rows[f]['params_ratio']:10.3f} {flop:9.3f} {seg:12.3f} "
                f"{'' if whole is None else f'{whole:9.3f}'}  {flop + 0.02:7.3f}  {'yes' if ok else 'NO'}",
                flush=True,
            )
        uni_times = times["uniform"]
        out["sizes"][size] = {"uniform_step_s": statistics.median(uni_times), "shapes": rows}
    print(json.dumps(out))
    return out


def repeated(args) -> dict:
    """Every size in args.repeats fresh processes; per family the median ratio and its range."""
    child = ["--rounds", str(args.rounds), "--threads", str(args.threads), "--families", args.families]
    child += [f for f, on in (("--compile", args.compile), ("--no-whole", args.no_whole)) if on]
    child += ["--default-malloc"] if args.default_malloc else []
    out = {
        "compile": args.compile,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "default_malloc": args.default_malloc,
    }
    out["sizes"] = {}
    print(
        f"{'size':14} {'shape':8} {'FLOPs/uni':>9} {'median/uni':>10} {'range':>13} {'whole/uni':>9}  {'target':>7}  ok"
    )
    for size in args.sizes.split(","):
        rows, reps = {}, []
        for _ in range(args.repeats):
            cmd = [sys.executable, __file__, *child, "--sizes", size]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            reps.append(json.loads(res.stdout.strip().splitlines()[-1])["sizes"][size])
        for f in args.families.split(","):
            runs = [r["shapes"][f] for r in reps]
            ratios = [r["step_ratio"] for r in runs]
            wholes = [r["step_ratio_whole"] for r in runs if r["step_ratio_whole"] is not None]
            row = dict(runs[0], step_ratio=statistics.median(ratios), step_ratios=ratios)
            row["step_ratio_whole"] = statistics.median(wholes) if wholes else None
            row["ok"] = row["step_ratio"] <= row["flop_ratio"] + 0.02
            rows[f] = row
            w = row["step_ratio_whole"]
            print(
                f"{size:14} {SYMBOL[f]:8} {row['flop_ratio']:9.3f} {row['step_ratio']:10.3f} "
                f"{min(ratios):6.3f}–{max(ratios):6.3f} {'' if w is None else f'{w:9.3f}'}  "
                f"{row['flop_ratio'] + 0.02:7.3f}  {'yes' if row['ok'] else 'NO'}",
                flush=True,
            )
        out["sizes"][size] = {"shapes": rows}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
