"""Merge one results folder into another: the rows of its tables, each run's record (`runs/`) and its prompts'
answers (`samples/`), then the report written again.

A sweep holds its output folder for as long as it runs, so two processes cannot write one folder. To spread one
folder's cells over two processes (or machines), run the second into a folder of its own, with the same
arguments otherwise (a run id does not hold the output folder; a task file is named by the path given, so give
the same path), and merge it back once it is done:

    python scripts/merge_results.py results/part-2 results/smollm2-ruler-25

Rows merge under the target's table lock, which every writer of results takes, so a sweep still running in the
target loses nothing. A run whose rows both folders hold must agree on them (the same cell measured twice gives
the same numbers); a difference is named and nothing is written. A merged run's logged batches are removed from
the target's `.partial/`, where they would otherwise wait for a cell that is done. Merging again changes nothing.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
from pathlib import Path

import pandas as pd

from extrapolate.core.errors import UserError
from extrapolate.core.lock import table_lock
from extrapolate.core.paths import DEPTH_LOGS_FOLDER, RUNS_FOLDER, SAMPLES_FOLDER
from extrapolate.report.table import (
    COLUMNS,
    KEY,
    POSITION_COLUMNS,
    POSITIONS_FILE,
    RESULTS_FILE,
    append_positions,
    append_results,
    key_strings,
    read_table,
)
from extrapolate.report.training_log import TRAINING_COLUMNS, TRAINING_FILE, append_training

COMPARED = ["value", "n", "ci_low", "ci_high", "status"]  # what the same cell measured twice must agree on


def conflicts(source: pd.DataFrame, target: pd.DataFrame) -> list[str]:
    """The rows both tables hold under one key with different numbers, one line each."""
    if source.empty or target.empty:
        return []
    a = source.assign(_key=key_strings(source, KEY)).set_index("_key")
    b = target.assign(_key=key_strings(target, KEY)).set_index("_key")
    both = a.index.intersection(b.index)
    out = []
    for key in both:
        for column in COMPARED:
            x, y = a.at[key, column], b.at[key, column]
            same = (pd.isna(x) and pd.isna(y)) or str(x) == str(y)
            if not same:
                try:
                    same = abs(float(x) - float(y)) <= 1e-6 * max(1.0, abs(float(y)))
                except (TypeError, ValueError):
                    pass
            if not same:
                out.append(f"{key.replace('|', ' ')}: {column} {x} here, {y} in the target")
    return out


def copy_records(source: Path, target: Path, run_ids: set[str]) -> None:
    """Each run's record and samples file into the target; a file the target holds must be the same file."""
    for folder, ending in ((RUNS_FOLDER, ".json"), (SAMPLES_FOLDER, ".jsonl")):
        for run_id in sorted(run_ids):
            path = source / folder / f"{run_id}{ending}"
            if not path.is_file():
                continue
            there = target / folder / path.name
            if there.is_file() and not filecmp.cmp(path, there, shallow=False):
                raise UserError(f"{there} differs from {path}: the two folders measured run {run_id} differently")
            there.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, there)


def merge(source: Path, target: Path) -> str:
    from extrapolate.report.pages import write_report

    if not (source / RESULTS_FILE).is_file():
        raise UserError(f"{source} has no {RESULTS_FILE}: nothing to merge")
    if source.resolve() == target.resolve():
        raise UserError(f"{source} is the target itself")
    with table_lock(target):
        rows = read_table(source / RESULTS_FILE, COLUMNS)
        held = read_table(target / RESULTS_FILE, COLUMNS) if (target / RESULTS_FILE).is_file() else rows.iloc[:0]
        differ = conflicts(rows, held)
        if differ:
            raise UserError(f"{len(differ)} rows differ, nothing merged; the first: {differ[0]}")
        run_ids = set(rows["run_id"].astype(str))
        copy_records(source, target, run_ids)
        if (source / POSITIONS_FILE).is_file():
            append_positions(target, read_table(source / POSITIONS_FILE, POSITION_COLUMNS).to_dict("records"))
        if (source / TRAINING_FILE).is_file():
            append_training(target, read_table(source / TRAINING_FILE, TRAINING_COLUMNS).to_dict("records"))
        append_results(target, rows.to_dict("records"))
        for run_id in run_ids:
            for log in (target / DEPTH_LOGS_FOLDER).glob(f"{run_id}-*"):
                log.unlink()
        write_report(target)
    return f"merged {len(rows)} rows of {len(run_ids)} runs from {source} into {target}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the folder to merge (left as it is)")
    parser.add_argument("target", type=Path, help="the folder that receives its rows, records and answers")
    args = parser.parse_args(argv)
    try:
        print(merge(args.source, args.target))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
