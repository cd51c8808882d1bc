"""Whether two results folders' generation cells gave the same answers, prompt by prompt: e.g. SmolLM2's RULER
cells computed by the native backend and by vLLM (`--backend vllm`) on the same prompts.

    python scripts/backend_parity.py results/smollm2-ruler-25 results/vllm-parity [--out parity.csv]

Prompts are matched by task protocol (the task file's identity and prompt format), length, depth and index;
a cell compares only the prompts both folders answered. Prints, per task and length, the prompts compared,
the share whose predictions are identical (every generated token: a greedy continuation that departs after
the answer counts as different), the share scored alike, and each side's mean score; then the shares over
every prompt. With
`--out`, the same table as CSV. Exit code 0 always: it measures, it does not judge."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

KEY = ["protocol", "eval_len", "depth", "index"]


def answers(folder: Path) -> pd.DataFrame:
    """Every prompt's record in a folder's samples/, one row each (depth -1 where the task has none)."""
    lines = [json.loads(line) for path in sorted((folder / "samples").glob("*.jsonl")) for line in path.open()]
    rows = [r for r in lines if "nll_sum" not in r]  # a perplexity cell's documents are no prompts
    if not rows:
        raise SystemExit(f"error: {folder}/samples holds no predictions")
    table = pd.DataFrame(rows)
    if "depth" not in table:
        table["depth"] = -1.0
    return table.assign(depth=table["depth"].fillna(-1.0))


def compared(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Per (protocol, length): prompts in both, the shares of identical predictions and of equal scores, and
    each side's mean score."""
    both = first.merge(second, on=KEY, suffixes=("_a", "_b"))
    both["same"] = both["prediction_a"] == both["prediction_b"]
    both["same_score"] = both["score_a"] == both["score_b"]
    return (
        both.groupby(["protocol", "eval_len"], sort=True)
        .agg(
            prompts=("same", "size"),
            identical=("same", "mean"),
            same_score=("same_score", "mean"),
            score_a=("score_a", "mean"),
            score_b=("score_b", "mean"),
        )
        .reset_index()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--out", type=Path, help="write the table as CSV")
    args = parser.parse_args(argv)
    table = compared(answers(args.first), answers(args.second))
    if table.empty:
        raise SystemExit("error: the two folders share no prompt (task protocol, length, depth and index)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    total = float((table["identical"] * table["prompts"]).sum() / table["prompts"].sum())
    scored = float((table["same_score"] * table["prompts"]).sum() / table["prompts"].sum())
    print(f"identical predictions: {total:.1%} of {int(table['prompts'].sum())} prompts; scored alike: {scored:.1%}")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
