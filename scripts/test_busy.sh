#!/usr/bin/env bash
# The README's test command on a busy machine: one busy-looping process per core, at the tests' own priority,
# for as long as the suite runs (a laptop doing other work). Passes only if the suite does.
#   bash scripts/test_busy.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
cores=$(python -c "import os; print(len(os.sched_getaffinity(0)))")
hogs=()
for _ in $(seq "$cores"); do
    python -c "while True: pass" &
    hogs+=("$!")
done
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
echo "suite with $cores busy-looping process(es) beside it" >&2
start=$SECONDS
python -m pytest -q "$@"
echo "passed with every core busy in $((SECONDS - start)) s" >&2
