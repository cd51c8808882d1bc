"""The chat template's effect, prompt by prompt: a folder holding a RULER or passkey cell both plain and under
`--chat-template` (the protocol marked `+chat`) asked the same prompts twice, so the difference is measured
on each prompt and its interval is the paired one (`core.intervals.paired_difference`), not the overlap of
two cells' own intervals."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import paired_difference
from extrapolate.report.samples import load_samples
from extrapolate.tasks.passkey import CHAT_MARK

PAIRED_COLUMNS = [
    "run_id",
    "chat_run_id",
    "protocol",
    "eval_len",
    "depth",
    "n",
    "plain",
    "chat",
    "difference",
    "low",
    "high",
]


def chat_differences(folder: Path) -> pd.DataFrame:
    """One row per cell measured both ways (same protocol but for `+chat`, length and depth, one encoding's
    run each): the means of the prompts both kept, plain and +chat, and +chat − plain with its paired 95%
    interval. Prompts are matched by index; a cell whose two sides hold other prompts is left out."""
    samples = load_samples(folder)
    if samples.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    samples = samples.assign(
        depth=samples["depth"] if "depth" in samples else float("nan"),
        chat=samples["protocol"].str.endswith(CHAT_MARK),
        base=samples["protocol"].str.removesuffix(CHAT_MARK),
    )
    samples["depth"] = samples["depth"].fillna(-1.0)  # a RULER cell is one length: no depth
    cell = ["base", "eval_len", "depth"]
    plain, chat = samples[~samples["chat"]], samples[samples["chat"]]
    rows = []
    for key, asked in chat.groupby(cell, sort=True):
        answered = plain[(plain[cell] == pd.Series(key, index=cell)).all(axis=1)]
        if answered.empty or answered["run_id"].nunique() != 1 or asked["run_id"].nunique() != 1:
            continue
        both = answered.merge(asked, on="index", suffixes=("_plain", "_chat"))  # the prompts both sides kept
        if both.empty or both["reference_plain"].astype(str).ne(both["reference_chat"].astype(str)).any():
            continue  # not the same prompts: nothing to pair
        mean, low, high = paired_difference(both["score_plain"], both["score_chat"])
        rows.append(
            {
                "run_id": answered["run_id"].iloc[0],
                "chat_run_id": asked["run_id"].iloc[0],
                "protocol": key[0],
                "eval_len": int(key[1]),
                "depth": None if key[2] < 0 else key[2],
                "n": len(both),
                "plain": float(both["score_plain"].mean()),
                "chat": float(both["score_chat"].mean()),
                "difference": mean,
                "low": low,
                "high": high,
            }
        )
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def moved(row) -> bool:
    """Whether a paired interval excludes no change."""
    return bool(row["low"] > 0 or row["high"] < 0)


def chat_section(folder: Path) -> list[str]:
    """The report's table of the chat template's effect, cell by cell (× 100), or nothing where no cell was
    measured both ways."""
    frame = chat_differences(folder)
    if frame.empty:
        return []
    lines = [
        "## The chat template, prompt by prompt",
        "",
        f"Cells measured both plain and under the chat template (`{CHAT_MARK}`) on the same prompts: +chat − "
        "plain, score × 100, with the 95% interval of the mean per-prompt difference (a bootstrap over the "
        "prompts, paired). † marks an interval that excludes 0. With many cells at 95%, about one in twenty "
        "would by chance alone.",
        "",
        "| task | length | n | plain | +chat | +chat − plain |",
        "|---|---|---|---|---|---|",
    ]
    for row in frame.to_dict("records"):
        mark = " †" if moved(row) else ""
        length = str(row["eval_len"]) + ("" if row["depth"] is None else f" (depth {row['depth']:g})")
        lines.append(
            f"| `{row['protocol']}` | {length} | {row['n']} | {100 * row['plain']:.1f} | "
            f"{100 * row['chat']:.1f} | {100 * row['difference']:+.1f} [{100 * row['low']:+.1f}, "
            f"{100 * row['high']:+.1f}]{mark} |"
        )
    return lines + [""]
