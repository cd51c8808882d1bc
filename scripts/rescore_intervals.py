"""Recompute the interval of every partial-credit RULER row of a results folder from its prompts' scores
(`samples/<run_id>.jsonl`), by the current rule (`core.intervals.score_interval`): rows written while a
partial-credit interval was the bootstrap alone (`ci_method` bootstrap-prompts, zero-wide where every prompt
scored alike) get the bootstrap widened to Wilson's at the mean. Values, n and every other column stay; a row
whose samples do not give back its value and n exactly is left as it is and named.

    python scripts/rescore_intervals.py results/smollm2-ruler-25
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import score_interval
from extrapolate.core.lock import table_lock
from extrapolate.report.table import write_table

OLD_METHOD = "bootstrap-prompts"


def prompt_scores(folder: Path, run_id: str) -> dict[tuple[str, int], list[float]]:
    """(protocol, length) -> the scores of its prompts, in prompt order."""
    scores: dict[tuple[str, int], list[tuple[int, float]]] = {}
    path = folder / "samples" / f"{run_id}.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        scores.setdefault((record["protocol"], int(record["eval_len"])), []).append(
            (int(record["index"]), float(record["score"]))
        )
    return {key: [s for _, s in sorted(values)] for key, values in scores.items()}


def rescore(folder: Path) -> int:
    with table_lock(folder):  # a sweep still writing to the folder appends under the same lock
        return _rescore(folder)


def _rescore(folder: Path) -> int:
    table = pd.read_csv(folder / "results.csv")
    changed, kept = 0, []
    for i, row in table[table["ci_method"] == OLD_METHOD].iterrows():
        try:
            scores = prompt_scores(folder, row["run_id"])[(row["protocol"], int(row["eval_len"]))]
        except (OSError, KeyError):
            kept.append(f"{row['run_id']} at {row['eval_len']}: no samples")
            continue
        if len(scores) != int(row["n"]) or abs(sum(scores) / len(scores) - float(row["value"])) > 1e-9:
            kept.append(f"{row['run_id']} at {row['eval_len']}: samples differ from the row")
            continue
        low, high, method = score_interval(scores)
        table.loc[i, ["ci_low", "ci_high", "ci_method"]] = [low, high, method]
        changed += 1
    if changed:
        write_table(folder / "results.csv", table)
    for line in kept:
        print(f"left as it is: {line}", file=sys.stderr)
    return changed


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {rescore(Path(name))} rows given the current interval")
