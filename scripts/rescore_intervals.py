"""Give a results folder's rows the intervals of the current rules (core/intervals.py), wherever the folder
holds what they need:

- a retrieval row (passkey or RULER) with its `n` prompts: the proportion's interval at its mean, which needs
  only the mean and n (`wilson-cc` where every prompt scores 0 or 1: a passkey, a RULER task scored 0 or 1 by
  its file or by its samples; `wilson-cc-at-mean` where some are partial credit);
- a retrieval row written before rows recorded `n`: `n` is its prompts, n_tokens / eval_len, then as above;
- a perplexity row whose documents' losses are in `samples/<run_id>.jsonl` (kept since 2026-12-04, or given
  back by `scripts/recover_samples.py --perplexity`): n documents and the t interval over them;
- a perplexity row without them: its interval of an earlier rule (a bootstrap over documents, which does not
  cover at a few) is cleared, `n` kept; the folder's README says its rows predate the documents' losses.

Values and every other column stay; a row whose samples do not give back its value is left as it is and named.

    python scripts/rescore_intervals.py results/smollm2-ruler-25 results/showcase
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import AT_MEAN, DOCUMENTS, PROPORTION, nll_interval, proportion_interval
from extrapolate.core.lock import table_lock
from extrapolate.report.samples import load_documents, load_samples
from extrapolate.report.table import PROPORTIONS, of_kind, write_table
from extrapolate.tasks.passkey import CHAT_MARK, PASSKEY

INTERVAL_COLUMNS = ["n", "ci_low", "ci_high", "ci_method"]
CELL = ["run_id", "protocol", "eval_len"]


def rescore(folder: Path) -> int:
    with table_lock(folder):  # a sweep still writing to the folder appends under the same lock
        return _rescore(Path(folder))


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


def fill_prompts(table: pd.DataFrame) -> None:
    """`n` of the retrieval rows written before rows recorded it: their prompts, n_tokens / eval_len."""
    if "n_tokens" not in table:
        return
    missing = table["metric"].isin(PROPORTIONS) & (table["status"] == "ok") & table["n"].isna()
    for i in table.index[missing & table["n_tokens"].notna()]:
        prompts = float(table.at[i, "n_tokens"]) / float(table.at[i, "eval_len"])
        if abs(prompts - round(prompts)) <= 1e-9:
            table.at[i, "n"] = round(prompts)


def scored_0_or_1(folder: Path, table: pd.DataFrame) -> pd.Series:
    """Per row: whether every prompt of its cell scores 0 or 1: a passkey; a RULER task by its file, else by
    the cell's kept answers, else by the interval it recorded (Wilson's was given to 0-or-1 cells only)."""
    binary = binary_protocols(folder)
    samples = load_samples(folder)
    answers: dict[tuple, bool] = {}
    if not samples.empty and "score" in samples:
        zero_one = samples["score"].isin([0.0, 1.0])
        for key, group in zero_one.groupby([samples[c].astype(str) for c in ("run_id", "protocol", "eval_len")]):
            answers[key] = bool(group.all())
    out = []
    needle = of_kind(table, PASSKEY)  # every needle answer is right or wrong
    for row in table.itertuples():
        identity = str(row.protocol).removesuffix("+bos").removesuffix(CHAT_MARK)
        cell = (str(row.run_id), str(row.protocol), str(int(row.eval_len)))
        if needle[row.Index] or identity in binary:
            out.append(True)
        elif cell in answers:
            out.append(answers[cell])
        else:
            out.append(str(row.ci_method) in ("wilson", PROPORTION))
    return pd.Series(out, index=table.index, dtype=bool)


def retrieval_intervals(folder: Path, table: pd.DataFrame) -> int:
    rows = table["metric"].isin(PROPORTIONS) & (table["status"] == "ok") & table["n"].notna()
    rows &= pd.to_numeric(table["value"], errors="coerce").notna()
    binary = scored_0_or_1(folder, table[rows])
    for i in table.index[rows]:
        n, value = float(table.at[i, "n"]), float(table.at[i, "value"])
        low, high = proportion_interval(value * n, n)
        table.loc[i, ["ci_low", "ci_high", "ci_method"]] = [low, high, PROPORTION if binary[i] else AT_MEAN]
    return int(rows.sum())


def perplexity_intervals(folder: Path, table: pd.DataFrame, kept: list[str]) -> int:
    documents = load_documents(folder)
    cells = {}
    if not documents.empty:
        for key, group in documents.groupby(CELL):
            group = group.sort_values("index")
            cells[(str(key[0]), str(key[1]), int(key[2]))] = (group["nll_sum"].tolist(), group["tokens"].tolist())
    rows = (table["task"] == "perplexity") & table["metric"].isin(["nll", "ppl"])
    changed = 0
    for i in table.index[rows]:
        cell = (str(table.at[i, "run_id"]), str(table.at[i, "protocol"]), int(table.at[i, "eval_len"]))
        if cell not in cells:
            if pd.notna(table.at[i, "ci_low"]) or pd.notna(table.at[i, "ci_method"]):
                table.loc[i, ["ci_low", "ci_high", "ci_method"]] = [math.nan, math.nan, None]  # an earlier rule's
                changed += 1
            continue
        nll, tokens = cells[cell]
        mean = sum(nll) / sum(tokens)
        low, high = nll_interval(nll, tokens)
        value = float(table.at[i, "value"])
        exp = table.at[i, "metric"] == "ppl"
        if abs((math.exp(mean) if exp else mean) - value) > 2e-5 * max(1.0, abs(value)):
            kept.append(f"{cell[0]} at {cell[2]}: documents give {mean:g}, the row {value:g}")
            continue
        if exp:
            low, high = math.exp(low), math.exp(high)
        method = DOCUMENTS if len(nll) > 1 else None
        table.loc[i, INTERVAL_COLUMNS] = [len(nll), low, high, method]
        changed += 1
    return changed


def _rescore(folder: Path) -> int:
    table = pd.read_csv(folder / "results.csv")
    for offset, column in enumerate(INTERVAL_COLUMNS):  # a table written before them: added after n_tokens
        if column not in table:
            after = table.columns.get_loc("n_tokens") + 1 + offset if "n_tokens" in table else len(table.columns)
            table.insert(min(after, len(table.columns)), column, float("nan"))
    table["ci_method"] = table["ci_method"].astype(object)
    kept: list[str] = []
    fill_prompts(table)
    changed = retrieval_intervals(folder, table) + perplexity_intervals(folder, table, kept)
    write_table(folder / "results.csv", table)
    for line in kept:
        print(f"left as it is: {line}", file=sys.stderr)
    return changed


def main(argv: list[str]) -> int:
    from extrapolate.core.errors import UserError

    try:
        for name in argv:
            if not (Path(name) / "results.csv").is_file():
                raise UserError(f"{name} holds no results.csv")
            print(f"{name}: {rescore(Path(name))} rows given their interval")
    except (UserError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
