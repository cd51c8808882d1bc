"""How close the dry run's estimate comes to the run: each case's `--dry-run` estimate, then the run itself with
no trained model cached (its own model cache; the corpus and tokenizer copied in, as their preparation is not
what the estimate prices), wall time measured around it. One row a case appended to `<out>/estimate.csv` with
the run record's training and evaluation seconds, the machine and the commit.

    python benchmarks/estimate_accuracy.py --out results/bench-estimate main-job
    python benchmarks/estimate_accuracy.py --out results/bench-estimate mission

Run it on an idle machine: the estimate times a few steps, the run takes minutes to an hour, and a job beside
either changes both (on a shared 2-core CPU by up to several times)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from csv_rows import append_row, provenance  # benchmarks/, the script's folder

CASES = {
    "main-job": ["run", "--encoding", "alibi"],  # the README's first quick-start command
    "mission": ["run", "--encoding", "yarn", "--train-len", "4096", "--eval-len", "32768"],
    "mission-tiny": ["run", "--encoding", "yarn", "--train-len", "4096", "--eval-len", "32768", "--model", "tiny"],
}
COLUMNS = [
    "case", "command", "estimate_s", "run_s", "ratio", "train_s", "eval_s", "machine", "git_sha", "date",
]  # fmt: skip
ESTIMATE = re.compile(r"estimated ([\d.]+) (min|h) on")


def extrapolate(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "extrapolate", *args], env=env, capture_output=True, text=True, check=True
    )


def estimate_seconds(output: str) -> float:
    found = ESTIMATE.search(output)
    if not found:
        raise SystemExit(f"no estimate in the dry run's output:\n{output}")
    value, unit = float(found.group(1)), found.group(2)
    return value * (3600 if unit == "h" else 60)


def fresh_cache(folder: Path) -> dict:
    """An environment whose model cache is empty, with the user's prepared corpora and tokenizers copied in."""
    from extrapolate.core.paths import cache_dir

    for part in ("corpora", "tokenizers", "tokens"):
        if (cache_dir() / part).is_dir():
            shutil.copytree(cache_dir() / part, folder / part)
    return {**os.environ, "EXTRAPOLATE_CACHE": str(folder)}


def measure(case: str, work: Path, keep: Path | None) -> dict:
    env = fresh_cache(work / "cache")
    out = work / "out"
    args = [*CASES[case], "--out", str(out)]
    dry = extrapolate([*args, "--dry-run"], env)
    estimate = estimate_seconds(dry.stdout + dry.stderr)
    began = time.perf_counter()
    run = extrapolate(args, env)
    took = time.perf_counter() - began
    record = json.loads((out / "run.json").read_text())
    if keep is not None:  # the run's folder and what it printed, to read its summary later
        shutil.copytree(out, keep / case, dirs_exist_ok=True)
        (keep / case / "run.log").write_text(dry.stdout + dry.stderr + run.stdout + run.stderr)
    return {
        "case": case,
        "command": "extrapolate " + " ".join(CASES[case]),
        "estimate_s": round(estimate, 1),
        "run_s": round(took, 1),
        "ratio": round(estimate / took, 3),
        "train_s": record["training"].get("train_seconds"),
        "eval_s": (record.get("evaluation") or {}).get("seconds"),
        **provenance(record),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    parser.add_argument("--out", type=Path, required=True, help="folder whose estimate.csv gets a row a case")
    parser.add_argument("--keep", action="store_true", help="also keep each run's folder and log as <out>/<case>/")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    table = options.out / "estimate.csv"
    for case in options.cases:
        with tempfile.TemporaryDirectory() as work:
            row = measure(case, Path(work), options.out if options.keep else None)
        append_row(table, COLUMNS, row)
        print(f"{case}: estimate {row['estimate_s']:.0f} s, run {row['run_s']:.0f} s, ratio {row['ratio']:.2f}")


if __name__ == "__main__":
    main()
