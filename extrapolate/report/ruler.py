"""RULER's view of a results table: each task's score per length, the RULER average per length, and the
effective length — the longest length up to which the score stays at or above the threshold at every length
measured (RULER's default bar: 85.6, Llama-2-7B's average at 4k). Scores print × 100, as RULER prints them.
BABILong's tasks, scored the same way (a mean of 0–1 scores over prompts), get the same view (`BABILONG_VIEW`),
its average named BABILong's over qa1–qa5 (the set its papers average) or qa1–qa10."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from extrapolate.core.intervals import proportion_interval
from extrapolate.report.table import aggregate, of_kind
from extrapolate.tasks.babilong.kind import BABILONG
from extrapolate.tasks.ruler.kind import RULER
from extrapolate.tasks.ruler.task import DEFAULT_THRESHOLD

IDENTITY = re.compile(r"^(?P<task>.+)-v\d+-(?:ruler|babilong)-[0-9a-f]{8}")
AVERAGE = "RULER average"


def task_name(protocol: str) -> str:
    """The task file's name in a RULER row's protocol (its identity, perhaps marked +chat or +bos)."""
    match = IDENTITY.match(str(protocol))
    return match.group("task") if match else str(protocol)


def prompt_format(protocol: str) -> str:
    """The marks after a RULER row's task identity ("+chat", "+bos", "+chat+bos"; "" for plain prompts): the
    same task asked in another format is another measurement, not another seed of this one."""
    match = IDENTITY.match(str(protocol))
    return str(protocol)[match.end() :] if match else ""


def ruler_scores(table: pd.DataFrame, view: Benchmark | None = None) -> pd.DataFrame:
    """(model label, task, length) -> mean score (0–1) over the table's seeds, measured rows only (the label:
    the encoding, and the prompt format where it is not plain, as "rope +chat"), with its
    95% interval (`low`, `high`: over one seed the row's own, over several Student's t over the seeds) and
    the prompts a seed's score is over (`n`); columns label, task, eval_len, score, low, high, n, n_seeds."""
    view = view or RULER_VIEW
    rows = table[of_kind(table, view.kind) & (table["metric"] == "score") & (table["status"] == "ok")]
    if rows.empty:
        return pd.DataFrame(columns=["label", "task", "eval_len", "score", "low", "high", "n", "n_seeds"])
    formats = rows["protocol"].map(prompt_format)  # each format its own label: "rope", "rope +chat"
    label = rows["encoding"].astype(str) + formats.map(lambda marks: f" {marks}" if marks else "")
    rows = rows.assign(task=rows["protocol"].map(task_name), label=label)
    # a row written before `n` was: a RULER row's n_tokens are its prompts × the length
    n = pd.to_numeric(rows["n"], errors="coerce") if "n" in rows else pd.Series(float("nan"), index=rows.index)
    if "n_tokens" in rows:
        n = n.fillna(pd.to_numeric(rows["n_tokens"], errors="coerce") / rows["eval_len"].astype(float))
    rows = rows.assign(n=n)
    agg = aggregate(rows, ["label", "task", "eval_len"])
    return agg.rename(columns={"mean": "score"})[["label", "task", "eval_len", "score", "low", "high", "n", "n_seeds"]]


RULER_TASKS = frozenset(
    ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3"]
    + ["niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2"]
)  # RULER's 13: its average is over these
QA_TASKS = frozenset(["qa_1", "qa_2"])  # the two that need a QA dataset, left out where it cannot be read
BABILONG_FIVE = frozenset(f"qa{n}" for n in range(1, 6))  # the set BABILong's papers average
BABILONG_TEN = frozenset(f"qa{n}" for n in range(1, 11))


@dataclass(frozen=True)
class Benchmark:
    """A suite of score tasks shown alike: its kind, its name, and the task sets whose mean carries its name."""

    kind: object  # the TaskKind of its rows
    title: str
    averages: tuple[tuple[frozenset, str], ...]  # (the tasks, the name of their mean)
    other: str  # the name of a mean over any other set, "{n}" its count
    scale: str  # what the scores' × 100 is, in the section's first line
    named: str  # over which tasks the average carries the suite's name


