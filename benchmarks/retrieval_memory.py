"""Peak memory of the passkey grid as the mission's command runs it: the command under `/usr/bin/time -v` (the
whole process's peak resident memory), one row a case appended to `<out>/retrieval-memory.csv`.

    python benchmarks/retrieval_memory.py --out results/bench tiny-32768
    python benchmarks/retrieval_memory.py --out results/bench small-131072

`tiny-32768`: the mission's command at `--model tiny --steps 20`, retrieval only, at 32768 (20 prompts a depth).
`small-131072`: the default `small` model, 20 steps, retrieval at 131072 with one prompt a depth (a copy of the
default task with `trials = 1`): at that length one prompt alone is over the default budget, so every micro-batch
holds one prompt whatever the trials, and the peak is the trunk's cache and one prompt's; the trials change the
time (hours on a 2-core CPU at 20), not the peak. Each case trains its model into its own empty cache first."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from csv_rows import append_row, provenance  # benchmarks/, the script's folder

MISSION = ["run", "--encoding", "yarn", "--train-len", "4096", "--steps", "20"]
CASES = {  # model, the grid's length, prompts a depth (None: the task's own), options (the corpus)
    "tiny-32768": ("tiny", "32768", None, []),
    # no held-out play of the default corpus is 131072 tokens long: the held-out plays as one document
    "small-131072": ("small", "131072", 1, ["--corpus", "shakespeare-joined"]),
}
COLUMNS = ["command", "eval_memory", "grid", "peak_rss_gb", "minutes", "answers_same", "machine", "git_sha", "date"]
PEAK = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def task_file(folder: Path, trials: int | None) -> str:
    """The default retrieval task, or a copy of it with `trials` prompts a depth."""
    if trials is None:
        return "retrieval"
    from extrapolate.tasks.files import task_file as named

    text = named("passkey-word").read_text()
    copy = folder / "passkey-word.toml"
    copy.write_text(re.sub(r"(?m)^trials = \d+", f"trials = {trials}", text))
    return str(copy)


def measure(case: str, work: Path) -> dict:
    model, length, trials, extra = CASES[case]
    command = [*MISSION, "--model", model, *extra, "--tasks", task_file(work, trials), "--eval-lens", length]
    args = [*command, "--out", str(work / "out")]
    env = {**os.environ, "EXTRAPOLATE_CACHE": str(work / "cache")}
    # the model, trained (and cached) before the measured run, so its peak is the evaluation's
    train = [
        *MISSION,
        "--model",
        model,
        *extra,
        "--tasks",
        "perplexity",
        "--eval-lens",
        "4096",
        "--out",
        str(work / "train"),
    ]
    subprocess.run([sys.executable, "-m", "extrapolate", *train], env=env, check=True, capture_output=True)
    began = time.perf_counter()
    timed = ["/usr/bin/time", "-v", sys.executable, "-m", "extrapolate", *args]
    done = subprocess.run(timed, env=env, capture_output=True, text=True)
    minutes = (time.perf_counter() - began) / 60
    if done.returncode:
        raise SystemExit(f"{case} failed:\n{done.stderr[-3000:]}")
    record = json.loads((work / "out" / "run.json").read_text())
    return {
        "command": " ".join(["extrapolate", *command]).replace(str(work) + "/", "trials=1 copy of "),
        "eval_memory": "default (512M)",
        "grid": length,
        "peak_rss_gb": round(int(PEAK.search(done.stderr).group(1)) / 2**20, 2),
        "minutes": round(minutes, 1),
        "answers_same": "",
        **provenance(record),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    parser.add_argument("--out", type=Path, required=True, help="folder whose retrieval-memory.csv gets a row a case")
    options = parser.parse_args()
    table = options.out / "retrieval-memory.csv"
    for case in options.cases:
        with tempfile.TemporaryDirectory() as work:
            row = measure(case, Path(work))
        append_row(table, COLUMNS, row)
        print(f"{case}: peak {row['peak_rss_gb']} GB, {row['minutes']} min")


if __name__ == "__main__":
    main()
