"""`extrapolate sweep`: every (encoding, seed) cell on the same model size, corpus, budget and tasks.

Base models are trained once per (base encoding, seed) and reused by every RoPE scaling; finished cells
are found in the results table and skipped, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from . import checkpoint as ckpt
from .encodings import ENCODINGS, get_spec
from .errors import UserError
from .lock import folder_lock
from .results import check_tables, load_results
from .runner import (Prepared, Reporter, RunRequest, new_folder_guard, planned_run_id, prepare, resolve, run_cell,
                     train_config, validate)
from .train import model_folder

DEFAULT_ORDER = ["sinusoidal", "learned", "t5", "alibi", "rope", "pi", "ntk", "dynamic-ntk", "yarn", "dynamic-yarn",
                 "llama3", "nope"]


def resolve_encodings(spec: str) -> list[str]:
    names = [n.strip().lower() for n in spec.split(",") if n.strip()]
    if names == ["all"]:
        return [n for n in DEFAULT_ORDER if n in ENCODINGS] + [n for n in ENCODINGS.names() if n not in DEFAULT_ORDER]
    if not names:
        raise UserError("--encodings: name at least one encoding, or all")
    resolved = [get_spec(n).name for n in names]
    return list(dict.fromkeys(resolved))


@dataclass
class Cell:
    encoding: str
    seed: int
    request: RunRequest
    run_id: str
    model_folder: Path
    done: bool
    pretrained: bool = False


def plan(template: RunRequest, encodings: list[str], seeds: list[int], folder: Path, prepared: Prepared) -> list[Cell]:
    table = load_results(folder)
    finished = set(table["run_id"].astype(str)) if len(table) else set()
    cells = []
    for seed in seeds:
        # cells grouped by the model they need, so each model is trained right before its users
        for encoding in sorted(encodings, key=lambda e: (get_spec(e).base_encoding, e)):
            request = dataclasses.replace(template, encoding=encoding, seed=seed)
            rid = planned_run_id(request, prepared)
            if prepared.extra.get("pretrained") is not None:
                folder_of_model = Path(request.model)
            else:
                folder_of_model = model_folder(train_config(request, prepared, get_spec(encoding).base_encoding))
            cells.append(Cell(encoding, seed, request, rid, folder_of_model, rid in finished,
                              prepared.extra.get("pretrained") is not None))
    return cells


def models_of(cells: list[Cell]) -> dict[Path, bool]:
    """Each distinct model folder and whether it is already trained (pretrained models always are)."""
    return {c.model_folder: c.pretrained or ckpt.is_complete(c.model_folder) for c in cells}


def estimate_seconds(cells: list[Cell], prepared: Prepared) -> float:
    """Rough time: training steps × the measured seconds per step of a few real steps, plus evaluation
    forward tokens at about three times the training token rate (forward only)."""
    from .batches import BatchSource
    from .train import build_model, make_optimizer
    from .device import autocast

    request = cells[0].request
    config = train_config(request, prepared, "rope")
    model = build_model(config, prepared.device)
    optimizer = make_optimizer(model, config)
    source = BatchSource(prepared.stream, config.seq_len, config.batch_size, 0)
    start = None
    for step in range(4):
        if step == 1:
            start = time.perf_counter()
        batch = source.batch(step)
        with autocast(prepared.device, config.dtype):
            loss = model.token_nll(batch.inputs.to(prepared.device), batch.targets.to(prepared.device)).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    per_step = (time.perf_counter() - start) / 3
    tokens_per_second = config.batch_size * config.seq_len / per_step
    to_train = [m for m, trained in models_of([c for c in cells if not c.done]).items() if not trained]
    train_seconds = len(to_train) * config.steps * per_step
    budget = max(request.eval_tokens, max(prepared.lengths))
    per_cell_tokens = len(prepared.heldout) * budget * len(prepared.lengths)
    if "passkey" in request.tasks:
        task = prepared.extra["passkey_builder"].task
        per_cell_tokens += sum(prepared.lengths) * task.trials * len(task.depths) * 2
    eval_seconds = sum(1 for c in cells if not c.done) * per_cell_tokens / (3 * tokens_per_second)
    return train_seconds + eval_seconds


def sweep(template: RunRequest, encodings: list[str], seeds: list[int], folder: Path,
          reporter: Reporter | None = None, dry_run: bool = False) -> tuple[list[Cell], float | None]:
    reporter = reporter or Reporter()
    validate(template)
    template = resolve(template)
    if not seeds:
        raise UserError("--seeds: give at least one seed")
    check_tables(folder)  # a damaged table in the output folder is refused before training, not after
    prepared = prepare(template)
    if dry_run:
        cells = plan(template, encodings, seeds, folder, prepared)
        return cells, estimate_seconds(cells, prepared)
    with new_folder_guard(folder), folder_lock(folder):
        cells = plan(template, encodings, seeds, folder, prepared)
        for cell in cells:
            if cell.done:
                continue
            reporter.cell(cell)
            diverged = run_cell(cell.request, prepared, folder, reporter)
            if diverged is not None:
                reporter.warn(f"{cell.encoding} seed {cell.seed}: {diverged}; recorded as diverged")
            if prepared.device.type == "cuda":
                torch.cuda.empty_cache()
        from .report import write_report

        write_report(folder)
    return cells, None
