"""Merge one results folder into another: the rows of its tables, each run's record (`runs/`) and its prompts'
answers (`samples/`), then the report written again.

A sweep holds its output folder for as long as it runs, so two processes cannot write one folder. To spread one
folder's cells over two processes (or machines), run the second into a folder of its own, with the same
arguments otherwise (a run id does not hold the output folder; a task file is named by the path given, so give
the same path), and merge it back once it is done:

    python scripts/merge_results.py results/part-2 results/smollm2-ruler-25

Rows merge under the target's table lock, which every writer of results takes, so a sweep still running in the
target loses nothing. A run id holds neither the lengths nor the output folder, so one run may have cells in
both folders (split by length): its answers merge cell by cell. Where both folders hold a row or a prompt's
answer, they must agree (the same cell measured twice gives the same numbers); a difference is named and nothing
is written. The target's logged batches of the merged cells are removed from its `.partial/`, where they would
otherwise wait for a cell that is done. Merging again changes nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pandas as pd

from extrapolate.core.errors import UserError
from extrapolate.core.lock import table_lock
from extrapolate.core.paths import DEPTH_LOGS_FOLDER, RUNS_FOLDER
from extrapolate.report.samples import CELL, read_lines, samples_path, write_samples
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


def keyed(table: pd.DataFrame, where: Path) -> pd.DataFrame:
    """The table indexed by its rows' keys; a key held twice is refused (a table no writer makes)."""
    frame = table.assign(_key=key_strings(table, KEY)).set_index("_key")
    twice = frame.index[frame.index.duplicated()]
    if len(twice):
        raise UserError(f"{where / RESULTS_FILE} holds the row {twice[0].replace('|', ' ')} twice")
    return frame


def same(x, y) -> bool:
    if pd.isna(x) and pd.isna(y):
        return True
    if str(x) == str(y):
        return True
    try:
        return abs(float(x) - float(y)) <= 1e-6 * max(1.0, abs(float(y)))
    except (TypeError, ValueError):
        return False


def conflicts(source: pd.DataFrame, target: pd.DataFrame, where: tuple[Path, Path]) -> list[str]:
    """The rows both tables hold under one key with different numbers, one line each."""
    a, b = keyed(source, where[0]), keyed(target, where[1])
    return [
        f"{key.replace('|', ' ')}: {column} {a.at[key, column]} here, {b.at[key, column]} in the target"
        for key in a.index.intersection(b.index)
        for column in COMPARED
        if not same(a.at[key, column], b.at[key, column])
    ]


def sample_conflicts(source: Path, target: Path, run_ids: set[str]) -> list[str]:
    """The prompts both folders answered, for one run, cell and prompt, with different answers or scores."""
    out = []
    for run_id in sorted(run_ids):
        theirs = {prompt_key(r): r for r in read_lines(samples_path(target, run_id))}
        for record in read_lines(samples_path(source, run_id)):
            there = theirs.get(prompt_key(record))
            if there is not None and (there.get("prediction"), there.get("score")) != (
                record.get("prediction"),
                record.get("score"),
            ):
                out.append(f"run {run_id}, {' '.join(map(str, prompt_key(record)))}: answered differently")
    return out


def prompt_key(record: dict) -> tuple:
    return (*(record.get(k) for k in CELL), record.get("depth"), record.get("index"))


def copy_answers(source: Path, target: Path, run_ids: set[str]) -> None:
    """Each run's answers merged into the target's file by cell (a run split by length has lines in both), and
    its record copied where the target has none (the record of how the model was made, the same in both)."""
    for run_id in sorted(run_ids):
        write_samples(target, run_id, read_lines(samples_path(source, run_id)))
        record = source / RUNS_FOLDER / f"{run_id}.json"
        if record.is_file() and not (target / RUNS_FOLDER / record.name).is_file():
            (target / RUNS_FOLDER).mkdir(parents=True, exist_ok=True)
            shutil.copy2(record, target / RUNS_FOLDER / record.name)


def finished_logs(target: Path, rows: pd.DataFrame) -> list[Path]:
    """The target's logged batches of the cells merged (a run, a length): a cell still running at another
    length keeps its own."""
    cells = rows[["run_id", "eval_len"]].drop_duplicates()
    return [
        log
        for run_id, length in cells.itertuples(index=False)
        for log in (target / DEPTH_LOGS_FOLDER).glob(f"{run_id}-*-{int(length)}-rank*.json")
    ]


def merge(source: Path, target: Path) -> str:
    from extrapolate.report.pages import write_report

    if not (source / RESULTS_FILE).is_file():
        raise UserError(f"{source} has no {RESULTS_FILE}: nothing to merge")
    if not target.is_dir():
        raise UserError(f"{target} is not a results folder (merge into one that exists)")
    if source.resolve() == target.resolve():
        raise UserError(f"{source} is the target itself")
    with table_lock(target):
        rows = read_table(source / RESULTS_FILE, COLUMNS)
        held = read_table(target / RESULTS_FILE, COLUMNS)
        run_ids = set(rows["run_id"].astype(str))
        differ = conflicts(rows, held, (source, target)) + sample_conflicts(source, target, run_ids)
        if differ:
            raise UserError(f"{len(differ)} rows or answers differ, nothing merged; the first: {differ[0]}")
        copy_answers(source, target, run_ids)
        if (source / POSITIONS_FILE).is_file():
            append_positions(target, read_table(source / POSITIONS_FILE, POSITION_COLUMNS).to_dict("records"))
        if (source / TRAINING_FILE).is_file():
            append_training(target, read_table(source / TRAINING_FILE, TRAINING_COLUMNS).to_dict("records"))
        append_results(target, rows.to_dict("records"))
        for log in finished_logs(target, rows):
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
    except (UserError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
