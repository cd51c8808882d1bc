"""LongPPL's view of a results table: per model label and length, the perplexity over the key tokens with its
95% interval (over documents for one seed, over the seeds for several) and the key tokens' share."""

from __future__ import annotations

import math

import pandas as pd

from extrapolate.report.table import aggregate, of_kind
from extrapolate.tasks.longppl import LONGPPL


def longppl_cells(table: pd.DataFrame) -> pd.DataFrame:
    """(label, protocol, eval_len, metric) -> mean over seeds, low, high, n_seeds; measured rows only."""
    rows = table[of_kind(table, LONGPPL)]
    if rows.empty:
        return pd.DataFrame(columns=["encoding", "protocol", "eval_len", "metric", "mean", "low", "high", "n_seeds"])
    return aggregate(rows, ["encoding", "protocol", "eval_len", "metric"])


def longppl_section(table: pd.DataFrame) -> list[str]:
    """Markdown: a table per LongPPL protocol, a row per model label, a cell per length: LongPPL [interval]
    (key share). Empty when the table has no LongPPL rows."""
    cells = longppl_cells(table)
    if cells.empty:
        return []
    lines = [
        "## LongPPL",
        "",
        "Perplexity over the key tokens only (the model its own evaluator: a target whose loss falls by more "
        "than 2 nats with the whole window against the short context, to below 2), [its 95% interval], and "
        "(the key tokens' share of the targets past the short context); – where no target was key.",
    ]
    lengths = sorted(int(n) for n in cells["eval_len"].unique())
    for protocol, group in cells.groupby("protocol", sort=False):
        lines += ["", f"### {protocol}", "", "| encoding | " + " | ".join(map(str, lengths)) + " |"]
        lines.append("|" + "---|" * (len(lengths) + 1))
        for label, rows in group.groupby("encoding", sort=False):
            at = {(int(r.eval_len), r.metric): r for r in rows.itertuples()}
            lines.append(f"| {label} | " + " | ".join(cell_text(at, n) for n in lengths) + " |")
    return lines + [""]


def cell_text(at: dict, length: int) -> str:
    value, share = (at.get((length, metric)) for metric in LONGPPL.metrics)  # the perplexity, the key share
    shown = "–" if value is None or math.isnan(value.mean) else f"{value.mean:.2f}"
    if value is not None and not math.isnan(value.low):
        shown += f" [{value.low:.2f}–{value.high:.2f}]"
    if share is None or math.isnan(share.mean):
        return shown
    percent = 100 * share.mean  # a share below 0.1% with two significant digits, not as 0.0%
    return f"{shown} ({percent:.1f}%)" if percent == 0 or percent >= 0.1 else f"{shown} ({percent:.2g}%)"
