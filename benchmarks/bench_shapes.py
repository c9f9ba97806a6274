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

    python benchmarks/bench_shapes.py [--rounds 8] [--compile] [--sizes 8x512,12x1024]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import paired, step_timer  # noqa: E402

from depthwidth.model.figures import figures  # noqa: E402
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
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
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
        rows, uni_times = {}, []
        for f in args.families.split(","):  # one shape at a time beside the uniform model: 12 x 1024 fits in memory
            spec = spec_of(L, h, f, V)
            models = {}
            for name, s_ in (("uniform", uni_spec), (f, spec)):
                torch.manual_seed(0)
                m = VariableWidthGPT(s_, T)
                if args.compile:
                    compile_blocks(m)
                models[name] = m
            if not args.no_whole:
                models[f + "/whole"] = Whole(models[f])
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
            uni_times += times["uniform"]
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
        out["sizes"][size] = {"uniform_step_s": statistics.median(uni_times), "shapes": rows}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
