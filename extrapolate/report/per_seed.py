"""The per-seed table of a folder of several seeds: each seed is a model of its own, so every claim across seeds
starts from these cells (the page's other tables are means over the seeds, with the interval over them).

Per encoding and seed: perplexity at L (with its interval over documents where kept), its ratio at the longest
length measured to its value at L, and greedy retrieval at L and at the longest length, the depths of one model
pooled with the exact interval over their prompts.
"""

from __future__ import annotations

import pandas as pd

from extrapolate.core.intervals import proportion_interval
from extrapolate.report.table import of_kind
from extrapolate.tasks.passkey import PASSKEY
from extrapolate.tasks.perplexity import PERPLEXITY


def per_seed_section(table: pd.DataFrame) -> list[str]:
    """The page's "Per seed" section; none for a folder of one seed."""
    ok = table[table["status"] == "ok"]
    if ok["seed"].nunique() < 2:
        return []
    ppl = ok[of_kind(ok, PERPLEXITY) & (ok["metric"] == "ppl")]
    greedy = ok[of_kind(ok, PASSKEY) & (ok["metric"] == "accuracy")]
    longest = int(ok["eval_len"].max())
    lines = [
        "## Per seed",
        "",
        f"Each seed a model of its own: perplexity at L (95% interval over its documents where kept), at {longest} "
        f"over its value at L, and greedy retrieval at L and at {longest} (its depths pooled, exact 95% interval over "
        "the prompts).",
        "",
        f"| encoding | seed | perplexity at L | at {longest} ÷ at L | greedy at L | greedy at {longest} |",
        "|---|---|---|---|---|---|",
    ]
    for (encoding, seed), rows in ok.groupby(["encoding", "seed"], sort=False):
        L = int(rows["train_len"].iloc[0])
        mine = ppl[(ppl["encoding"] == encoding) & (ppl["seed"] == seed)].set_index("eval_len")
        at_l = mine.loc[L] if L in mine.index else None
        ratio = (
            f"{mine.loc[longest, 'value'] / at_l['value']:.2f}×" if at_l is not None and longest in mine.index else "–"
        )
        retrieval = greedy[(greedy["encoding"] == encoding) & (greedy["seed"] == seed)]
        lines.append(
            f"| {encoding} | {int(seed)} | {_perplexity(at_l)} | {ratio} | {_greedy(retrieval, L)} | "
            f"{_greedy(retrieval, longest)} |"
        )
    return lines + [""]


def _perplexity(row) -> str:
    if row is None:
        return "–"
    if pd.isna(row.get("ci_low")):
        return f"{row['value']:.3f}"
    return f"{row['value']:.3f} [{row['ci_low']:.1f}–{row['ci_high']:.1f}]"


def _greedy(rows: pd.DataFrame, length: int) -> str:
    at = rows[(rows["eval_len"] == length) & rows["n"].notna()]
    if at.empty:
        return "–"
    n = float(at["n"].sum())
    hits = float((at["value"] * at["n"]).sum())
    low, high = proportion_interval(hits, n)
    return f"{hits / n:.0%} [{low * 100:.0f}–{high * 100:.0f}]"