RULER_VIEW = Benchmark(
    RULER,
    "RULER",
    ((RULER_TASKS, AVERAGE), (RULER_TASKS - QA_TASKS, f"{AVERAGE} (11 tasks, no QA)")),
    f"average of {{n}} (not RULER's {len(RULER_TASKS)})",
    "Score × 100 (RULER's scale)",
    "called RULER's only over RULER's tasks",
)
BABILONG_VIEW = Benchmark(
    BABILONG,
    "BABILong",
    ((BABILONG_FIVE, "BABILong average (qa1–qa5)"), (BABILONG_TEN, "BABILong average (qa1–qa10)")),
    "average of {n} (not BABILong's qa1–qa5)",
    "Score × 100 (the share of prompts answered, as BABILong prints it)",
    "called BABILong's only over qa1–qa5 or qa1–qa10",
)
VIEWS = (RULER_VIEW, BABILONG_VIEW)


def average_name(tasks, view: Benchmark | None = None) -> str:
    """What the mean over `tasks` (a label's measured task names) may be called: RULER's average only over
    exactly RULER's 13 tasks (or its 11 without QA, said so); over any other set it is an average of those
    tasks, named with their count, not RULER's (BABILong's: over qa1–qa5 or qa1–qa10)."""
    view, measured = view or RULER_VIEW, set(tasks)
    for names, name in view.averages:
        if measured == names:
            return name
    count = len(measured)
    return view.other.format(n=f"{count} task{'s' * (count != 1)}")


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


def ruler_section(
    table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD, view: Benchmark | None = None
) -> list[str]:
    """Markdown: per model label, a table of tasks × lengths (score × 100) with each task's effective length,
    the RULER average last. Empty when the table has no RULER rows (`view`: BABILong's instead)."""
    view = view or RULER_VIEW
    scores = ruler_scores(table, view)
    if scores.empty:
        return []
    full = with_average(scores)
    lengths = sorted(int(n) for n in full["eval_len"].unique())
    effective = effective_lengths(scores, threshold)
    lines = [
        f"## {view.title}",
        "",
        f"{view.scale} per task and length, [its 95% interval] where recorded "
        f"({interval_words(scores)}); "
        f"effective length: the longest length up to which the score (the point estimate) stays ≥ "
        f"{threshold * 100:g} at every length measured (– : already below it at the shortest); † marks a cell "
        "whose interval straddles that bar, where a rerun could move the effective length. The average is the "
        f"mean of the tasks' scores, shown without an interval, and {view.named}.",
    ]
    for label, group in full.groupby("label", sort=False):
        lines += ["", f"### {label}", "", "| task | " + " | ".join(map(str, lengths)) + " | effective length |"]
        lines.append("|" + "---|" * (len(lengths) + 2))
        names = [t for t in dict.fromkeys(group["task"]) if t != AVERAGE] + [AVERAGE]
        for task in names:
            cells = group[group["task"] == task].set_index("eval_len")
            values = [score_text(cells.loc[n] if n in cells.index else None, threshold) for n in lengths]
            reach = effective.get((label, task))
            name = f"**{average_name(names[:-1], view)}**" if task == AVERAGE else task
            lines.append(f"| {name} | " + " | ".join(values) + f" | {reach if reach is not None else '–'} |")
        average = group[group["task"] == AVERAGE]
        partial = average[average["score"].isna()]
        if not partial.empty:
            every = len(names) - 1
            counts = ", ".join(f"{int(n)}: {int(k)} of {every}" for n, k in zip(partial["eval_len"], partial["tasks"]))
            lines += ["", f"No average where a task was not measured ({counts} tasks)."]
    return lines + [""]


def score_text(cell, threshold: float) -> str:
    """A cell × 100 with its interval, e.g. "80.0 [61–91]†" († where the interval straddles the threshold)."""
    if cell is None or math.isnan(cell["score"]):
        return "–"
    text = f"{cell['score'] * 100:.1f}"
    low, high = cell.get("low", math.nan), cell.get("high", math.nan)
    if low != low or high != high:  # no interval: an average, or a row written before intervals were
        return text
    low, high = max(0.0, low), min(1.0, high)  # a t interval over few seeds can pass the scale's ends
    straddles = "†" if low < threshold <= high else ""
    return f"{text} [{low * 100:.0f}–{high * 100:.0f}]{straddles}"


