"""The fine-tuning part of a report: perplexity at L' (and at L) as a function of fine-tuning steps, per
encoding, next to the base model's perplexity at L; and its figure."""

from __future__ import annotations

import pandas as pd

from extrapolate.encodings import ENCODINGS, get_spec
from extrapolate.report.labels import ADAPTED, encoding_of, split_label
from extrapolate.report.table import of_kind
from extrapolate.tasks.perplexity import PERPLEXITY


def finetune_curves(table: pd.DataFrame) -> pd.DataFrame:
    """Mean perplexity over seeds per (encoding, fine-tune steps, evaluation length), for the rows of runs at
    an extended length (fine-tuned, or their zero-shot point)."""
    if "finetune_len" not in table.columns:
        return pd.DataFrame()
    rows = table[
        table["finetune_len"].notna()
        & of_kind(table, PERPLEXITY)
        & (table["metric"] == "ppl")
        & (table["status"] == "ok")
    ]
    if rows.empty:
        return pd.DataFrame()
    encoding, _ = split_label(rows["encoding"])
    rows = rows.assign(
        encoding=encoding.to_numpy(),
        steps=rows["finetune_steps"].fillna(0).astype(int),
        finetune_len=rows["finetune_len"].astype(int),
        value=rows["value"].astype(float),
    )
    curves = rows.groupby(["encoding", "steps", "finetune_len", "train_len", "eval_len"], sort=False)["value"].mean()
    return curves.reset_index()


def unlike_the_others(curves: pd.DataFrame, L: int, target: int) -> str:
    """The sentence for fine-tunes that do not train as the others (PoSE's rows of L, LongCE's loss, DroPE at L),
    "" where there are none."""
    names = list(dict.fromkeys(curves["encoding"]))
    pose = [n for n in names if f"{ADAPTED}pose" in n]
    longce = [n for n in names if f"{ADAPTED}longce" in n]
    known = {name for name, _ in ENCODINGS}
    recalibrated = [n for n in names if n in known and get_spec(n).recalibrates]
    parts = []
    if pose:
        parts.append(f"{', '.join(pose)} trained on rows of L = {L} whose position ids skip to cover {target} (PoSE)")
    if longce:
        parts.append(f"{', '.join(longce)} trained with LongCE's loss, each target weighted by what the context adds")
    if recalibrated:
        parts.append(f"{', '.join(recalibrated)} recalibrated at L = {L} itself, its zero-shot point without rotation")
    return (" " + "; ".join(parts) + ".") if parts else ""


def finetune_section(table: pd.DataFrame, reference: dict[str, float]) -> list[str]:
    """Markdown: per length (L' first, then L), encodings × fine-tune steps; `reference`: the base model's
    perplexity at L per encoding (`report.perplexity_at_L`)."""
    curves = finetune_curves(table)
    if curves.empty or (curves["steps"] == 0).all():
        return []
    target = int(curves["finetune_len"].max())
    L = int(curves["train_len"].iloc[0])
    steps = sorted(curves["steps"].unique())
    lines = [
        f"## Fine-tuning at L' = {target}",
        "",
        f"Perplexity after N steps of training at L' = {target} with the encoding set for L' (0: zero-shot), "
        f"then the same at L = {L}; the last column is the base model's perplexity at L."
        + unlike_the_others(curves, L, target),
        "",
    ]
    for length in dict.fromkeys([target, L]):
        at = curves[curves["eval_len"] == length]
        if at.empty:
            continue
        lines += [
            f"| perplexity at {length} | " + " | ".join(f"{n} steps" for n in steps) + " | base model at L |",
            "|" + "---|" * (len(steps) + 2),
        ]
        for encoding, group in at.groupby("encoding", sort=False):
            by_steps = dict(zip(group["steps"], group["value"]))
            cells = [f"{by_steps[n]:.3f}" if n in by_steps else "" for n in steps]
            plain = encoding_of(encoding)  # "yarn+lora" was fine-tuned from yarn's base model
            base = f"{reference[plain]:.3f}" if plain in reference else "–"
            lines.append(f"| {encoding} | " + " | ".join(cells) + f" | {base} |")
        lines.append("")
    return lines


def finetune_figure(table: pd.DataFrame, reference: dict[str, float]):
    """Perplexity at L' vs fine-tuning steps (0 is drawn: `steps_axis`), one line per encoding; dashed:
    plain RoPE's perplexity at L, the level a context extension aims to keep."""
    import matplotlib.pyplot as plt

    from extrapolate.report.plots import colour, plain_log_ticks

    curves = finetune_curves(table)
    target = int(curves["finetune_len"].max())
    at = curves[curves["eval_len"] == target]
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=120)
    for encoding, group in at.groupby("encoding", sort=False):
        group = group.sort_values("steps")
        ax.plot(group["steps"], group["value"], marker="o", label=encoding, color=colour(encoding), linewidth=1.8)
    levels: dict[float, list[str]] = {}  # encodings sharing a base model share its level
    for encoding in at["encoding"].unique():
        if encoding in reference:
            levels.setdefault(reference[encoding], []).append(encoding)
    for level, names in levels.items():
        label = "base model at L" + (f" ({', '.join(names)})" if len(levels) > 1 else "")
        ax.axhline(level, color="grey", linestyle="--", linewidth=1, label=label)
    steps_axis(ax, sorted(at["steps"].unique()))
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("fine-tuning steps at L'")
    ax.set_ylabel(f"perplexity at {target}")
    ax.set_title(f"fine-tuning at L' = {target}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def steps_axis(ax, steps: list[int]) -> None:
    """Fine-tuning steps on a symmetric-log axis, linear up to the first step measured past 0 and logarithmic
    beyond, so 0 (zero-shot) and 25, 100, 400 are all drawn apart. Ticks only at the steps measured, in plain
    numbers, and limits just past them: the axis has no negative side, so no tick such as −10¹ left of 0."""
    from matplotlib.ticker import FixedLocator, NullLocator

    positive = [n for n in steps if n > 0]
    linthresh = min(positive) if positive else 1
    ax.set_xscale("symlog", linthresh=linthresh, linscale=0.5)
    ax.xaxis.set_major_locator(FixedLocator(steps))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(n) for n in steps])
    ax.set_xlim(-0.2 * linthresh, max(steps + [linthresh]) * 1.4)
