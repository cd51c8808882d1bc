"""Give a committed results folder the predictions its runs did not keep (`samples/<run id>.jsonl`, written
since 2026-11-27), by measuring each run's retrieval and RULER cells again exactly as it was made.

For every run of FOLDER with retrieval rows in `results.csv` and no samples file, the run's recorded request
(`runs/<run id>.json`) is resolved again, restricted to its retrieval kinds and lengths (which leaves its run id
as it is: the id does not hold the list of kinds). Then:

- if the request resolves to another run id (its model, its task file or a default changed since), or its
  rows' protocol (the task file's name, version and content hash) is not the one the file gives now, the run
  is named and skipped: what would be measured is not what the rows are;
- else the cells are measured into a scratch folder, the model trained again where it is not cached (same
  seed, same data, same device: the same model), and the samples file is copied into FOLDER only if every
  re-measured row equals its committed row (value and n). A row that differs is named and nothing is written,
  with one exception: where every greedy row comes back and only rank rows (`rank_accuracy`, the true answer's
  log-likelihood against its distractors') do not, the answers are the run's, and they are written with the
  rank fields of those cells left empty, the line naming each cell with its prompts' margins as measured now
  (a rank at a near tie can turn on another CPU's bf16 path, or another order of the same sums).
  With `--replace`, a run whose greedy rows did not all come back is measured anew instead: its retrieval
  rows in FOLDER are replaced by the measurement's (their provenance, commit and time, the measurement's), its
  samples written, and the line names every value that changed. That is a new measurement, not a recovery:
  for rows no CPU at hand gives back (made on another CPU's bf16 path), decided by the user, said in NOTES.
  The scratch folder is FOLDER/.recover/<run id>/, kept until the run is decided: a stopped run resumes from
  its finished depths (their answers kept in its depth logs), which at SmolLM2's 32768 tokens on a CPU is the
  difference between an hour lost and none. A refused run keeps it too, to read its answers, and to be
  decided again without measuring (delete it to measure again).

With `--perplexity`, a run's perplexity rows whose documents' losses are not in its samples file (written before
they were kept) are measured too; only where every one of them comes back with its value, to the six
significant digits the table keeps, are the documents' lines merged into the samples file and the rows given
the interval those documents give (n, and the t interval over them: core/intervals.py); values stay as they
are.

A run already holding its samples (and, with `--perplexity`, its intervals) is left alone, so the command
resumes where it stopped, run by run and, within a run, depth by depth. `--task-file NAME=FILE` reads a task
the runs name (measured, or trained on) from FILE: for runs made at an older version of it (e.g.
`passkey-word` version 1, restored under results/showcase/tasks/). A run's id holds the task's name, its model
(trained on the task's prompts) the file's identity, and each row's `protocol` the identity it was measured
with, so the id check and the row comparison above both say whether it is the file the rows were made with.

    python scripts/recover_samples.py results/smollm2-retrieval --dry-run    # which runs can be measured again
    python scripts/recover_samples.py results/smollm2-retrieval
    python scripts/recover_samples.py results/smollm2-retrieval --runs 8b6e406a33 --replace
    python scripts/recover_samples.py results/showcase \
        --task-file passkey-word=results/showcase/tasks/passkey-word-v1.toml --perplexity
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from extrapolate.core.lock import table_lock
from extrapolate.core.paths import RUNS_FOLDER
from extrapolate.report.samples import read_lines, samples_path, write_samples
from extrapolate.report.table import COLUMNS, RESULTS_FILE, load_results, read_table, row_kinds, write_table
from extrapolate.run.request import RunRequest
from extrapolate.tasks.kinds import RENAMED_KINDS

KEY = ["task", "protocol", "eval_len", "depth", "metric"]  # a row within its run
PERPLEXITY = "perplexity"
INTERVAL_COLUMNS = ["n", "ci_low", "ci_high", "ci_method"]
RANK_METRIC = "rank_accuracy"
REFUSED = "not given back"
SCRATCH_FOLDER = ".recover"  # inside FOLDER: a run's measurement while it is under way (ignored by git)


def stored_request(record: dict) -> RunRequest:
    """The RunRequest a run recorded, as the current code reads it: fields it no longer has are dropped, fields
    added since keep their defaults (which leave older run ids as they were: core/identity.py)."""
    fields = {f.name for f in dataclasses.fields(RunRequest)}
    given = {k: v for k, v in record["request"].items() if k in fields}
    for name in ("eval_lens", "tasks", "train_tasks", "optional_tasks"):
        if given.get(name) is not None:
            given[name] = tuple(given[name])
    for name in ("tasks", "optional_tasks"):  # the kinds it measured, under their names now
        given[name] = tuple(RENAMED_KINDS.get(t, t) for t in given.get(name) or ())
    given["encoding_options"] = tuple(tuple(pair) for pair in given.get("encoding_options") or ())
    trained = record.get("train_config") or {}
    for name in ("embed_std", "position_std", "position_lr_scale"):  # defaults that changed since: as trained
        if given.get(name) is None and (trained.get("model") or {}).get(name) is not None:
            given[name] = trained["model"][name]
    trained_in = trained.get("dtype")
    if given.get("train_dtype") == "auto" and trained_in:  # what "auto" chose then, which the model was trained in
        given["train_dtype"] = trained_in
    return RunRequest(**given)


def remeasure_request(
    folder: Path, record: dict, rows: pd.DataFrame, scratch: Path, task_files: dict[str, str]
) -> RunRequest:
    """The run's request limited to its retrieval cells, written into `scratch`. A task file recorded by a path
    that no longer exists (its results folder renamed since) is read from FOLDER's `tasks/`."""
    request = stored_request(record)
    changes = {
        "tasks": tuple(dict.fromkeys(row_kinds(rows))),
        "eval_lens": tuple(sorted(int(n) for n in rows["eval_len"].unique())),
        "out": scratch,
        "name": None,
    }
    task = request.passkey_task
    if task in task_files:
        changes["passkey_task"] = task_files[task]
    elif task and task.endswith(".toml") and not Path(task).exists():
        changes["passkey_task"] = str(folder / "tasks" / Path(task).name)  # a folder since renamed
    changes["train_tasks"] = tuple(task_files.get(t, t) for t in request.train_tasks)
    return dataclasses.replace(request, **changes)


