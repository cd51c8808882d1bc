"""What the model answered: one JSON line per prompt of every retrieval and RULER cell, in
`samples/<run id>.jsonl` beside the results table (as RULER keeps its predictions and lm-evaluation-harness its
`--log_samples`). A line holds the cell's task, protocol and length, the prompt's index (and depth), the
reference, the model's greedy prediction and its score; a cell measured again replaces its lines."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from extrapolate.core.atomic import write_text
from extrapolate.core.paths import SAMPLES_FOLDER

CELL = ("task", "protocol", "eval_len")  # a line's cell within its run


def samples_path(folder: Path, run_id: str) -> Path:
    return Path(folder) / SAMPLES_FOLDER / f"{run_id}.jsonl"


def write_samples(folder: Path, run_id: str, records: list[dict]) -> None:
    """Merge a run's new records (each with CELL's keys) into its samples file: the cells they are of replace
    their earlier lines, other cells' lines stay. Written atomically; nothing is written for no records."""
    if not records:
        return
    path = samples_path(folder, run_id)
    fresh = {tuple(r[k] for k in CELL) for r in records}
    kept = [r for r in read_lines(path) if tuple(r.get(k) for k in CELL) not in fresh]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept + records))


def read_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_samples(folder: Path) -> pd.DataFrame:
    """Every samples file of an output folder as one frame, with a `run_id` column (empty without any)."""
    frames = [
        pd.DataFrame(read_lines(path)).assign(run_id=path.stem)
        for path in sorted((Path(folder) / SAMPLES_FOLDER).glob("*.jsonl"))
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", *CELL])
