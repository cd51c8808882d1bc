"""training.csv: the retrieval probes taken during training (accuracy at L every few steps) and the loss at
those steps, one row per (model run, step). The report reads it for "steps until retrieval formed"."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.report.table import RowChecks, merge_rows, read_table

TRAINING_FILE = "training.csv"
TRAINING_COLUMNS = ["run_id", "encoding", "seed", "train_len", "step", "loss", "retrieval_accuracy"]
TRAINING_CHECKS = RowChecks(("run_id", "encoding", "seed", "train_len", "step", "retrieval_accuracy"),
                            ("seed", "train_len", "step", "loss", "retrieval_accuracy"), positive=("train_len", "step"))


def probe_rows(summary: dict, common: dict) -> list[dict]:
    """Rows from a training summary's probes: [step, accuracy] pairs, with the loss of that step."""
    losses = summary.get("losses") or []
    return [{**common, "step": int(step), "retrieval_accuracy": float(accuracy),
             "loss": float(losses[step - 1]) if 0 < step <= len(losses) else float("nan")}
            for step, accuracy in summary.get("probes") or []]


def append_training(folder: Path, rows: list[dict]) -> pd.DataFrame:
    return merge_rows(folder / TRAINING_FILE, rows, TRAINING_COLUMNS, ["run_id", "encoding", "seed", "step"])


def load_training(folder: Path) -> pd.DataFrame:
    return read_table(folder / TRAINING_FILE, TRAINING_COLUMNS, TRAINING_CHECKS)


def budget(training: pd.DataFrame) -> dict[str, int]:
    """Per encoding: the steps its model trained (the last probed step; the largest over seeds)."""
    return {encoding: int(group["step"].max()) for encoding, group in training.groupby("encoding", sort=False)}


def formation_step(training: pd.DataFrame, threshold: float) -> dict[str, float | None]:
    """Per encoding: the first probed step at which retrieval at L reached `threshold` (median over seeds;
    None when some seed never got there)."""
    out: dict[str, float | None] = {}
    for encoding, group in training.groupby("encoding", sort=False):
        firsts = []
        for _, run in group.groupby("seed"):
            reached = run[run["retrieval_accuracy"] >= threshold].sort_values("step")
            firsts.append(int(reached["step"].iloc[0]) if len(reached) else None)
        out[encoding] = None if None in firsts else float(pd.Series(firsts).median())
    return out