def key_of(row) -> tuple:
    depth = row["depth"]
    return (row["task"], row["protocol"], int(row["eval_len"]), -1.0 if pd.isna(depth) else float(depth), row["metric"])


def keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows indexed by their place within their run (KEY; a row without a depth at depth -1)."""
    frame = frame.assign(depth=frame["depth"].astype(float).fillna(-1.0), eval_len=frame["eval_len"].astype(int))
    return frame.set_index(KEY)


def within_last_digit(a: float, b: float) -> bool:
    """Whether two values agree to the table's precision: at most one unit apart in the sixth significant digit
    (the table keeps six, `%.6g`), so that a re-measurement differing far below it but rounded across a boundary
    still counts as the value (47.6052 and 47.6053)."""
    unit = 10.0 ** (math.floor(math.log10(abs(a))) - 5) if a else 0.0
    return abs(a - b) <= unit * (1 + 1e-9)


def differences(committed: pd.DataFrame, fresh: pd.DataFrame, last_digit: bool = False) -> dict[tuple, str]:
    """{row's KEY: one line} for each committed row whose re-measured value or n differs (or is missing).
    Values must be equal, or with `last_digit` agree to the table's six digits (perplexity, a mean of float
    losses)."""
    old, new = keyed(committed), keyed(fresh)
    assert new.index.is_unique, "a run's rows are one per task, protocol, length, depth and metric"
    out = {}
    for key, row in old.iterrows():
        if key not in new.index:
            out[key] = f"{key}: not measured again"
            continue
        again = new.loc[key]
        same_n = pd.isna(row["n"]) or float(row["n"]) == float(again["n"])
        value, value_again = float(row["value"]), float(again["value"])
        same = within_last_digit(value, value_again) if last_digit else abs(value - value_again) <= 1e-9
        if not same or not same_n:  # NaN is no match
            out[key] = f"{key}: committed {float(row['value']):g}, again {float(again['value']):g}"
    return out


def protocols_now(resolved, prepared) -> dict[str, str]:
    """{task kind: the protocol its rows would record now}: the task file's identity (its name, version and
    content hash), with the prompt format (`+chat`)."""
    from extrapolate.run.resolved import task_setup
    from extrapolate.tasks.kinds import asked_kinds

    setup = task_setup(resolved, prepared)
    return {kind.name: kind.protocol(setup) for kind in asked_kinds(resolved.request.tasks)}


class Asked(NamedTuple):  # not a dataclass: loaded by path (tests), the script is no module dataclasses can find
    """What the command line asked of every run: task files read from elsewhere, only planning, replacing."""

    task_files: dict[str, str]
    dry_run: bool = False
    replace: bool = False


def recover_run(folder: Path, run_id: str, rows: pd.DataFrame, kinds: list[str], asked: Asked) -> str:
    """Measure one run's cells in `rows` again (retrieval rows without samples; perplexity rows without an
    interval); copy its samples in when every retrieval row is given back, and give the perplexity rows their
    interval when every one of them is. `kinds`: the task kinds of all the run's rows. Returns what happened,
    one line."""
    record_path = folder / RUNS_FOLDER / f"{run_id}.json"
    if not record_path.is_file():
        return f"{run_id}: no record in {RUNS_FOLDER}/ (made before each run's was kept); skipped"
    record = json.loads(record_path.read_text())
    scratch = folder / SCRATCH_FOLDER / run_id
    said = measure_again(folder, scratch, run_id, record, rows, kinds, asked)
    if REFUSED in said:  # its measurement stays, to read and to decide again from without measuring
        return f"{said}; its measurement kept in {scratch} (delete it to measure again)"
    if not asked.dry_run:  # decided (written or skipped): the scratch goes; a stopped run keeps it
        shutil.rmtree(scratch, ignore_errors=True)
        if (folder / SCRATCH_FOLDER).is_dir() and not any((folder / SCRATCH_FOLDER).iterdir()):
            (folder / SCRATCH_FOLDER).rmdir()
    return said


def measured_rows(scratch: Path, run_id: str) -> pd.DataFrame:
    """The run's rows measured into `scratch` so far (none before its cell is written whole)."""
    if not (scratch / RESULTS_FILE).is_file():
        return pd.DataFrame(columns=COLUMNS)
    fresh = load_results(scratch)
    return fresh[(fresh["run_id"].astype(str) == run_id) & (fresh["status"].fillna("ok") == "ok")]


