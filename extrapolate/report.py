"""Tables and figures from the results table alone: the summary of a run and the report of a sweep."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .atomic import write_text
from .results import POSITIONS_FILE, aggregate, read_table, POSITION_COLUMNS


def fmt(mean: float, ci: float | None = None, status: str = "ok") -> str:
    if status != "ok":
        return status
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    text = f"{mean:.3f}" if mean < 100 else f"{mean:.1f}"
    return text + (f" ± {ci:.3f}" if ci and ci > 0 else "")


def perplexity_matrix(agg: pd.DataFrame, ratio: bool = False) -> str:
    """Markdown table: encodings × lengths (mean ± 95% interval over seeds, or the ratio to the value at L)."""
    ppl = agg[(agg["task"] == "perplexity") & (agg["metric"] == "ppl")]
    lengths = sorted(ppl["eval_len"].unique())
    header = "| encoding | L | " + " | ".join(str(n) for n in lengths) + " |"
    lines = [header, "|" + "---|" * (len(lengths) + 2)]
    for encoding, group in ppl.groupby("encoding", sort=False):
        cells = {int(r.eval_len): r for r in group.itertuples()}
        train_len = int(group["train_len"].iloc[0])
        base = cells.get(train_len)
        row = []
        for n in lengths:
            r = cells.get(int(n))
            if r is None:
                row.append("")
            elif ratio:
                ok = r.status == "ok" and base is not None and base.status == "ok"
                row.append(f"{r.mean / base.mean:.2f}×" if ok else (r.status if r.status != "ok" else "–"))
            else:
                row.append(fmt(r.mean, r.ci95, r.status))
        lines.append(f"| {encoding} | {train_len} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def effective_length(agg: pd.DataFrame, tolerance: float = 0.10) -> dict[str, int | None]:
    """Largest evaluated length whose perplexity stays within `tolerance` of the value at L (every length
    up to it included)."""
    out = {}
    ppl = agg[(agg["task"] == "perplexity") & (agg["metric"] == "ppl")]
    for encoding, group in ppl.groupby("encoding", sort=False):
        group = group.sort_values("eval_len")
        train_len = int(group["train_len"].iloc[0])
        base = group[(group["eval_len"] == train_len) & (group["status"] == "ok")]["mean"]
        best = None
        if not base.empty:
            for r in group[group["eval_len"] >= train_len].itertuples():
                if r.status != "ok" or r.mean > base.iloc[0] * (1 + tolerance):
                    break
                best = int(r.eval_len)
        out[encoding] = best
    return out


def write_run_report(folder: Path, table: pd.DataFrame) -> None:
    """summary.md and perplexity.png (+ positions.png) of a run folder."""
    from .plots import perplexity_figure, position_figure, save_figure

    agg = aggregate(table)
    ppl = agg[(agg["task"] == "perplexity") & (agg["metric"] == "ppl")]
    if not ppl.empty:
        save_figure(perplexity_figure(ppl), folder / "perplexity.png")
    positions = read_table(folder / POSITIONS_FILE, POSITION_COLUMNS)
    if len(positions):
        save_figure(position_figure(positions), folder / "positions.png")
    first = table.iloc[0]
    lines = [
        f"# Run summary: {', '.join(table['encoding'].unique())}",
        "",
        f"model `{first['model']}` ({int(first['params']):,} parameters), corpus `{first['corpus']}`, "
        f"protocol `{first['protocol']}`, device `{first['device']}`, eval dtype `{first['dtype']}`, "
        f"extrapolate {first['package_version']} ({first['git_sha']}).",
        "",
        "## Perplexity",
        "",
        perplexity_matrix(agg),
        "",
        "## Ratio to the value at the training length",
        "",
        perplexity_matrix(agg, ratio=True),
        "",
        "## Effective length (perplexity within 10% of the value at L)",
        "",
    ]
    lines += [f"- {enc}: {n if n is not None else 'none'}" for enc, n in effective_length(agg).items()]
    lines += ["", "![perplexity vs length](perplexity.png)", ""]
    write_text(folder / "summary.md", "\n".join(lines))
