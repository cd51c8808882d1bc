#!/usr/bin/env bash
# RULER's offline tasks (or BABILong's, FAMILY=babilong) on SmolLM2-135M, into results/smollm2-ruler/ (bfloat16,
# as the other SmolLM2 results).
# On a CPU a cell of 20 prompts at 8192 tokens takes most of an hour, so the folder's task files are copies of
# tasks/<family>/<name>.toml with `samples = $SAMPLES` (default 5), kept in $OUT/tasks/ for the record. Each task is a
# sweep of one cell (its own run id); rows merge into one table, and a stopped script resumes: a task already in
# the table is skipped, and a cell's finished batches are logged. Usage:
#   bash scripts/ruler_smollm2.sh [lengths, default 1024,2048,4096,8192] [tasks, default the 11 offline ones]
#   ENCODINGS=rope,yarn bash scripts/ruler_smollm2.sh 16384 niah_single_1,vt,cwe   # past the 8192 context
#   SAMPLES=25 OUT=results/smollm2-ruler-25 EXTRA="--chat-template auto --append" bash scripts/ruler_smollm2.sh   # +chat rows beside
#   EXTRAPOLATE="python3 -m extrapolate" bash scripts/ruler_smollm2.sh          # a checkout without an install
#   FAMILY=babilong SAMPLES=25 OUT=results/smollm2-babilong bash scripts/ruler_smollm2.sh   # BABILong's qa1 … qa5
set -euo pipefail
cd "$(dirname "$0")/.."
lengths=${1:-1024,2048,4096,8192}
family=${FAMILY:-ruler}  # the folder under tasks/ the task files come from
if [ "$family" = babilong ]; then
    default_tasks=qa1,qa2,qa3,qa4,qa5
else
    default_tasks=niah_single_1,vt,cwe,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multikey_3,niah_multivalue,niah_multiquery,fwe
fi
tasks=${2:-$default_tasks}
encodings=${ENCODINGS:-rope}
out=${OUT:-results/smollm2-ruler}
samples=${SAMPLES:-5}
extra=${EXTRA:-}  # more `sweep` options, e.g. --chat-template auto
mkdir -p "$out/tasks"
for encoding in ${encodings//,/ }; do
    for task in ${tasks//,/ }; do
        file="$out/tasks/$task.toml"
        sed -E "s/^samples = [0-9]+.*/samples = $samples/" "tasks/$family/$task.toml" > "$file"
        # one task that fails (a length too short for its prompts) does not stop the others
        # a sweep of one cell: a task already in the table is skipped, so the script resumes where it stopped
        ${EXTRAPOLATE:-extrapolate} sweep --model smollm2-135m --encodings "$encoding" --tasks "$file" --eval-lens "$lengths" \
            --dtype bfloat16 --out "$out" --quiet $extra || echo "$task: failed (see above); the other tasks go on" >&2
    done
done
${EXTRAPOLATE:-extrapolate} report "$out"