def measure_again(
    folder: Path, scratch: Path, run_id: str, record: dict, rows: pd.DataFrame, kinds: list[str], asked: Asked
) -> str:
    """recover_run's work in its scratch folder, which resumes a stopped measurement (its depth logs) or
    finds the rows a stopped process measured whole but did not compare."""
    from extrapolate.run.cell import run_cell
    from extrapolate.run.prepare import prepare
    from extrapolate.run.reporter import Reporter
    from extrapolate.run.resolution import resolve
    from extrapolate.run.resolved import resolve_run
    from extrapolate.run.resolved import run_id as run_id_of

    request = remeasure_request(folder, record, rows, scratch, asked.task_files)
    resolved_request = resolve(request)
    prepared = prepare(resolved_request)
    resolved = resolve_run(resolved_request, prepared)
    # the id holds the task as the run named it (the file is what it read), and whether a kind of the run
    # read the task file: the kinds the run measured, not the subset measured again
    named = dataclasses.replace(
        resolved.request, passkey_task=record["request"].get("passkey_task"), tasks=tuple(kinds)
    )
    resolved = dataclasses.replace(resolved, run_id=run_id_of(named, resolved.model_hash, resolved.factor))
    if resolved.run_id != run_id:
        return f"{run_id}: resolves to {resolved.run_id} now (model, task file or default changed); skipped"
    measured_with = dict(zip(row_kinds(rows).astype(str), rows["protocol"].astype(str)))
    now = protocols_now(resolved, prepared)
    changed = {task: was for task, was in measured_with.items() if now.get(task) != was}
    if changed:
        task, was = next(iter(changed.items()))
        return f"{run_id}: {task} was measured as {was}, now {now.get(task)} (give --task-file); skipped"
    if asked.dry_run:
        return f"{run_id}: resolves to its id; {len(rows)} rows to measure again"
    fresh = measured_rows(scratch, run_id)
    if fresh.empty:
        scratch.mkdir(parents=True, exist_ok=True)
        run_cell(resolved, prepared, scratch, Reporter())
        fresh = measured_rows(scratch, run_id)
    said = []
    retrieval = rows[rows["task"] != PERPLEXITY]
    if not retrieval.empty:
        said.append(write_samples_back(folder, scratch, run_id, retrieval, fresh, asked.replace))
    perplexity = rows[rows["task"] == PERPLEXITY]
    if not perplexity.empty:
        said.append(write_intervals_back(folder, scratch, run_id, perplexity, fresh))
    return f"{run_id}: " + "; ".join(said)


