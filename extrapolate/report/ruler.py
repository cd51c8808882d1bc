"""RULER's view of a results table: each task's score per length, the RULER average per length, and the
effective length — the longest length up to which the score stays at or above the threshold at every length
measured (RULER's default bar: 85.6, Llama-2-7B's average at 4k). Scores print × 100, as RULER prints them."""

from __future__ import annotations

import math
import re

import pandas as pd

from extrapolate.tasks.ruler.kind import RULER
from extrapolate.tasks.ruler.task import DEFAULT_THRESHOLD

IDENTITY = re.compile(r"^(?P<task>.+)-v\d+-ruler-[0-9a-f]{8}")
AVERAGE = "RULER average"


def task_name(protocol: str) -> str:
    """The task file's name in a RULER row's protocol (its identity, perhaps marked +chat or +bos)."""
    match = IDENTITY.match(str(protocol))
    return match.group("task") if match else str(protocol)


def ruler_scores(table: pd.DataFrame) -> pd.DataFrame:
    """(model label, task, length) -> mean score (0–1) over the table's seeds, measured rows only; columns
    label, task, eval_len, score."""
    rows = table[(table["task"] == RULER.name) & (table["metric"] == "score") & (table["status"] == "ok")]
    if rows.empty:
        return pd.DataFrame(columns=["label", "task", "eval_len", "score"])
    rows = rows.assign(task=rows["protocol"].map(task_name), label=rows["encoding"].astype(str))
    scores = rows.groupby(["label", "task", "eval_len"], sort=False)["value"].mean().reset_index()
    return scores.rename(columns={"value": "score"})


def with_average(scores: pd.DataFrame) -> pd.DataFrame:
    """The scores with RULER's average per (label, length) added as a task of its own: the mean over every
    task of the label, so only at a length where each was measured. Elsewhere the average is NaN, and `tasks`
    says how many of them that length has: a mean over some tasks would not be RULER's average."""
    if scores.empty:
        return scores.assign(tasks=pd.Series(dtype=int))
    average = scores.groupby(["label", "eval_len"], sort=False)["score"].agg(["mean", "count"]).reset_index()
    average = average.rename(columns={"mean": "score", "count": "tasks"}).assign(task=AVERAGE)
    every = scores.groupby("label", sort=False)["task"].nunique()  # the tasks each label was measured on
    average.loc[average["tasks"] < average["label"].map(every), "score"] = float("nan")
    return pd.concat([scores.assign(tasks=1), average], ignore_index=True)


def effective_length(by_length: dict[int, float], threshold: float = DEFAULT_THRESHOLD) -> int | None:
    """The longest length up to which every measured score is ≥ threshold; None when the shortest fails."""
    passed = None
    for length in sorted(by_length):
        score = by_length[length]
        if math.isnan(score) or score < threshold:
            break
        passed = length
    return passed


def effective_lengths(scores: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> dict[tuple[str, str], int | None]:
    """(label, task) -> its effective length, the RULER average included."""
    out = {}
    for (label, task), group in with_average(scores).groupby(["label", "task"], sort=False):
        group = group.dropna(subset=["score"])  # the average only where every task was measured
        out[(label, task)] = effective_length(dict(zip(group["eval_len"].astype(int), group["score"])), threshold)
    return out


def ruler_section(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """Markdown: per model label, a table of tasks × lengths (score × 100) with each task's effective length,
    the RULER average last. Empty when the table has no RULER rows."""
    scores = ruler_scores(table)
    if scores.empty:
        return []
    full = with_average(scores)
    lengths = sorted(int(n) for n in full["eval_len"].unique())
    effective = effective_lengths(scores, threshold)
    lines = [
        "## RULER",
        "",
        f"Score × 100 (RULER's scale) per task and length; effective length: the longest length up to which the "
        f"score stays ≥ {threshold * 100:g} at every length measured (– : already below it at the shortest).",
    ]
    for label, group in full.groupby("label", sort=False):
        lines += ["", f"### {label}", "", "| task | " + " | ".join(map(str, lengths)) + " | effective length |"]
        lines.append("|" + "---|" * (len(lengths) + 2))
        names = [t for t in dict.fromkeys(group["task"]) if t != AVERAGE] + [AVERAGE]
        for task in names:
            cells = group[group["task"] == task].set_index("eval_len")
            scores = [cells.loc[n, "score"] if n in cells.index else math.nan for n in lengths]
            values = ["–" if math.isnan(v) else f"{v * 100:.1f}" for v in scores]
            reach = effective.get((label, task))
            name = f"**{task}**" if task == AVERAGE else task
            lines.append(f"| {name} | " + " | ".join(values) + f" | {reach if reach is not None else '–'} |")
        average = group[group["task"] == AVERAGE]
        partial = average[average["score"].isna()]
        if not partial.empty:
            every = len(names) - 1
            counts = ", ".join(f"{int(n)}: {int(k)} of {every}" for n, k in zip(partial["eval_len"], partial["tasks"]))
            lines += ["", f"No RULER average where a task was not measured ({counts} tasks)."]
    return lines


def ruler_figure(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD):
    """A heatmap per model label: tasks (rows, the average last) × lengths, score × 100, cells below the
    threshold outlined. None when the table has no RULER rows."""
    import matplotlib.pyplot as plt

    scores = ruler_scores(table)
    if scores.empty:
        return None
    full = with_average(scores)
    labels = list(dict.fromkeys(full["label"]))
    lengths = sorted(int(n) for n in full["eval_len"].unique())
    tasks = [t for t in dict.fromkeys(full["task"]) if t != AVERAGE] + [AVERAGE]
    fig, axes = plt.subplots(
        1, len(labels), figsize=(1.2 + 0.9 * len(lengths) * len(labels), 0.9 + 0.38 * len(tasks)), squeeze=False
    )
    for ax, label in zip(axes[0], labels):
        grid = full[full["label"] == label].pivot_table(index="task", columns="eval_len", values="score")
        grid = grid.reindex(index=tasks, columns=lengths) * 100
        ax.imshow(grid.to_numpy(), vmin=0, vmax=100, cmap="cividis", aspect="auto")
        for i, task in enumerate(tasks):
            for j, length in enumerate(lengths):
                value = grid.loc[task, length]
                if not math.isnan(value):
                    colour = "black" if value > 55 else "white"
                    weight = "bold" if value >= threshold * 100 else "normal"
                    ax.text(j, i, f"{value:.0f}", ha="center", va="center", color=colour, fontsize=8, weight=weight)
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths], fontsize=8)
        ax.set_yticks(range(len(tasks)), tasks if ax is axes[0][0] else [""] * len(tasks), fontsize=8)
        ax.axhline(len(tasks) - 1.5, color="white", linewidth=2)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("evaluation length (tokens)", fontsize=8)
    fig.suptitle(f"RULER score × 100 (bold: ≥ {threshold * 100:g}, the effective-length bar)", fontsize=10)
    fig.tight_layout()
    return fig


def ruler_findings(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """The findings' lines: per model label, the effective length of the RULER average and of each task."""
    scores = ruler_scores(table)
    if scores.empty:
        return []
    effective = effective_lengths(scores, threshold)
    lines = ["### RULER effective length", "", f"Longest length up to which the score stays ≥ {threshold * 100:g}.", ""]
    for label in dict.fromkeys(scores["label"]):
        tasks = [t for (lab, t) in effective if lab == label and t != AVERAGE]
        each = ", ".join(f"{t} {effective[(label, t)] or '–'}" for t in tasks)
        lines.append(f"- {label}: average {effective[(label, AVERAGE)] or '–'} ({each})")
    return lines + [""]
