#!/usr/bin/env bash
# One prepared device check for a task that is lent a GPU (not run in CI; < 8 minutes):
# bf16 training throughput and MFU of a Depth-Delusion-sized uniform model and
# its ×-shaped counterpart, with and without torch.compile.  Prints the
# summary lines; figures go into the README's "Measured" table.
#
#   bash benchmarks/gpu_check.sh            # from the repository root, venv built
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/dw-gpu-check}
rm -rf "$OUT"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
common=(model=depth_delusion model.depth=12 model.width=768 data=synthetic data.vocab_size=2048 data.order=1
        train.batch_size=32 train.seq_len=1024 train.steps=60 train.log_every=20 train.ckpt_every=0
        probe.every=20 train.device=cuda)
for shape in uniform x; do
  for compile in false true; do
    d="$OUT/$shape-compile-$compile"
    "$PY" -m depthwidth train "${common[@]}" model.shape=$shape train.compile=$compile run.dir="$d" --quiet --json > "$d.json" \
      || { echo "$shape compile=$compile: FAILED"; continue; }
    "$PY" - "$d" "$shape" "$compile" <<'PYEOF'
import json, sys
d, shape, compile_ = sys.argv[1:]
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
last = rows[-1]
print(f"{shape:8s} compile={compile_:5s} tokens/s {last['tokens_per_s']:>12,.0f}  MFU {last['mfu']}  loss {last['loss']:.3f}")
PYEOF
  done
done

# ~1B model (24L x 1792, the paper's 1B shallow-wide) with FSDP2 on one GPU, activation
# checkpointing and 4 micro-batches per step, ~30 steps: measured peak memory beside the
# memory plan's estimate (train/memory.py), and MFU (6N + attention FLOPs per token, dense
# bf16 peak 989e12 FLOP/s for H100/H200; printed by the run below).
d="$OUT/fsdp-1b"
"$PY" -m torch.distributed.run --nproc_per_node=1 --master_port=29577 -m depthwidth train \
  model=depth_delusion model.depth=24 model.width=1792 data=synthetic data.vocab_size=50257 data.order=1 \
  train.batch_size=32 train.micro_batch_size=8 train.seq_len=1024 train.steps=30 train.log_every=10 \
  train.ckpt_every=0 probe.every=0 train.eval_batches=1 train.parallel=fsdp train.activation_checkpointing=block \
  train.device=cuda run.dir="$d" --quiet --json > "$d.json" || echo "fsdp-1b: FAILED"
"$PY" - "$d" <<'PYEOF'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
last, plan = rows[-1], s["plan"]
peak = max(r.get("peak_memory_bytes") or 0 for r in rows)
print(f"fsdp-1b  {s['params'] / 1e9:.2f}B params  layout {plan['mode']} {plan['micro_batch']}x{plan['accum']} "
      f"AC={plan['activation_checkpointing']}  tokens/s {last['tokens_per_s']:,.0f}  MFU {last['mfu']}")
print(f"fsdp-1b  peak memory measured {peak / 2**30:.2f} GiB  planned {plan['total'] / 2**30:.2f} GiB  "
      f"(planned/measured {plan['total'] / max(peak, 1):.3f}; parts {json.dumps({k: round(v / 2**30, 2) for k, v in plan['bytes'].items()})})")
print(f"fsdp-1b  MFU = tokens/s x {s['flops_per_token']:.4g} FLOP/token / peak (989e12 dense bf16)")
PYEOF

# The VWT MoE recipe at reduced depth (h 1600, 8 layers of 22 experts, top-3, µP, power
# schedule): tokens/s of the batched dispatch on a GPU, and the memory plan's MoE activation
# estimate (train/memory.py: not measured yet) beside the measured peak.
d="$OUT/moe"
"$PY" -m depthwidth train model=moe_1b3b model.depth=8 optim=vwt data=synthetic data.vocab_size=50257 data.order=1 \
  train.batch_size=8 train.micro_batch_size=4 train.seq_len=1024 train.steps=20 train.log_every=10 train.ckpt_every=0 \
  probe.every=10 train.eval_batches=1 train.device=cuda run.dir="$d" --quiet --json > "$d.json" || echo "moe: FAILED"
"$PY" - "$d" <<'PYEOF'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
peak = max(r.get("peak_memory_bytes") or 0 for r in rows)
print(f"moe      {s['params'] / 1e9:.2f}B params  tokens/s {rows[-1]['tokens_per_s']:,.0f}  MFU {rows[-1]['mfu']}  "
      f"peak {peak / 2**30:.2f} GiB  planned {s['plan']['total'] / 2**30:.2f} GiB")
PYEOF

# The 500M VWT recipe (vwt_500m: 24 x 960, µP, power schedule), uniform vs × at bf16, compiled,
# context 4096: step time, MFU and peak memory measured vs planned, for the issue "a × model
# costs what its FLOPs cost" (the CPU figures: benchmarks/bench_shapes.py).
for shape in uniform x; do
  d="$OUT/vwt500m-$shape"
  "$PY" -m depthwidth train model=vwt_500m model.shape=$shape optim=vwt data=synthetic data.vocab_size=50257 \
    data.order=1 train.batch_size=16 train.micro_batch_size=auto train.seq_len=4096 train.steps=20 \
    train.log_every=5 train.ckpt_every=0 probe.every=0 train.eval_batches=1 train.compile=true \
    train.device=cuda run.dir="$d" --quiet --json > "$d.json" || { echo "vwt500m-$shape: FAILED"; continue; }
  "$PY" - "$d" "$shape" <<'PYEOF'
import json, sys
d, shape = sys.argv[1:]
s = json.load(open(f"{d}/summary.json"))
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
last, plan = rows[-1], s["plan"]
peak = max(r.get("peak_memory_bytes") or 0 for r in rows)
step_s = 16 * 4096 / last["tokens_per_s"]
print(f"vwt500m  {shape:8s} {s['params'] / 1e6:.0f}M params  step {step_s:.3f} s  tokens/s {last['tokens_per_s']:,.0f}  "
      f"MFU {last['mfu']}  peak {peak / 2**30:.2f} GiB  planned {plan['total'] / 2**30:.2f} GiB "
      f"({plan['mode']} {plan['micro_batch']}x{plan['accum']})")
PYEOF
done
