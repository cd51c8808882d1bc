#!/usr/bin/env bash
# The comparison at GPU scale: every classic encoding on the `base` model (26.4 M parameters with the default
# BPE) trained at L = 1024, perplexity and retrieval from L to 8L, in one command on one GPU.
#
#   bash scripts/gpu_showcase.sh --dry-run                 # the plan and a time estimate, first
#   bash scripts/gpu_showcase.sh                           # into results/gpu-showcase/
#   bash scripts/gpu_showcase.sh --corpus ~/data/pg19      # PG-19's layout: train/ and test/ folders of books
#
# Any `extrapolate sweep` option given here replaces the one below (the last value of an option wins), so the
# same command rehearses at tiny size on a CPU:
#
#   bash scripts/gpu_showcase.sh --model tiny --train-len 64 --steps 20 --device cpu --dtype float32 --out /tmp/x
#
# The budget. Shakespeare (the built-in corpus) is about 2 M BPE tokens and `base` has 26 M parameters: half of
# each batch is corpus text (the other half retrieval prompts), so 600 steps of 32 × 1024 tokens read the
# corpus about 5 times, where a model this size starts to memorise it. The report's "held-out perplexity
# during training" says whether it did; with a larger corpus (`--corpus`) raise `--steps`. The learning rate
# is 1e-3, the usual one for a model of this size (3e-3, the default, is tuned for the 1 M-parameter CPU one).
# Runs with `python -m extrapolate` so that it also works from a checkout on PYTHONPATH, without an install.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m extrapolate sweep \
    --encodings classic --model base --train-len 1024 --eval-len 8192 \
    --batch-size 32 --steps 600 --lr 1e-3 \
    --device cuda --dtype bfloat16 --out results/gpu-showcase "$@"
