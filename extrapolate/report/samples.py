"""What the model answered: one JSON line per prompt of every retrieval and RULER cell, in
`samples/<run id>.jsonl` beside the results table (as RULER keeps its predictions and lm-evaluation-harness its
`--log_samples`). A line holds the cell's task, protocol and length, the prompt's index (and depth), the
reference, the model's greedy prediction and its score; a cell measured again replaces its lines. A perplexity
cell keeps one line per document instead: its index, summed NLL and scored tokens (`load_documents`)."""

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
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [named_task(line) for line in lines]


def named_task(line: dict) -> dict:
    """A line as written now: its `task` the task file's name. A line written before held its kind there
    ("passkey" for every retrieval task, "ruler" for RULER's); its protocol begins with the task's name."""
    from extrapolate.report.table import task_of_protocol
    from extrapolate.tasks.kinds import legacy_task_names

    name = task_of_protocol(line.get("protocol")) if line.get("task") in legacy_task_names() else None
    return {**line, "task": name} if name else line


def _load_lines(folder: Path, documents: bool) -> pd.DataFrame:
    frames = []
    for path in sorted((Path(folder) / SAMPLES_FOLDER).glob("*.jsonl")):
        # a perplexity document's line holds its summed loss, a prompt's its score (LongPPL's lines are neither)
        lines = [r for r in read_lines(path) if ("nll_sum" in r if documents else "score" in r)]
        if lines:
            frames.append(pd.DataFrame(lines).assign(run_id=path.stem))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", *CELL])


def load_samples(folder: Path) -> pd.DataFrame:
    """Every prompt's line of an output folder's samples files as one frame, with a `run_id` column (empty
    without any)."""
    return _load_lines(folder, documents=False)


def load_documents(folder: Path) -> pd.DataFrame:
    """Every perplexity cell's per-document lines (`index`, `nll_sum`, `tokens`), with a `run_id` column."""
    return _load_lines(folder, documents=True)


WORST = 3  # cells a report points into
SHOWN = 2  # answers quoted per cell


def quoted(text, width: int = 60) -> str:
    """An answer or reference as one short table-safe line."""
    text = " / ".join(text) if isinstance(text, list) else str(text)
    text = " ".join(text.replace("|", "\\|").split())
    text = "".join(c if c.isprintable() else "\ufffd" for c in text)  # control bytes a tiny model emits
    return f"`{text[:width]}{'…' if len(text) > width else ''}`" if text else "(empty)"


def run_models(folder: Path) -> dict[str, str]:
    """{run id: "encoding · seed s"} of the folder's results, so a cell of a sweep names whose answers it shows."""
    from extrapolate.report.table import load_results

    table = load_results(folder).drop_duplicates("run_id")
    return {str(r.run_id): f"{r.encoding} · seed {int(r.seed)}" for r in table.itertuples()}


def samples_section(folder: Path) -> list[str]:
    """The report's pointer into what the model answered: the WORST cells by mean score (task, length), each
    linked to its samples file with SHOWN of its wrong answers beside their references. Empty for a folder
    without samples (perplexity only, or written before they were kept)."""
    frame = load_samples(folder)
    if frame.empty or "score" not in frame:
        return []
    cells = frame.groupby(["run_id", *CELL], sort=False)["score"].agg(["mean", "count"]).reset_index()
    worst = cells.sort_values(["mean", "eval_len"], kind="stable").head(WORST)
    model = run_models(folder)
    lines = [
        "## What the model answered",
        "",
        f"Every prompt's reference, greedy prediction and score is kept in `{SAMPLES_FOLDER}/<run id>.jsonl`. "
        f"The {len(worst)} lowest-scoring cells, with {SHOWN} of their wrong answers:",
        "",
        "| model | cell | score | prompts | reference → prediction | samples |",
        "|---|---|---|---|---|---|",
    ]
    for cell in worst.itertuples():
        rows = frame[(frame["run_id"] == cell.run_id) & (frame["task"] == cell.task)]
        rows = rows[(rows["protocol"] == cell.protocol) & (rows["eval_len"] == cell.eval_len)]
        wrong = rows[rows["score"] < 1].head(SHOWN)
        answers = "; ".join(f"{quoted(r.reference)} → {quoted(r.prediction)}" for r in wrong.itertuples())
        link = f"[{cell.run_id}.jsonl]({SAMPLES_FOLDER}/{cell.run_id}.jsonl)"
        lines.append(
            f"| {model.get(str(cell.run_id), cell.run_id)} | `{cell.protocol}` at {cell.eval_len} | "
            f"{cell.mean:.0%} | {cell.count} | "
            f"{answers or '–'} | {link} |"
        )
    return lines + [""]