def write_samples_back(
    folder: Path, scratch: Path, run_id: str, rows: pd.DataFrame, fresh: pd.DataFrame, replace: bool = False
) -> str:
    """The samples file copied in when every retrieval row came back. Where only rank rows did not (every
    greedy row came back, so every answer is the run's), the answers are written with those cells' rank
    fields empty (unknown: the rank near a tie turned), and the line says which, with their margins now.
    With `replace`, a run whose greedy rows differ has its retrieval rows replaced by the measurement's."""
    differ = differences(rows, fresh)
    rank_only = {key: line for key, line in differ.items() if key[-1] == RANK_METRIC}
    if len(rank_only) < len(differ) and replace:
        return replace_rows(folder, scratch, run_id, rows, fresh, differ)
    if len(rank_only) < len(differ):
        first = next(line for key, line in differ.items() if key not in rank_only)
        return f"{len(differ)} of {len(rows)} retrieval rows {REFUSED}, no samples written ({first})"
    target = samples_path(folder, run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not differ:  # merged by cell: a perplexity cell's documents already kept stay
        write_samples(folder, run_id, read_lines(samples_path(scratch, run_id)))
        return f"every one of {len(rows)} retrieval rows given back; samples written"
    records = read_lines(samples_path(scratch, run_id))
    turned = []
    for key, line in rank_only.items():
        cell = [r for r in records if (r["task"], r["protocol"], r["eval_len"], r.get("depth", -1.0)) == key[:4]]
        margins = ", ".join(str(r.get("rank_margin")) for r in cell)
        turned.append(f"{line}, its prompts' margins now {margins}")
        for record in cell:
            record.update(ranked_first=None, rank_margin=None)
    write_samples(folder, run_id, records)
    return (
        f"every greedy row given back, {len(turned)} rank rows otherwise; samples written without those "
        f"cells' rank ({'; '.join(turned)})"
    )


def replace_rows(
    folder: Path, scratch: Path, run_id: str, rows: pd.DataFrame, fresh: pd.DataFrame, differ: dict[tuple, str]
) -> str:
    """The run's retrieval rows in FOLDER replaced, each in its place, by the measurement's (value, n, interval
    and provenance), and the measurement's samples copied in: a new measurement of the run, said as such."""
    missing = [line for line in differ.values() if line.endswith("not measured again")]
    if missing:  # a replacement must cover every row it replaces
        return f"{len(differ)} of {len(rows)} retrieval rows {REFUSED}, nothing replaced ({missing[0]})"
    again = keyed(fresh)
    with table_lock(folder):  # a sweep still writing to the folder appends under the same lock
        table = read_table(folder / RESULTS_FILE, COLUMNS)
        columns = [c for c in COLUMNS if c not in KEY]
        table[columns] = table[columns].astype(object)  # a column older rows leave empty reads as floats
        for index, row in table.iterrows():
            if str(row["run_id"]) == run_id and row["task"] != PERPLEXITY and key_of(row) in again.index:
                table.loc[index, columns] = again.loc[key_of(row), columns].tolist()
        write_table(folder / RESULTS_FILE, table)
    write_samples(folder, run_id, read_lines(samples_path(scratch, run_id)))
    return f"{len(rows)} retrieval rows replaced by the measurement, samples written ({'; '.join(differ.values())})"


def write_intervals_back(folder: Path, scratch: Path, run_id: str, rows: pd.DataFrame, fresh: pd.DataFrame) -> str:
    """The perplexity rows get the re-measured interval (n and the t interval over their documents) and the
    samples file their documents' lines, only when every such row of the run came back with its value; the
    values stay."""
    differ = differences(rows, fresh, last_digit=True)
    if differ:
        first = next(iter(differ.values()))
        return f"{len(differ)} of {len(rows)} perplexity rows {REFUSED}, no interval written ({first})"
    documents = [r for r in read_lines(samples_path(scratch, run_id)) if r["task"] == PERPLEXITY]
    write_samples(folder, run_id, documents)
    again = keyed(fresh)
    with table_lock(folder):  # a sweep still writing to the folder appends under the same lock
        table = read_table(folder / RESULTS_FILE, COLUMNS)
        table["ci_method"] = table["ci_method"].astype(object)  # all empty before: read as floats
        for index, row in table.iterrows():
            key = key_of(row)
            if str(row["run_id"]) == run_id and row["task"] == PERPLEXITY and key in again.index:
                table.loc[index, INTERVAL_COLUMNS] = again.loc[key, INTERVAL_COLUMNS].tolist()
        write_table(folder / RESULTS_FILE, table)
    return f"every one of {len(rows)} perplexity rows given back; documents' losses and intervals written"


def has_documents(folder: Path, run_id: str) -> bool:
    """Whether the run's samples file holds its perplexity documents' losses."""
    return any(r["task"] == PERPLEXITY for r in read_lines(samples_path(folder, run_id)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument(
        "--task-file",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="the runs' task NAME (measured or trained on) read from FILE: its version when they were made",
    )
    parser.add_argument("--runs", help="only these run ids (comma-separated)")
    parser.add_argument(
        "--perplexity", action="store_true", help="also measure perplexity rows whose documents' losses are not kept"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="a run whose greedy rows do not come back gets its retrieval rows replaced by the measurement",
    )
    parser.add_argument("--dry-run", action="store_true", help="only say which runs resolve to their own id")
    args = parser.parse_args(argv)
    if any("=" not in pair for pair in args.task_file):
        parser.error("--task-file takes NAME=FILE, e.g. passkey-word=results/showcase/tasks/passkey-word-v1.toml")
    asked = Asked(dict(pair.split("=", 1) for pair in args.task_file), args.dry_run, args.replace)
    table = load_results(args.folder)
    table = table[table["status"].fillna("ok") == "ok"]
    wanted = set(args.runs.split(",")) if args.runs else None
    for run_id, rows in table.groupby(table["run_id"].astype(str), sort=False):
        if wanted is not None and run_id not in wanted:
            continue
        retrieval = rows[rows["task"] != PERPLEXITY]
        if any(r["task"] != PERPLEXITY for r in read_lines(samples_path(args.folder, run_id))):
            retrieval = retrieval.iloc[0:0]
        perplexity = rows[rows["task"] == PERPLEXITY] if args.perplexity else rows.iloc[0:0]
        if has_documents(args.folder, run_id):
            perplexity = perplexity.iloc[0:0]
        if retrieval.empty and perplexity.empty:
            print(f"{run_id}: nothing to recover")
            continue
        kinds = list(dict.fromkeys(row_kinds(rows).astype(str)))
        try:
            said = recover_run(args.folder, run_id, pd.concat([retrieval, perplexity]), kinds, asked)
        except Exception as error:  # one run that cannot be made again does not stop the others
            said = f"{run_id}: failed ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        print(said, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
