"""training.csv: the probes taken during training (retrieval accuracy at L and the held-out loss at L, every
few steps) and the training loss at those steps, one row per (model run, step). The report reads it for "steps
until retrieval formed" and for whether held-out perplexity fell through training."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from extrapolate.report.table import RowChecks, merge_rows, read_table

TRAINING_FILE = "training.csv"
TRAINING_COLUMNS = ["run_id", "encoding", "seed", "train_len", "step", "loss", "retrieval_accuracy", "heldout_loss"]
# a model that trains on no retrieval prompts has no retrieval accuracy; tables from before the held-out
# probe have no heldout_loss column
TRAINING_CHECKS = RowChecks(
    ("run_id", "encoding", "seed", "train_len", "step"),
    ("seed", "train_len", "step", "loss", "retrieval_accuracy"),
    ("heldout_loss",),
    positive=("train_len", "step"),
)


def probe_rows(summary: dict, common: dict) -> list[dict]:
    """Rows from a training summary's probes ([step, accuracy, held-out NLL], or [step, accuracy] from before
    the held-out probe; None where a probe did not measure), with the training loss of that step."""
    losses = summary.get("losses") or []

    def number(value) -> float:
        return float("nan") if value is None else float(value)

    rows = []
    for step, accuracy, *rest in summary.get("probes") or []:
        rows.append(
            {
                **common,
                "step": int(step),
                "retrieval_accuracy": number(accuracy),
                "heldout_loss": number(rest[0] if rest else None),
                "loss": float(losses[step - 1]) if 0 < step <= len(losses) else float("nan"),
            }
        )
    return rows


def append_training(folder: Path, rows: list[dict]) -> pd.DataFrame:
    return merge_rows(folder / TRAINING_FILE, rows, TRAINING_COLUMNS, ["run_id", "encoding", "seed", "step"])


def load_training(folder: Path) -> pd.DataFrame:
    return read_table(folder / TRAINING_FILE, TRAINING_COLUMNS, TRAINING_CHECKS)


def budget(training: pd.DataFrame) -> dict[str, int]:
    """Per encoding: the steps its model trained (the last probed step; the largest over seeds)."""
    return {encoding: int(group["step"].max()) for encoding, group in training.groupby("encoding", sort=False)}


def formation_step(training: pd.DataFrame, threshold: float) -> dict[str, tuple[float | None, int, int]]:
    """Per encoding: the first probed step at which retrieval at L reached `threshold`, the median over seeds
    with a seed that never got there counted as later than any (None when the median is such a seed), the
    seeds that never got there, and the seeds."""
    out: dict[str, tuple[float | None, int, int]] = {}
    for encoding, group in training.groupby("encoding", sort=False):
        firsts = []
        for _, run in group.groupby("seed"):
            reached = run[run["retrieval_accuracy"] >= threshold].sort_values("step")
            firsts.append(float(reached["step"].iloc[0]) if len(reached) else math.inf)
        median = float(pd.Series(firsts).median())
        out[encoding] = (median if math.isfinite(median) else None, firsts.count(math.inf), len(firsts))
    return out


def heldout_section(training: pd.DataFrame, bases: dict[str, str]) -> list[str]:
    """The report's lines on held-out perplexity during training, per trained model (mean over seeds at each
    probed step): at the first probe, its lowest and at the end. A last value above the lowest by more than 2%
    says the model began to memorise its corpus (a bigger corpus, or fewer steps). `bases`: encoding -> the
    encoding its model trained with; a scaling whose base has rows of its own repeats them and is left out.
    None before the probe existed."""
    probed = training.dropna(subset=["heldout_loss"]) if "heldout_loss" in training else training.iloc[:0]
    present = set(probed["encoding"])
    probed = probed[[bases.get(e, e) == e or bases.get(e) not in present for e in probed["encoding"]]]
    if probed.empty:
        return []
    lines = [
        "## Held-out perplexity during training",
        "",
        "Perplexity at L on the same held-out tokens at every probe: it falls while the model learns the "
        "language; a rise at the end means it began to memorise its training corpus. One row per trained "
        "model: a RoPE scaling evaluates the RoPE model, whose row is RoPE's.",
        "",
        "| encoding | first probe | lowest | end of training | |",
        "|---|---|---|---|---|",
    ]
    for encoding, group in probed.groupby("encoding", sort=False):
        curve = group.groupby("step")["heldout_loss"].mean().sort_index().map(math.exp)
        first, last, low_step = curve.iloc[0], curve.iloc[-1], int(curve.idxmin())
        verdict = "rose at the end (memorising)" if last > curve.min() * 1.02 else "fell through training"
        lines.append(
            f"| {encoding} | {first:.2f} (step {int(curve.index[0])}) | {curve.min():.2f} (step {low_step}) | "
            f"{last:.2f} (step {int(curve.index[-1])}) | {verdict} |"
        )
    return lines + [""]
