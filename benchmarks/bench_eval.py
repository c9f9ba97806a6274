"""Log-likelihood scoring speed on the CPU: dw's model class against the harness's own ``hf`` model.

``dw eval`` scores a run with ``DwLM`` (evals/harness.py: dw's forward, batched, the targets
gathered from the logits).  The alternative a user has is ``dw export`` and the harness's
``HFLM`` on the folder.  dw's class should not be the slower way to the same numbers
(target: dw's tokens/s over hf's >= 1.0 at each batch size).

One run is trained for a few steps (its quality is irrelevant; the forward must dominate:
a uniform vwt model, width 256, depth 6, seq_len 256, pydoc bytes), exported in fp32 (the
stock LlamaForCausalLM; ``--shape x``: dw's modeling file, trust_remote_code).  Two sets of
multiple-choice requests, as a task makes them, over contexts of about 100 bytes cut from
pydoc's held-out text at evenly spaced offsets (400 requests each by default):

words     each context's true next word and three other items' words: every request is a
          window of its own, so both classes run the same forwards (the target's case)
letters   MMLU's form, "...\\nAnswer:" then " A" .. " D": the four requests of an item share
          their window but for its last id, and HFLM's logits cache (``logits_cache``, on by
          default) scores them from one forward row; DwLM runs each (no target: it shows
          what that cache is worth)

Both classes score the same requests at the same batch size, interleaved repetition by
repetition (which goes first alternates, so drift and load from other processes hit both
alike); the table shows median tokens/s and the median and range of the per-repetition
ratios.  Tokens are the real (unpadded) input ids of all requests' windows, the same count
for both.  The two classes' log-likelihoods are checked to agree (max |dw - hf| is printed).
On a machine other processes load, ``--threads 1 --clock cpu`` gives steadier numbers (two
threads on two busy cores stall each other; process CPU time leaves out the waits).

    python benchmarks/bench_eval.py [--reps 5] [--batch-sizes 8,32] [--requests 400] [--threads 2] [--clock wall]
    python benchmarks/bench_eval.py --shape x --json out.json

Prints a table, then one JSON line (also written to --json PATH).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONTEXT_BYTES = 100  # a request's context: about this many bytes, cut back to a word boundary
CHOICES = 4
PREFIX = ord("\n")  # dw's prefix id for pydoc bytes; the exported byte tokenizer has no BOS/EOS for HFLM to use
MODEL = [
    "model=vwt",
    "model.width=256",
    "model.depth=6",
    "model.heads=4",
    "train.seq_len=256",
    "train.batch_size=2",
    "train.steps=2",
    "train.log_every=1",
    "probe.every=0",
    "probe.entropy_every=0",
    "train.analyze_at_end=false",
]
SHAPES = {"uniform": [], "x": ["model.shape=x"]}


def train_and_export(work: Path, shape: str) -> tuple[Path, Path, str]:
    """(run directory, exported folder, exported class) of a briefly trained run."""
    from depthwidth.config.compose import compose
    from depthwidth.export.hf import export_run
    from depthwidth.train import train

    run = work / "run"
    summary = train(compose([*MODEL, *SHAPES[shape], f"run.dir={run}"]), handle_signals=False, log=lambda m: None)
    assert summary["status"] == "done", summary
    doc = export_run(run, work / "hf", dtype="fp32")
    return run, work / "hf", doc["class"]


def mc_requests(n: int, letters: bool = False) -> list[tuple[str, str]]:
    """``n`` (context, " choice") pairs over n // CHOICES items of pydoc's held-out text.

    ``letters`` False: each context followed by its own next word and CHOICES - 1 other items'
    words, no two of one item's choices equal but for their last byte: every request is its own
    window (HFLM would score such a pair in one forward, see ``letters``), so both classes run
    the same forwards.  ``letters`` True: MMLU's form, the context then "Answer:" and the
    choices " A" .. " D": one window for all of an item's choices (the context and the space,
    each letter its last id), which HFLM's logits cache scores in one forward row."""
    from depthwidth.data.pydoc import pydoc_split

    _, val, _ = pydoc_split(0.1)
    items = n // CHOICES
    step = (len(val) - 2 * CONTEXT_BYTES) // items
    found = []
    for i in range(items):
        ctx = " ".join(val[i * step : i * step + CONTEXT_BYTES].split())  # one line: as a task's template would
        head, _, _ = ctx.rpartition(" ")
        nxt = val[i * step + CONTEXT_BYTES :].split()
        found.append((head or ctx, " " + (nxt[0] if nxt else "end")[:16]))
    out = []
    for i, (ctx, own) in enumerate(found):
        if letters:
            out += [(f"{ctx}\nAnswer:", f" {chr(ord('A') + j)}") for j in range(CHOICES)]
            continue
        choices, k = [own], 1
        while len(choices) < CHOICES:  # other items' words, skipping any that shares a window with a choice
            cand = found[(i + 7 * k) % len(found)][1]
            k += 1
            if all(cand[:-1] != c[:-1] for c in choices):
                choices.append(cand)
        out += [(ctx, c) for c in choices]
    return out


