"""Give a results folder's rows the intervals of the current rules where they can be computed exactly from what
the folder holds:

- a passkey row written before rows recorded `n` (every prompt scored 0 or 1): `n` is its prompts, n_tokens /
  eval_len, and its interval Wilson's over them, as a new row would get;
- a RULER row written before rows recorded `n`: `n` is its prompts, n_tokens / eval_len; where every prompt of
  its task scores 0 or 1 (one reference a prompt under `string_match_all`, or `string_match_part`; the task
  file found in the folder's `tasks/` by the row's protocol), or its mean is 0 or 1, Wilson's interval over them
  as well. Any other partial-credit row of that time gets `n` alone: its interval needs the prompts' scores,
  which it did not keep;
- a partial-credit RULER row (`ci_method` bootstrap-prompts, or bootstrap-prompts-wilson, a rule tried and
  left on 2026-11-28): recomputed from its prompts' scores in `samples/<run_id>.jsonl` by the current rule
  (`core.intervals.score_interval`), which gives Wilson's at the mean where every prompt scored alike, as the
  bootstrap alone is zero-wide there;
- a RULER row without an interval (a partial-credit row of the time before samples were kept) whose run's
  answers are now in `samples/` (`scripts/recover_samples.py` gives them back): the same, from those scores.

- a perplexity row of one document or window (n = 1), whose bootstrap had nothing to resample and recorded a
  zero-wide interval: no interval, as the rule now gives.

Values and every other column stay; a row whose samples do not give back its value and n exactly is left as it
is and named. Perplexity rows without an interval stay without one: it needs each document's loss, which
such rows did not keep.

    python scripts/rescore_intervals.py results/smollm2-ruler-25 results/showcase
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import PROPORTION, proportion_interval, score_interval
from extrapolate.core.lock import table_lock
from extrapolate.report.table import write_table
from extrapolate.tasks.passkey import CHAT_MARK

PARTIAL_CREDIT = ("bootstrap-prompts", "bootstrap-prompts-wilson", "wilson-at-mean")
INTERVAL_COLUMNS = ["n", "ci_low", "ci_high", "ci_method"]


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


def passkey_counts(table: pd.DataFrame) -> int:
    """Fill `n` and Wilson's interval of the passkey rows that have none, in place; how many."""
    if "n_tokens" not in table:
        return 0
    missing = (table["task"] == "passkey") & (table["status"] == "ok") & table["n"].isna() & table["n_tokens"].notna()
    filled = 0
    for i in table.index[missing]:
        prompts = float(table.at[i, "n_tokens"]) / float(table.at[i, "eval_len"])
        hits = float(table.at[i, "value"]) * prompts
        if abs(prompts - round(prompts)) > 1e-9 or abs(hits - round(hits)) > 1e-6:  # not a count of prompts
            continue
        low, high = proportion_interval(round(hits), round(prompts))
        table.loc[i, ["n", "ci_low", "ci_high", "ci_method"]] = [round(prompts), low, high, "wilson"]
        filled += 1
    return filled


def binary_protocols(folder: Path) -> set[str]:
    """The identities of the folder's RULER task files whose every prompt scores 0 or 1."""
    from extrapolate.tasks.files import load_task

    binary = set()
    for path in sorted((folder / "tasks").glob("*.toml")):
        task = load_task(str(path))
        if getattr(task, "kind", "") != "ruler":
            continue
        one_answer = task.task == "niah" and task.arg("num_needle_q") * task.arg("num_needle_v") == 1
        if task.metric == "string_match_part" or (task.metric == "string_match_all" and one_answer):
            binary.add(task.identity)
    return binary


def ruler_counts(folder: Path, table: pd.DataFrame) -> int:
    """Fill `n` of the RULER rows that have none, and Wilson's interval where their task is scored 0 or 1, in
    place; how many."""
    if "n_tokens" not in table:
        return 0
    missing = (table["task"] == "ruler") & (table["status"] == "ok") & table["n"].isna() & table["n_tokens"].notna()
    if not missing.any():
        return 0
    binary, filled = binary_protocols(folder), 0
    for i in table.index[missing]:
        prompts = float(table.at[i, "n_tokens"]) / float(table.at[i, "eval_len"])
        if abs(prompts - round(prompts)) > 1e-9:
            continue
        table.loc[i, "n"] = round(prompts)
        hits = float(table.at[i, "value"]) * prompts
        # a mean of 0 or 1 is every prompt scoring it, partial credit or not
        identity = str(table.at[i, "protocol"]).removesuffix("+bos").removesuffix(CHAT_MARK)  # the marks it may carry
        scored_0_or_1 = identity in binary or hits in (0.0, prompts)
        if scored_0_or_1 and abs(hits - round(hits)) <= 1e-6:
            low, high = proportion_interval(round(hits), round(prompts))
            table.loc[i, ["ci_low", "ci_high", "ci_method"]] = [low, high, "wilson"]
        filled += 1
    return filled


def single_units(table: pd.DataFrame) -> int:
    """Clear the zero-wide interval of the perplexity rows over one unit, in place; how many."""
    one = (table["task"] == "perplexity") & (table["n"] == 1) & table["ci_low"].notna()
    table.loc[one, ["ci_low", "ci_high"]] = float("nan")  # ci_method kept: it names the unit
    return int(one.sum())


def _rescore(folder: Path) -> int:
    table = pd.read_csv(folder / "results.csv")
    added = [column for column in INTERVAL_COLUMNS if column not in table]
    for offset, column in enumerate(INTERVAL_COLUMNS):  # a table written before them: added after n_tokens
        if column in added:
            after = table.columns.get_loc("n_tokens") + 1 + offset if "n_tokens" in table else len(table.columns)
            table.insert(min(after, len(table.columns)), column, float("nan"))
    table["ci_method"] = table["ci_method"].astype(object)
    changed, kept = passkey_counts(table) + ruler_counts(folder, table) + single_units(table), []
    # partial-credit rows, and RULER rows without an interval whose answers were kept (or recovered) since
    unscored = (table["task"] == "ruler") & table["ci_low"].isna()
    unscored &= table["run_id"].astype(str).map(lambda run: (folder / "samples" / f"{run}.jsonl").exists())
    for i, row in table[table["ci_method"].isin(PARTIAL_CREDIT) | unscored].iterrows():
        try:
            scores = prompt_scores(folder, str(row["run_id"]))[(row["protocol"], int(row["eval_len"]))]
        except (OSError, KeyError):
            kept.append(f"{row['run_id']} at {row['eval_len']}: no samples")
            continue
        mean = sum(scores) / len(scores)  # the table keeps 6 significant digits
        if len(scores) != int(row["n"]) or abs(mean - float(row["value"])) > 1e-6 * max(1.0, abs(mean)):
            kept.append(f"{row['run_id']} at {row['eval_len']}: samples differ from the row")
            continue
        low, high, method = score_interval(scores)
        table.loc[i, ["ci_low", "ci_high", "ci_method"]] = [low, high, method]
        changed += 1
    if changed or added:
        write_table(folder / "results.csv", table)
    for line in kept:
        print(f"left as it is: {line}", file=sys.stderr)
    return changed


def main(argv: list[str]) -> int:
    from extrapolate.core.errors import UserError

    try:
        for name in argv:
            print(f"{name}: {rescore(Path(name))} rows given their interval")
    except (UserError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