def interval_words(scores: pd.DataFrame) -> str:
    """What the intervals are over: "the exact interval at the cell's mean over the 25 prompts of a cell" for one
    seed."""
    prompts = sorted({int(n) for n in scores["n"].dropna()})
    counts = ", ".join(map(str, prompts)) or "its"
    seeds = sorted({int(n) for n in scores["n_seeds"]})
    if scores["low"].isna().all():  # rows written before intervals were
        low, high = proportion_interval(prompts[0] / 2, prompts[0]) if prompts else (math.nan, math.nan)
        wide = f", whose 95% interval can be ±{(high - low) * 50:.0f} points wide" if prompts else ""
        return f"no interval recorded; {counts} prompts a cell{wide}"
    if seeds == [1]:
        return f"one seed: the exact interval at the cell's mean over the {counts} prompts of a cell"
    return f"over {'–'.join(map(str, seeds))} seeds: Student's t over the seeds' scores; one seed: over its prompts"


def ruler_figure(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD, view: Benchmark | None = None):
    """A heatmap per model label: tasks (rows, the average last) × lengths, score × 100, cells below the
    threshold outlined. None when the table has no RULER rows (`view`: BABILong's instead)."""
    import matplotlib.pyplot as plt

    view = view or RULER_VIEW
    scores = ruler_scores(table, view)
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
        # the last row's name differs by label (RULER's average or one of fewer tasks): each panel's title says
        # which, as only the first panel has room for the row names
        measured = [t for t in dict.fromkeys(full.loc[full["label"] == label, "task"]) if t != AVERAGE]
        names = [*tasks[:-1], "average"]
        ax.set_yticks(range(len(tasks)), names if ax is axes[0][0] else [""] * len(tasks), fontsize=8)
        ax.axhline(len(tasks) - 1.5, color="white", linewidth=2)
        ax.set_title(f"{label}\naverage: {average_name(measured, view)}", fontsize=8)
        ax.set_xlabel("evaluation length (tokens)", fontsize=8)
    prompts = sorted({int(n) for n in scores["n"].dropna()})
    spread = ""
    if prompts:  # a heatmap has no room for bars: the widest interval a cell of this size can have, in words
        low, high = proportion_interval(prompts[0] / 2, prompts[0])
        spread = f"\n{'/'.join(map(str, prompts))} prompts a cell: 95% interval up to ±{(high - low) * 50:.0f} points"
    title = f"{view.title} score × 100 (bold: ≥ {threshold * 100:g}, the effective-length bar){spread}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def suite_figures(table: pd.DataFrame) -> dict:
    """Each suite's heatmap (RULER's, BABILong's) keyed by its kind's name, where the table has its rows."""
    drawn = {view.kind.name: ruler_figure(table, view=view) for view in VIEWS}
    return {name: figure for name, figure in drawn.items() if figure is not None}


def suite_sections(table: pd.DataFrame) -> list[str]:
    return [line for view in VIEWS for line in ruler_section(table, view=view)]


def suite_findings(table: pd.DataFrame) -> list[str]:
    return [line for view in VIEWS for line in ruler_findings(table, view=view)]


def ruler_findings(
    table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD, view: Benchmark | None = None
) -> list[str]:
    """The findings' lines: per model label, the effective length of the RULER average and of each task."""
    view = view or RULER_VIEW
    scores = ruler_scores(table, view)
    if scores.empty:
        return []
    effective = effective_lengths(scores, threshold)
    bar = f"Longest length up to which the score stays ≥ {threshold * 100:g}."
    lines = [f"### {view.title} effective length", "", bar, ""]
    for label in dict.fromkeys(scores["label"]):
        tasks = [t for (lab, t) in effective if lab == label and t != AVERAGE]
        each = ", ".join(f"{t} {effective[(label, t)] or '–'}" for t in tasks)
        lines.append(f"- {label}: {average_name(tasks, view)} {effective[(label, AVERAGE)] or '–'} ({each})")
    return lines + [""]
