#!/usr/bin/env bash
# Released checkpoints of different positional encodings, each as released, past its own context, on the same
# held-out text: perplexity by position at 1x and 2x its context (and the passkey with PASSKEY=1), one folder.
# Each entry is MODEL:CONTEXT[:BACKEND]; a config that states no context (BLOOM's) gets it as --train-len.
# Usage:
#   bash scripts/released_encodings.sh                      # what the package registry ships: SmolLM2-135M
#   bash scripts/released_encodings.sh openai-community/gpt2:1024 bigscience/bloom-560m:2048 \
#       EleutherAI/pythia-160m:2048 facebook/opt-125m:2048  # with the hub: learned, ALiBi, partial RoPE, learned
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/released-encodings}
docs=${DOCS:-1}
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=(smollm2-135m:8192:native smollm2-135m:8192:transformers)
fi
tasks=perplexity
if [ "${PASSKEY:-0}" = 1 ]; then tasks=perplexity,passkey; fi
for entry in "${models[@]}"; do
    IFS=: read -r model context backend <<< "$entry"
    backend=${backend:-auto}
    extrapolate run --model "$model" --backend "$backend" --train-len "$context" \
        --eval-lens "$context,$((2 * context))" --tasks "$tasks" --eval-docs "$docs" \
        --eval-tokens "$((2 * context))" --dtype bfloat16 --out "$out" --quiet
done
extrapolate report "$out"
