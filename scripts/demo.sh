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

echo "== 1/6 dw sweep demo launcher=local  (16 tiny models, 2 CPU workers, returns at once)"
$DW sweep demo launcher=local "${EXTRA[@]}"
echo "== 2/6 dw status demo --watch  (live until every run has ended)"
$DW status demo --watch --interval 2
echo "== 3/6 dw analyze demo  (entropy, MLP density, logit lens: runs without analysis.json, e.g. trained before train.analyze_at_end)"
$DW analyze demo
echo "== 4/6 dw fit demo --law depth-delusion --where shape=uniform --bootstrap $BOOT --compare chinchilla,width-depth"
$DW fit demo --law depth-delusion --where shape=uniform --bootstrap "$BOOT" --compare chinchilla,width-depth
echo "== 5/6 dw report demo --plots $OUT"
$DW report demo --plots "$OUT"
echo "== 6/6 dw simulate demo --name demo-planted  (the same grid, losses planted from the depth-delusion law near the paper's fit: could this grid identify D_crit at all?)"
$DW simulate demo --name demo-planted --replace --seed 1 > /dev/null
$DW fit demo-planted --law depth-delusion --where shape=uniform --bootstrap 100 | grep -E "^ *(D_crit identified|planted world)" || true

t1=$(date +%s)
echo "$((t1 - t0))" > "$OUT/demo_seconds"
echo
echo "demo finished in $((t1 - t0)) s (sweep, fit and report; venv set-up not counted)"
echo "figures and report in $OUT/:"
for f in "$OUT"/*.png "$OUT"/report.md; do
  [ -e "$f" ] && echo "  $f"
done
