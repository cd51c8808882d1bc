#!/usr/bin/env bash
# Both ends of every dependency range in pyproject.toml, each in a fresh virtual environment, then the fast
# tests: `newest` installs the newest releases the ranges allow, `lowest` every direct dependency at its lower
# bound (uv's lowest-direct resolution; what they need in turn at its newest). Prints what each installed.
# A failing end keeps its whole test log (the path is printed).
#
#   bash scripts/check_ranges.sh            # both
#   bash scripts/check_ranges.sh lowest     # one
#
# Not part of CI, which installs the lock (.ci/lock.txt): this check depends on the day's releases. Run it
# before changing a range, before refreshing the lock, and before a release; raise a bound that fails.
# Both ends come from the package index, torch included (a CUDA build of several GB where that is what the
# index has for this platform; it runs on the CPU all the same).
set -euo pipefail
cd "$(dirname "$0")/.."
ends=("${@:-newest lowest}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/tools"
"$work/tools/bin/python" -m pip install -q "uv==0.13.9"
uv="$work/tools/bin/uv"
status=0
for end in ${ends[*]}; do
    case "$end" in
        newest) resolution=highest ;;
        lowest) resolution=lowest-direct ;;
        *) echo "unknown end '$end': newest or lowest" >&2; exit 2 ;;
    esac
    venv="$work/$end"
    "$uv" venv -q --python "$(command -v python3)" "$venv"
    "$uv" pip install -q --python "$venv/bin/python" --resolution "$resolution" -e '.[test]'
    # uv makes venvs without pip, which the built-in corpus and models are fetched with (as users' venvs have)
    "$uv" pip install -q --python "$venv/bin/python" pip
    echo "== $end: installed"
    "$uv" pip freeze -q --python "$venv/bin/python" | grep -v '^-e' | tr '\n' ' '
    echo
    log=$(mktemp "${TMPDIR:-/tmp}/check_ranges-$end-XXXXXX.log")  # outside $work: a failing end's log is kept
    if HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider >"$log" 2>&1; then
        tail -n 1 "$log"
        rm -f "$log"
        echo "== $end: tests passed"
    else
        status=1
        tail -n 15 "$log"
        echo "== $end: tests FAILED; the whole log: $log"
    fi
done
exit $status
