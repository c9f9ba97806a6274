#!/usr/bin/env bash
# The newcomer's demo (`make demo`): a CPU micro-sweep trained by detached
# local workers, watched live, then fitted and reported.
#
#   DW            the dw command            (default .venv/bin/dw)
#   DW_RUNS       run store root            (default runs)
#   DW_DEMO_OUT   figures + report.md       (default out/demo)
#   DW_DEMO_ARGS  extra overrides for every run, e.g. "train.steps=20" (the test suite's short demo)
#   DW_DEMO_BOOTSTRAP  bootstrap replicates of the fit (default 200)
set -euo pipefail
DW=${DW:-.venv/bin/dw}
OUT=${DW_DEMO_OUT:-out/demo}
BOOT=${DW_DEMO_BOOTSTRAP:-200}
# shellcheck disable=SC2206
EXTRA=(${DW_DEMO_ARGS:-})
t0=$(date +%s)

echo "== 1/7 dw sweep demo launcher=local  (16 tiny models, 2 CPU workers, returns at once)"
$DW sweep demo launcher=local "${EXTRA[@]}"
echo "== 2/7 dw status demo --watch  (live until every run has ended)"
$DW status demo --watch --interval 2
echo "== 3/7 dw analyze demo  (entropy, MLP density, logit lens: runs without analysis.json, e.g. trained before train.analyze_at_end)"
$DW analyze demo
# The built-in task on the runs' own held-out text (offline).  --limit 200 of its ~620 items
# keeps the 16 evals near 20 s; one thread, because OpenMP's two spin on a busy
# 2-core machine (the same 16 evals took 190 s instead of 24 s beside one other process).
# Only its last line is shown (the harness draws progress bars per run; errors are one line).
echo "== 4/7 dw eval demo --tasks dw_heldout_cloze --limit 200  (which of 4 continuations follows 52 bytes of held-out text; chance 0.25)"
OMP_NUM_THREADS=1 $DW eval demo --tasks dw_heldout_cloze --limit 200 --batch-size 16 2>&1 > /dev/null | tail -n 1
echo "== 5/7 dw fit demo --law depth-delusion --where shape=uniform --bootstrap $BOOT --compare chinchilla,width-depth"
$DW fit demo --law depth-delusion --where shape=uniform --bootstrap "$BOOT" --compare chinchilla,width-depth
echo "== 6/7 dw report demo --plots $OUT"
$DW report demo --plots "$OUT"
echo "== 7/7 dw simulate demo --name demo-planted  (the same grid, losses planted from the depth-delusion law near the paper's fit: could this grid identify D_crit at all?)"
$DW simulate demo --name demo-planted --replace --seed 1 > /dev/null
COLUMNS=400 $DW fit demo-planted --law depth-delusion --where shape=uniform --bootstrap 100 | grep -E "^ *(no depth penalty shown|D_crit (not )?located|planted world)" || true

t1=$(date +%s)
echo "$((t1 - t0))" > "$OUT/demo_seconds"
echo
echo "demo finished in $((t1 - t0)) s (sweep, fit and report; venv set-up not counted)"
echo "figures and report in $OUT/:"
for f in "$OUT"/*.png "$OUT"/report.md; do
  [ -e "$f" ] && echo "  $f"
done