def window_tokens(lm, pairs: list[tuple[str, str]]) -> int:
    """The input ids all requests feed the model: each window (context + continuation, cut to
    the model's context on the left) less its last id."""
    total = 0
    for ctx, cont in pairs:
        c, k = lm._encode_pair(ctx, cont)
        total += len((c + k)[-(lm.max_length + 1) :]) - 1
    return total


def load(run: Path, out: Path, shape: str, batch_size: int):
    from lm_eval.models.huggingface import HFLM

    from depthwidth.evals.harness import DwLM

    dw = DwLM(run, batch_size=batch_size)
    hf = HFLM(
        pretrained=str(out),
        trust_remote_code=shape != "uniform",
        dtype="float32",
        device="cpu",
        batch_size=batch_size,
        prefix_token_id=PREFIX,
    )
    return {"dw": dw, "hf": hf}


def time_once(lm, reqs, clock=time.perf_counter) -> tuple[float, list]:
    t0 = clock()
    got = lm.loglikelihood(reqs, disable_tqdm=True)
    return clock() - t0, got


def bench_batch_size(lms: dict, reqs, tokens: int, reps: int, clock=time.perf_counter) -> dict:
    """Seconds per pass of each class over all requests, interleaved; the paired ratio of tokens/s."""
    first = {name: time_once(lm, reqs)[1] for name, lm in lms.items()}  # warm-up, and the agreement check
    diff = max(abs(a - b) for (a, _), (b, _) in zip(first["dw"], first["hf"]))
    greedy_same = [g for _, g in first["dw"]] == [g for _, g in first["hf"]]
    secs = {name: [] for name in lms}
    for rep in range(reps):
        order = ["dw", "hf"] if rep % 2 == 0 else ["hf", "dw"]  # alternate: neither always runs on a warmer machine
        for name in order:
            secs[name].append(time_once(lms[name], reqs, clock)[0])
    ratios = [h / d for d, h in zip(secs["dw"], secs["hf"])]  # dw tok/s over hf tok/s = hf time over dw time
    return {
        "dw_tokens_per_s": tokens / statistics.median(secs["dw"]),
        "hf_tokens_per_s": tokens / statistics.median(secs["hf"]),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "dw_s": secs["dw"],
        "hf_s": secs["hf"],
        "max_abs_ll_diff": diff,
        "greedy_identical": greedy_same,
    }


def quiet() -> None:
    """The harness's and transformers' per-call notices would bury the table."""
    import transformers

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    transformers.logging.set_verbosity_error()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per class and batch size (median)")
    ap.add_argument("--batch-sizes", default="8,32")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="uniform")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: process CPU time, steadier on a shared machine (use with --threads 1)",
    )
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args(argv)
    if args.reps < 5:
        ap.error("--reps: at least 5 (a median of fewer is noise on a shared machine)")
    import torch
    from lm_eval.api.instance import Instance

    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    quiet()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    sets = {"words": False, "letters": True}  # request set -> mc_requests(letters=); "words" carries the target
    out = {
        "device": "cpu",
        "threads": args.threads,
        "clock": args.clock,
        "shape": args.shape,
        "reps": args.reps,
        "results": {},
    }
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_eval-") as work:
        run, folder, cls = train_and_export(Path(work), args.shape)
        for b in sizes:
            lms = load(run, folder, args.shape, b)
            for kind, letters in sets.items():
                pairs = mc_requests(args.requests, letters)
                reqs = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)]
                tokens = window_tokens(lms["dw"], pairs)
                assert tokens == window_tokens(lms["hf"], pairs), "the two classes tokenize differently"
                r = {"requests": len(pairs), "tokens": tokens, **bench_batch_size(lms, reqs, tokens, args.reps, clock)}
                out["results"][f"{kind}_b{b}"] = r
                rows.append((kind, b, r))
    out.update({"class": cls, "model": MODEL + SHAPES[args.shape], "target": "words: dw/hf >= 1.0"})
    out["min_ratio_words"] = min(r["ratio"] for kind, _, r in rows if kind == "words")
    print(
        f"{cls} ({args.shape}), {args.threads} threads, {args.clock} clock, "
        f"median of {args.reps} interleaved repetitions"
    )
    head = f"{'requests':8} {'batch':>5} {'tokens':>7} {'dw tok/s':>9} {'hf tok/s':>9} {'dw/hf':>6} {'range':>11}"
    print(f"{head} {'max|dll|':>9}  target")
    for kind, b, r in rows:
        span = f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}"
        print(
            f"{kind:8} {b:5d} {r['tokens']:7d} {r['dw_tokens_per_s']:9.0f} {r['hf_tokens_per_s']:9.0f} "
            f"{r['ratio']:6.2f} {span:>11} {r['max_abs_ll_diff']:9.1e}  {'>= 1.0' if kind == 'words' else '-'}"
        )
    line = json.dumps(out)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return out


if __name__ == "__main__":
    main()
