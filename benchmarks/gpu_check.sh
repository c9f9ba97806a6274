#!/usr/bin/env bash
# One prepared device check for a task that is lent a GPU (not run in CI):
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
