"""The chat template's effect, prompt by prompt: a folder holding a RULER or passkey cell both plain and under
`--chat-template` (the protocol marked `+chat`) asked the same prompts twice, so the difference is measured
on each prompt and its interval is the paired one (`core.intervals.paired_difference`), not the overlap of
two cells' own intervals. Each cell also gets the exact sign-flip p-value of its difference and that p-value
adjusted by Holm's method over every cell of the folder (`core.significance`): with dozens of cells, some
intervals exclude 0 by chance, and only the adjusted p-value speaks for the family."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import paired_difference
from extrapolate.core.significance import holm, sign_flip_p
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
    "p",
    "p_holm",
]
FAMILY_LEVEL = 0.05  # a cell moves over the whole family where its Holm-adjusted p-value is below this


def chat_differences(folder: Path) -> pd.DataFrame:
    """One row per cell measured both ways (same protocol but for `+chat`, length and depth, one encoding's
    run each): the means of the prompts both kept, plain and +chat, and +chat − plain with its paired 95%
    interval, its exact sign-flip p-value (`p`) and that p-value adjusted by Holm's method over every cell in
    the frame (`p_holm`). Prompts are matched by index; a cell whose two sides hold other prompts is left out."""
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
        rows.append(
            {
                "run_id": answered["run_id"].iloc[0],
                "chat_run_id": asked["run_id"].iloc[0],
                "protocol": key[0],
                "eval_len": int(key[1]),
                "depth": None if key[2] < 0 else key[2],
                "plain": float(both["score_plain"].mean()),
                "chat": float(both["score_chat"].mean()),
                **paired_cell(both["score_plain"], both["score_chat"]),
            }
        )
    frame = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    frame["p_holm"] = holm(frame["p"].tolist())
    return frame


def paired_cell(first: pd.Series, second: pd.Series) -> dict:
    """second − first over the same prompts (in the same order): the prompts (`n`), the mean difference with
    its paired 95% interval (`difference`, `low`, `high`) and its exact sign-flip p-value (`p`)."""
    mean, low, high = paired_difference(first, second)
    return {"n": len(first), "difference": mean, "low": low, "high": high, "p": sign_flip_p(list(first), list(second))}


def moved(row) -> bool:
    """Whether a paired interval excludes no change (a cell on its own, at 95%)."""
    return bool(row["low"] > 0 or row["high"] < 0)


def moved_over_family(row) -> bool:
    """Whether a cell moves once every cell of its folder is accounted for (Holm, family-wise 5%)."""
    return bool(row["p_holm"] < FAMILY_LEVEL)


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
        "plain, score × 100, with the 95% interval of the mean per-prompt difference (paired: each direction's "
        "moves by the exact interval, combined by square-and-add); † marks an interval that excludes 0. With "
        "many cells at 95%, about one in twenty would by chance alone, so each cell also has the exact "
        "sign-flip p-value of its difference (McNemar's "
        f"test where every score is 0 or 1) adjusted by Holm's method over the {len(frame)} cells: ‡ marks a "
        f"cell below {FAMILY_LEVEL:g} there, a change the family of cells supports as a whole.",
        "",
        "| task | length | n | plain | +chat | +chat − plain | p | p (Holm) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.to_dict("records"):
        mark = (" †" if moved(row) else "") + (" ‡" if moved_over_family(row) else "")
        length = str(row["eval_len"]) + ("" if row["depth"] is None else f" (depth {row['depth']:g})")
        lines.append(
            f"| `{row['protocol']}` | {length} | {row['n']} | {100 * row['plain']:.1f} | "
            f"{100 * row['chat']:.1f} | {100 * row['difference']:+.1f} [{100 * row['low']:+.1f}, "
            f"{100 * row['high']:+.1f}]{mark} | {p_value(row['p'])} | {p_value(row['p_holm'])} |"
        )
    return lines + [""]


def p_value(p: float) -> str:
    if p != p:
        return "–"
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"
