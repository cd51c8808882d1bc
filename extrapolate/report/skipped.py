"""The cells a table holds without a value (unsupported, oom, non-finite, diverged) and why: every such cell in a
page links to this section, so no length is left blank without its reason."""

from __future__ import annotations

import pandas as pd

NOT_MEASURED = "## Not measured"
UNRECORDED_REASON = "not recorded (measured before rows kept their reason)"


def status_cell(status: str) -> str:
    """A table cell for a measurement without a value: its status, linking to the reasons below."""
    return f"[{status}](#not-measured)"


def not_measured_section(table: pd.DataFrame) -> list[str]:
    """One line per (encoding, task, status, reason, lengths), its seeds together; [] when every cell has a
    value."""
    missing = table[table["status"].astype(str) != "ok"].copy()
    if missing.empty:
        return []
    reasons = missing["reason"] if "reason" in missing.columns else pd.Series(index=missing.index, dtype=object)
    missing["why"] = reasons.astype(object).where(reasons.notna(), UNRECORDED_REASON)
    keys = ["encoding", "task", "status", "why"]
    lines = [NOT_MEASURED, "", "| encoding | seeds | task | lengths | status | why |", "|---|---|---|---|---|---|"]
    for (encoding, task, status, why), group in missing.groupby(keys, sort=False, dropna=False):
        by_lengths: dict[str, list[int]] = {}  # seeds that miss the same lengths share a line
        for seed, rows in group.groupby("seed", sort=True):
            lengths = ", ".join(str(int(n)) for n in sorted(rows["eval_len"].unique()))
            by_lengths.setdefault(lengths, []).append(int(seed))
        for lengths, seeds in by_lengths.items():
            lines.append(f"| {encoding} | {', '.join(map(str, seeds))} | {task} | {lengths} | {status} | {why} |")
    return lines + [""]
