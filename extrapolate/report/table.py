"""The results table: one row per measurement, long format, written atomically; seed aggregation."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from extrapolate import __version__
from extrapolate.core.atomic import atomic_path
from extrapolate.core.intervals import proportion_interval
from extrapolate.core.readers import reading
from extrapolate.core.source import git_sha
from extrapolate.report.labels import in_encoding_order
from extrapolate.report.stats import seeds_interval
from extrapolate.tasks.kinds import RENAMED_KINDS, TASK_KINDS
from extrapolate.tasks.passkey import PASSKEY

COLUMNS = [
    "run_id",
    "encoding",
    "base_encoding",
    "factor",
    "train_len",
    "eval_len",
    "task",  # the task's name: perplexity, or the task file's (passkey-word, vt, …), as --tasks names it
    "kind",  # the task kind that measured it (tasks/kinds.py): perplexity, needle, ruler
    "metric",
    "value",
    "depth",
    "seed",
    "n_tokens",
    "n",
    "ci_low",
    "ci_high",
    "ci_method",
    "protocol",
    "status",
    "reason",  # why a cell whose status is not ok has no value (a learned table's end, out of memory, …)
    "model",
    "params",
    "corpus",
    "tokenizer",
    "device",
    "machine",  # the CPU, its vector instructions, threads, card and torch: CPUs round bf16 differently
    "dtype",
    "kernel",
    "finetune_steps",
    "finetune_len",
    "finetune_adapter",
    "finetune_positions",  # "pose": the fine-tune read PoSE's rows of L with skipped ids (empty: rows of L')
    "finetune_loss",  # "longce": the fine-tune's targets weighted by LongCE (empty: cross-entropy)
    "git_sha",
    "package_version",
    "created_at",
]
# a measurement is identified by these; re-running it replaces the old row instead of duplicating it
KEY = ["run_id", "encoding", "eval_len", "task", "metric", "depth", "seed"]
POSITION_COLUMNS = [
    "run_id",
    "encoding",
    "seed",
    "train_len",
    "eval_len",
    "bucket_start",
    "bucket_end",
    "nll",
    "n_tokens",
]
RESULTS_FILE, POSITIONS_FILE = "results.csv", "positions.csv"


def provenance() -> dict:
    return {
        "git_sha": git_sha(),
        "package_version": __version__,
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# Per table written here: the columns every row fills in (the last one included, so a row cut short by a
# truncated file is caught) and the columns that hold numbers. A damaged table is then refused when it is read,
# not halfway through a report or after an hour of training whose rows would be appended to it.
@dataclass(frozen=True)
class RowChecks:
    """What every row of a table must hold: `filled` columns have a value, `numeric` ones are numbers where
    filled, `later` columns (added after tables were first written, so possibly absent) are numbers too, and
    `positive` ones (lengths, steps) are numbers above 0; `filled_where` maps (column, value) to a column that
    rows with that value must fill (a retrieval row has a depth). Every number is finite but in `unbounded`
    columns (where `ranges` say which rows may hold infinity); `whole` columns (counts) hold whole numbers;
    `ranges` bound a column, in the rows whose `where` column holds one of `values` (every row where `where`
    is empty), to [low, high]; no two rows are alike in the `unique` columns (a row copied would count as
    another seed)."""

    filled: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    positive: tuple[str, ...] = ()
    filled_where: tuple[tuple[str, str, str], ...] = ()
    whole: tuple[str, ...] = ()
    unbounded: tuple[str, ...] = ()
    ranges: tuple[tuple[str, str, tuple[str, ...], float, float], ...] = ()
    unique: tuple[str, ...] = ()  # what identifies a row: two rows alike in these are one measurement twice


PROPORTIONS = ("accuracy", "rank_accuracy", "score")  # retrieval metrics: a share of prompts, or a mean credit


ROW_CHECKS = {
    RESULTS_FILE: RowChecks(
        ("run_id", "encoding", "train_len", "eval_len", "task", "metric", "seed", "status", "created_at"),
        ("factor", "train_len", "eval_len", "value", "depth", "seed", "n_tokens", "params"),
        ("finetune_steps", "finetune_len", "n", "ci_low", "ci_high"),
        ("train_len", "eval_len"),
        filled_where=(("kind", PASSKEY.name, "depth"),),  # a retrieval row is one depth's
        whole=("n", "n_tokens", "seed", "train_len", "eval_len"),
        unbounded=("value",),  # a perplexity can overflow; a share cannot
        ranges=(
            ("value", "metric", PROPORTIONS, 0.0, 1.0),
            ("value", "metric", ("ppl",), 1.0, math.inf),  # exp of a cross-entropy, which is at least 0
            ("value", "metric", ("nll",), 0.0, math.inf),
            ("depth", "", (), 0.0, 1.0),  # where in the context, as a fraction of it
            ("n", "", (), 0.0, math.inf),
            ("n_tokens", "", (), 0.0, math.inf),
            ("seed", "", (), 0.0, math.inf),
        ),
        unique=tuple(KEY),
    ),
    POSITIONS_FILE: RowChecks(
        ("run_id", "encoding", "seed", "train_len", "eval_len", "bucket_start", "n_tokens"),
        ("seed", "train_len", "eval_len", "bucket_start", "bucket_end", "nll", "n_tokens"),
        positive=("train_len", "eval_len"),
        whole=("seed", "train_len", "eval_len", "bucket_start"),
        unique=("run_id", "encoding", "seed", "eval_len", "bucket_start"),
    ),
}


def read_table(path: Path, columns: list[str], checks: RowChecks | None = None) -> pd.DataFrame:
    """The table at `path` (empty with `columns` if there is none), refused in one line when a row breaks
    `checks` (by default the file name's entry in ROW_CHECKS)."""
    if not path.exists():
        return pd.DataFrame(columns=columns)
    with reading(path, "table"):
        # a run id is ten hex digits: read as text, or "0123456789" and "12e4567890" would come back as numbers
        frame = pd.read_csv(path, keep_default_na=True, dtype={"run_id": str})
        if "kind" in columns:  # the results table, perhaps written before its rows named their task files
            frame = with_task_names(frame)
        check_table(frame, checks or ROW_CHECKS.get(path.name, RowChecks()))
    # a table written before a column existed reads with that column empty (NaN), in its place
    return frame.reindex(columns=columns + [c for c in frame.columns if c not in columns])


TASK_FILE_NAME = re.compile(r"^(?P<name>.+)-v\d+-")  # a task's identity: "<name>-v<version>-<variant>-<hash>"


def task_of_protocol(protocol) -> str | None:
    """The task's name at the head of a retrieval row's protocol (its task's identity), or None."""
    match = TASK_FILE_NAME.match(str(protocol))
    return match.group("name") if match else None


def row_kinds(frame: pd.DataFrame) -> pd.Series:
    """Each row's task kind: its `kind` column where filled; a row written before that column existed held its
    kind in `task`, perhaps under the kind's earlier name (RENAMED_KINDS)."""
    legacy = frame["task"].astype(object).map(lambda task: RENAMED_KINDS.get(task, task))
    if "kind" not in frame.columns:
        return legacy
    return frame["kind"].astype(object).where(frame["kind"].notna(), legacy)


def of_kind(frame: pd.DataFrame, kind) -> pd.Series:
    """Whether each row was measured by `kind` (a TaskKind)."""
    return row_kinds(frame) == kind.name


def with_task_names(frame: pd.DataFrame) -> pd.DataFrame:
    """A results table as rows are written now: `kind` filled, and `task` the task file's name for a retrieval
    row. Rows written before held the kind in `task` ("passkey" for every retrieval task, "ruler" for RULER's);
    the task's name is the head of the row's protocol (the task's identity)."""
    if "task" not in frame.columns:
        return frame
    kinds = row_kinds(frame)
    legacy = frame["kind"].isna() if "kind" in frame.columns else pd.Series(True, index=frame.index)
    reads_file = kinds.map(lambda kind: kind in TASK_KINDS and TASK_KINDS.get(kind).reads_task_file)
    protocols = frame["protocol"] if "protocol" in frame.columns else pd.Series(None, index=frame.index)
    names = protocols.astype(object).map(task_of_protocol)
    renamed = legacy & reads_file & names.notna()
    return frame.assign(kind=kinds, task=frame["task"].astype(object).where(~renamed, names))


def check_table(frame: pd.DataFrame, checks: RowChecks) -> None:
    filled = list(checks.filled)
    missing = [c for c in dict.fromkeys(filled + list(checks.numeric)) if c not in frame.columns]
    if missing:
        raise ValueError(f"no column '{missing[0]}'")
    empty = frame[filled].isna().any(axis=1)
    if empty.any():
        raise ValueError(f"line {int(empty.to_numpy().argmax()) + 2} is incomplete")  # + header, 1-based
    for column in [*checks.numeric, *(c for c in checks.later if c in frame.columns)]:
        values = frame[column]
        numbers = pd.to_numeric(values, errors="coerce")
        if numbers.isna().sum() > values.isna().sum():
            raise ValueError(f"column '{column}' holds a value that is not a number")
        if column not in checks.unbounded:
            refuse(numbers.abs() == math.inf, f"{column} is infinite")
        if column in checks.whole:
            refuse(numbers.notna() & (numbers != numbers.round()), f"{column} must be a whole number")
    for column in checks.positive:
        below = pd.to_numeric(frame[column]) <= 0
        if below.any():
            raise ValueError(f"line {int(below.to_numpy().argmax()) + 2}: {column} must be above 0")
    for column, value, needed in checks.filled_where:
        if column in frame.columns:
            empty = (frame[column].astype(object) == value) & frame.get(needed, pd.Series(index=frame.index)).isna()
            if empty.any():
                raise ValueError(f"line {int(empty.to_numpy().argmax()) + 2}: a {column} '{value}' row has no {needed}")
    for column, where, values, low, high in checks.ranges:
        if column in frame.columns and (not where or where in frame.columns):
            numbers = pd.to_numeric(frame[column], errors="coerce")
            rows = frame[where].isin(values) if where else pd.Series(True, index=frame.index)
            broken = rows & ((numbers < low) | (numbers > high))
            if broken.any():
                named = f"{column} of a '{frame[where][broken].iloc[0]}' row" if where else column
                bounds = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
                refuse(broken, f"{named} must be {bounds}")
    if checks.unique and set(checks.unique) <= set(frame.columns):
        # compared as text, so two empty depths (NaN, never equal as numbers) read alike
        key = frame[list(checks.unique)].astype(str)
        repeated = key.duplicated()
        if repeated.any():
            line = int(repeated.to_numpy().argmax())
            first = int((key == key.iloc[line]).all(axis=1).to_numpy().argmax())
            refuse(repeated, f"the measurement of line {first + 2} again ({', '.join(checks.unique)} alike)")


def refuse(broken: pd.Series, what: str) -> None:
    """A table whose rows break a rule, refused at its first such line (+ header, 1-based)."""
    if broken.any():
        raise ValueError(f"line {int(broken.to_numpy().argmax()) + 2}: {what}")


def write_table(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")


def with_numbers(frame: pd.DataFrame, checks: RowChecks) -> pd.DataFrame:
    """New rows with their number columns as numbers, as the table reads back: a column the rows leave empty
    (None) is then NaN, not text, and pandas 2 and 3 give the merged table the same dtypes (one writes a float
    column joined to an empty text one as text: "2.0" where the other writes "2")."""
    for column in dict.fromkeys((*checks.numeric, *checks.later)):
        if column in frame.columns:
            frame[column] = pd.to_numeric(frame[column])
    return frame


def merge_rows(path: Path, rows: list[dict], columns: list[str], key: list[str]) -> pd.DataFrame:
    """Append rows, replacing earlier rows with the same key; the file is replaced atomically."""
    old = read_table(path, columns)
    new = with_numbers(pd.DataFrame(rows, columns=columns), ROW_CHECKS.get(path.name, RowChecks()))
    kept = old[~key_strings(old, key).isin(set(key_strings(new, key)))] if len(old) else old
    # an empty side is left out rather than concatenated: its dtypes would decide nothing (pandas 2 warns)
    parts = [part for part in (kept, new) if len(part)]
    frame = pd.concat(parts, ignore_index=True) if len(parts) == 2 else (parts[0] if parts else new)
    write_table(path, frame)
    return frame


def _key_part(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def key_strings(frame: pd.DataFrame, key: list[str]) -> pd.Series:
    """One comparable string per row; the same value read back from CSV gives the same string."""
    return pd.Series(
        ["|".join(_key_part(v) for v in row) for row in frame[key].itertuples(index=False)],
        index=frame.index,
        dtype=object,
    )


def append_results(folder: Path, rows: list[dict]) -> pd.DataFrame:
    return merge_rows(folder / RESULTS_FILE, rows, COLUMNS, KEY)


def append_positions(folder: Path, rows: list[dict]) -> pd.DataFrame:
    return merge_rows(
        folder / POSITIONS_FILE, rows, POSITION_COLUMNS, ["run_id", "encoding", "seed", "eval_len", "bucket_start"]
    )


def load_results(folder: Path) -> pd.DataFrame:
    return in_encoding_order(read_table(folder / RESULTS_FILE, COLUMNS))


def pooled_prompts(group: pd.DataFrame, metric: str) -> tuple[float, float] | None:
    """(summed score, prompts) of a retrieval cell's seeds, where every row recorded its prompts (the floor of
    the interval over seeds, report/stats.py; a mean of partial credit sums its credit); None otherwise."""
    if metric not in ("accuracy", "rank_accuracy", "score") or group["n"].isna().any():
        return None
    n = group["n"].astype(float)
    return float((group["value"].astype(float) * n).sum()), float(n.sum())


def aggregate(frame: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Mean and 95% interval of `value` for every other key; ok rows only. Over several seeds: the Student t
    interval of the seeds' values (`ci95`, its half-width; `interval` "seeds"); over one seed: the row's own
    interval over its prompts or documents (`low`, `high`; `interval` "within", `ci95` 0), where it has one.
    `n`: the prompts or documents a seed's value is over. Cells whose seeds are all unsupported keep that
    status."""
    by = by or ["encoding", "train_len", "eval_len", "task", *(["kind"] if "kind" in frame else []), "metric", "depth"]
    frame = frame.copy()
    if "depth" in frame:
        # numeric first: a column of depths and Nones is of object dtype, whose fillna pandas 2 warns about
        frame["depth"] = pd.to_numeric(frame["depth"], errors="coerce").fillna(-1)
    for column in ("n", "ci_low", "ci_high"):  # a table written before the intervals were
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else float("nan")
    ok = frame[frame["status"] == "ok"]
    rows = []
    for key, group in ok.groupby(by, dropna=False):
        values = group["value"].astype(float)
        n, mean = len(values), float(values.mean())
        if n > 1:
            metric = str(group["metric"].iloc[0]) if "metric" in group else ""
            mean, half, low, high = seeds_interval(values, metric, pooled_prompts(group, metric))
            interval = "seeds"
        else:
            half, low, high = 0.0, float(group["ci_low"].iloc[0]), float(group["ci_high"].iloc[0])
            interval = "none" if math.isnan(low) else "within"
        rows.append(
            {
                **dict(zip(by, key)),
                "mean": mean,
                "ci95": half,
                "low": low,
                "high": high,
                "interval": interval,
                "n": float(group["n"].mean()),
                "n_seeds": n,
                "status": "ok",
            }
        )
    done = {tuple(r[k] for k in by) for r in rows}
    for key, group in frame[frame["status"] != "ok"].groupby(by, dropna=False):
        if tuple(key) not in done:
            nan = float("nan")
            rows.append(
                {
                    **dict(zip(by, key)),
                    **dict(mean=nan, ci95=nan, low=nan, high=nan, interval="none", n=nan, n_seeds=0),
                    "status": group["status"].iloc[0],
                }
            )
    out = pd.DataFrame(rows, columns=by + AGGREGATE_COLUMNS)
    if "depth" in by:
        out["depth"] = out["depth"].replace(-1, float("nan"))
    out = out.sort_values(by).reset_index(drop=True)
    return in_encoding_order(out).reset_index(drop=True) if "encoding" in by else out


AGGREGATE_COLUMNS = ["mean", "ci95", "low", "high", "interval", "n", "n_seeds", "status"]


def length_means(table: pd.DataFrame, kind, metric: str) -> pd.DataFrame:
    """A retrieval metric per (encoding, train_len, eval_len), averaged over depths: each seed's mean over its
    depths, then over one seed the exact interval of every prompt of the length pooled (`n` of them), over
    several the Student t interval of the seeds' means. Columns: encoding, train_len, eval_len, mean, low,
    high, n, n_seeds; ok rows only."""
    rows = table[of_kind(table, kind) & (table["metric"] == metric) & (table["status"] == "ok")].copy()
    columns = ["encoding", "train_len", "eval_len", "mean", "low", "high", "n", "n_seeds"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    n = pd.to_numeric(rows["n"], errors="coerce") if "n" in rows else pd.Series(float("nan"), index=rows.index)
    # a row written before `n` was: a retrieval row's n_tokens are its prompts × the length
    n = n.fillna(pd.to_numeric(rows["n_tokens"], errors="coerce") / rows["eval_len"].astype(float))
    rows = rows.assign(n=n, hits=rows["value"].astype(float) * n)
    rows = rows[rows["value"].astype(float).notna()]  # a row with no value is no measurement
    if rows.empty:
        return pd.DataFrame(columns=columns)
    key = ["encoding", "train_len", "eval_len"]
    grouped = rows.groupby([*key, "seed"], sort=False)
    seeds = grouped.agg(mean=("value", "mean")).assign(
        hits=grouped["hits"].sum(min_count=1),
        n=grouped["n"].sum(min_count=1),  # NaN where no row recorded n
    )
    out = []
    for cell, group in seeds.groupby(level=[0, 1, 2], sort=False):
        count, mean = len(group), float(group["mean"].mean())
        if count > 1:
            pooled = None if group["n"].isna().any() else (float(group["hits"].sum()), float(group["n"].sum()))
            _, _, low, high = seeds_interval(group["mean"], metric, pooled)
        else:
            total = float(group["n"].iloc[0])
            low, high = proportion_interval(float(group["hits"].iloc[0]), total) if total > 0 else (math.nan, math.nan)
        out.append([*cell, mean, low, high, float(group["n"].mean()), count])
    return pd.DataFrame(out, columns=columns)


PPL_TOLERANCE = 0.10  # effective length: perplexity within 10% of the value at L
