#!/usr/bin/env bash
# RULER's offline tasks on SmolLM2-135M, into results/smollm2-ruler/ (CPU: bfloat16 where the CPU has it).
# Each task is one run (its own run id); rows merge into one table, and a stopped script resumes: finished
# cells are kept, a cell's finished batches are logged. Usage:
#   bash scripts/ruler_smollm2.sh [lengths, default 1024,2048,4096,8192] [tasks, default the 11 offline ones]
#   bash scripts/ruler_smollm2.sh 16384 niah_single_1,vt,cwe   # past the context: plain RoPE, then YaRN
set -euo pipefail
cd "$(dirname "$0")/.."
lengths=${1:-1024,2048,4096,8192}
tasks=${2:-niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multikey_3,niah_multivalue,niah_multiquery,vt,cwe,fwe}
encodings=${ENCODINGS:-rope}
out=${OUT:-results/smollm2-ruler}
for encoding in ${encodings//,/ }; do
    for task in ${tasks//,/ }; do
        extrapolate run --model smollm2-135m --encoding "$encoding" --tasks "$task" --eval-lens "$lengths" \
            --dtype bfloat16 --out "$out" --quiet
    done
done
extrapolate report "$out"
