#!/usr/bin/env bash
# Refresh .ci/lock.txt, the exact versions CI and the README's test command install (as a constraints file:
# `pip install ... -c .ci/lock.txt`): the project's dependencies with its `test` extra and the CPU build of
# torch 2.13, resolved by pip-compile (pip-tools) for this machine's Python.
#
# When: after changing a range in pyproject.toml, or to move CI to newer releases on purpose. Then run
# `bash scripts/check_ranges.sh` (both ends of every range) and the tests with the new lock, and commit it.
# The lock never changes by itself: a dependency's new release reaches CI only through this script.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "pip==26.3" "pip-tools==7.6.2"
# the current lock seeds the output: pip-compile keeps its pins where the ranges still allow them, so a
# refresh after one change moves only what that change needs (add --upgrade to move everything on purpose)
grep -v '^#' .ci/lock.txt > "$work/lock.txt"
"$work/venv/bin/pip-compile" --quiet --extra test --strip-extras --allow-unsafe --no-header \
    --no-emit-index-url --no-emit-find-links --output-file "$work/lock.txt" pyproject.toml .ci/torch-cpu.in
{
    echo "# Exact versions for CI and the README's test command (a constraints file: pip install ... -c .ci/lock.txt)."
    echo "# Made by scripts/lock.sh (pip-compile) on Python $(python3 -c 'import sys; print(*sys.version_info[:2], sep=".")'); do not edit by hand."
    # torch's local label (+cpu) is dropped: '==2.13.0' takes the CPU file where one is at hand, the release elsewhere
    sed -E 's/^(torch==[^+ ]+)\+[A-Za-z0-9.]+/\1/' "$work/lock.txt"
} > .ci/lock.txt
echo "wrote .ci/lock.txt ($(grep -c '==' .ci/lock.txt) pinned packages)"
