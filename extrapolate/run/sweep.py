"""`extrapolate sweep`: every (encoding, seed) cell on the same model size, corpus, budget and tasks.

Base models are trained once per (base encoding, seed) and reused by every RoPE scaling; finished cells
are found in the results table and skipped, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from extrapolate.core.distributed import main_first, process_group
from extrapolate.core.errors import UserError
from extrapolate.core.lock import folder_lock
from extrapolate.core.numbers import parse_name_list
from extrapolate.core.registry import unknown_name_message
from extrapolate.encodings import encoding_groups, get_spec, sweep_order
from extrapolate.encodings.options import check_used
from extrapolate.report.folder import check_tables
from extrapolate.report.table import load_results, row_kinds
from extrapolate.run import (
    Prepared,
    Reporter,
    ResolvedRequest,
    ResolvedRun,
    RunRequest,
    resolve,
    resolve_run,
    run_cell,
)
from extrapolate.run.cell import new_folder_guard
from extrapolate.run.checkpoint import is_pretrained
from extrapolate.run.folder_setting import check_folder
from extrapolate.run.ignored import ignored_options
from extrapolate.run.limits import foreseen_skips
from extrapolate.run.prepare import prepare, preparing
from extrapolate.run.resolved import task_setup
from extrapolate.tasks.depth_log import clear_logs
from extrapolate.tasks.kinds import asked_kinds
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.train import TrainingDiverged

RELEASED = "released"  # in --encodings: a pretrained model's own encoding as released (its scaling and factor)


def resolve_encodings(spec: str) -> list[str]:
    names = parse_name_list(spec, "--encodings")
    if not names:
        raise UserError("--encodings: name at least one encoding, a group (classic, newer), or all")
    groups = encoding_groups() | {"all": sweep_order()}
    resolved = []
    for name in names:
        if name == RELEASED:
            resolved.append(name)
            continue
        if name in groups:
            resolved += groups[name]
            continue
        try:
            resolved.append(get_spec(name).name)
        except UserError:  # the groups named among what it may be
            raise UserError(unknown_name_message("encoding or group", name, [*groups, *sweep_order()])) from None
    return list(dict.fromkeys(resolved))


@dataclass
class Cell:
    resolved: ResolvedRun
    done: bool
    skips: dict[int, str] = dataclasses.field(default_factory=dict)  # {length: why it will have no value}

    @property
    def encoding(self) -> str:
        return self.resolved.spec.name

    @property
    def seed(self) -> int:
        return self.resolved.request.seed

    @property
    def model_folder(self) -> Path:
        return self.resolved.model_folder


def plan(requests: list[ResolvedRequest], folder: Path, prepared: Prepared) -> list[Cell]:
    table = load_results(folder)
    cells = []
    for request in requests:
        resolved = resolve_run(request, prepared)
        setup = task_setup(resolved, prepared)
        protocols = {kind.name: kind.protocol(setup) for kind in asked_kinds(resolved.request.tasks)}
        missing = missing_lengths(resolved, table, protocols)
        cells.append(Cell(still_to_run(resolved, missing), not missing, foreseen_skips(resolved, prepared)))
    return cells


def missing_lengths(resolved: ResolvedRun, table, protocols: dict[str, str] | None = None) -> list[int]:
    """The cell's lengths some of whose task kinds have no rows in the table yet (a sweep asked again with more
    lengths has work left in cells it finished before). With `protocols` ({task: the protocol its rows would
    record now, by kind}), a row of another protocol does not count: a run id holds a task file by its name or path,
    so a file changed in place (another version, more prompts) keeps the id, and its cell must run again."""
    rows = table[table["run_id"].astype(str) == resolved.run_id]
    if protocols:
        current = row_kinds(rows).astype(str).map(protocols)
        rows = rows[current.isna() | (rows["protocol"].astype(str) == current)]
    have = set(zip(row_kinds(rows).astype(str), rows["eval_len"].astype(int)))
    return [n for n in resolved.lengths if any((task, n) not in have for task in resolved.request.tasks)]


def still_to_run(resolved: ResolvedRun, missing: list[int]) -> ResolvedRun:
    """The cell narrowed to its missing lengths. Retrieval prompts do not depend on the other lengths; with a
    kind whose lengths score the same text (perplexity: the budget is set by the longest length) the whole
    cell runs again, so every length of it stays comparable."""
    together = any(kind.lengths_together for kind in asked_kinds(resolved.request.tasks))
    if not missing or missing == list(resolved.lengths) or together:
        return resolved
    attention = {key: shapes for key, shapes in resolved.attention.items() if key[1] in missing}
    return dataclasses.replace(resolved, lengths=tuple(missing), attention=attention)


def named(encodings: list[str]) -> list[str]:
    """The encodings named by their own name (without `released`, which stands for a checkpoint's)."""
    return [e for e in encodings if e != RELEASED]


def check_cells(folder: Path, cells: list[Cell], prepared: Prepared, template: RunRequest, reporter: Reporter) -> None:
    """The cells still to run against what the folder holds (run/folder_setting.py), before anything is trained."""
    to_run = [c.resolved for c in cells if not c.done]
    for note in check_folder(folder, to_run, prepared, template.append, template.overwrite):
        reporter.warn(note)


def models_of(cells: list[Cell]) -> dict[Path, bool]:
    """Each distinct model folder and whether it is already trained (pretrained models always are)."""
    return {c.model_folder: c.resolved.is_pretrained or ckpt.is_complete(c.model_folder) for c in cells}


def cell_requests(
    template: RunRequest, encodings: list[str], seeds: list[int], finetune_steps: list[int] | None = None
) -> list[ResolvedRequest]:
    """Each cell's request, resolved; cells grouped by the model they need, so each model is trained right
    before its users. With `finetune_steps`, each encoding once per step count, in increasing order (a longer
    fine-tune continues the shorter one), all at the same L' (the 0-step cell is the zero-shot point there)."""
    if not seeds:
        raise UserError("--seeds: give at least one seed")
    # a name or seed given twice is one cell, not two rows of the same measurement
    order = sorted(set(encodings), key=lambda e: ("", "") if e == RELEASED else (get_spec(e).base_encoding, e))
    steps = sorted(set(finetune_steps)) if finetune_steps else [template.finetune_steps]
    if finetune_steps and template.finetune_len is None:  # the L' the longest fine-tune resolves to, for all
        template = dataclasses.replace(
            template,
            finetune_len=resolve(
                dataclasses.replace(cell_request(template, order[0]), finetune_steps=max(steps))
            ).tuned_len,
        )
    return [
        resolve(dataclasses.replace(cell_request(template, encoding), seed=seed, finetune_steps=n))
        for seed in dict.fromkeys(seeds)
        for encoding in order
        for n in steps
    ]


def cell_request(template: RunRequest, encoding: str) -> RunRequest:
    """The template with the cell's encoding: `released` is the checkpoint's own, with its own factor and
    options (a --factor given is for the other cells: `--encodings released,yarn --factor 4` compares the
    checkpoint as released with YaRN at s = 4 in one table)."""
    from extrapolate.run.checkpoint import with_encoding

    if encoding != RELEASED:
        return dataclasses.replace(template, encoding=encoding)
    return with_encoding(dataclasses.replace(template, encoding=None, factor=None, encoding_options=()))


def sweep(
    template: RunRequest,
    encodings: list[str],
    seeds: list[int],
    folder: Path,
    reporter: Reporter | None = None,
    dry_run: bool = False,
    finetune_steps: list[int] | None = None,
    ignored: list[str] | None = None,  # the options' warnings where the template was resolved already (`plan_run`)
) -> tuple[list[Cell], float | None]:
    requests = cell_requests(template, encodings, seeds, finetune_steps)
    check_tables(folder)  # a damaged table in the output folder is refused before training, not after
    if dry_run:
        from extrapolate.run.estimate import estimate_seconds

        reporter = reporter or Reporter()
        with preparing(requests[0], reporter.note):
            prepared = prepare(requests[0])
        ignored = ignored_options(template, named(encodings)) if ignored is None else ignored
        for note in [*ignored, *prepared.notes]:
            reporter.warn(note)
        cells = plan(requests, folder, prepared)
        check_cells(folder, cells, prepared, template, reporter)
        reporter.plan(cells, folder)  # the plan at once; the estimate below times real steps
        return cells, estimate_seconds([c.resolved for c in cells if not c.done], models_of(cells), prepared, reporter)
    with process_group(template.device) as world:  # under torchrun: every cell's model across the ranks
        reporter = (reporter or Reporter()) if world.main else Reporter()
        with preparing(requests[0], reporter.note), main_first(world):
            prepared = prepare(requests[0])  # every cell shares the data: only the encoding and the seed differ
        asked = dataclasses.replace(template, finetune_steps=max(finetune_steps or [template.finetune_steps]))
        for note in [*ignored_options(asked, named(encodings)), *prepared.notes]:
            reporter.warn(note)
        cells = plan(requests, folder, prepared)  # before any rank writes, so every rank plans the same cells
        check_cells(folder, cells, prepared, template, reporter)
        world.barrier()
        with contextlib.ExitStack() as stack:
            if world.main:
                stack.enter_context(new_folder_guard(folder))
                stack.enter_context(folder_lock(folder))
            clock = SweepClock(cells, first_estimate(cells, prepared, reporter) if world.main else None)
            for index, cell in enumerate(cells, start=1):
                reporter.cell(cell, index, len(cells), clock.left(index))
                if cell.done:
                    if world.main:  # a run stopped between writing its rows and removing its depth logs
                        clear_logs(folder, cell.resolved.run_id)
                    continue
                try:
                    run_cell(cell.resolved, prepared, folder, reporter)
                except TrainingDiverged as diverged:  # its rows say so; the other cells go on
                    reporter.warn(f"{cell.encoding} seed {cell.seed}: {diverged}; recorded as diverged")
                clock.finished()
                if prepared.device.type == "cuda":
                    torch.cuda.empty_cache()
            if world.main:
                from extrapolate.report.pages import write_report

                write_report(folder)
    return cells, None


class SweepClock:
    """The time a sweep has left before each cell: the measured time per finished cell times the cells still to
    run, or before any has finished the estimate of timed training steps (`estimate.py`), if one was made."""

    def __init__(self, cells: list[Cell], estimate: float | None):
        self.pending = [not c.done for c in cells]
        self.estimate, self.started, self.done = estimate, time.monotonic(), 0

    def left(self, index: int) -> float | None:
        """Seconds left with cell `index` (1-based) and those after it still to run; None where unknown."""
        remaining = sum(self.pending[index - 1 :])
        if self.done:
            return (time.monotonic() - self.started) / self.done * remaining
        return self.estimate

    def finished(self) -> None:
        self.done += 1


def first_estimate(cells: list[Cell], prepared: Prepared, reporter: Reporter) -> float | None:
    """The sweep's time from a few timed training steps, where two cells or more are to run (one cell's
    training bar tells its own time); None where nothing can be timed cheaply (an engine such as vLLM)."""
    from extrapolate.run.estimate import estimate_seconds

    pending = [c.resolved for c in cells if not c.done]
    checkpoint = prepared.checkpoint
    if len(pending) < 2 or (checkpoint is not None and hasattr(checkpoint.model, "generate_greedy")):
        return None
    return estimate_seconds(pending, models_of(cells), prepared, reporter)


def sweep_template(template: RunRequest, encodings: str) -> tuple[list[str], Path, RunRequest]:
    """The encodings named by `encodings`, the output folder (default results/sweep-L<L>), the cells' template."""
    names = resolve_encodings(encodings)
    if RELEASED in names and not is_pretrained(template.model):
        raise UserError(
            f"--encodings {RELEASED}: a pretrained model's own encoding; --model names a model trained here"
        )
    check_used([get_spec(name) for name in named(names)], template.encoding_options)
    folder = template.out
    if folder is None:  # L as the cells resolve it: the default length, or a pretrained model's own context
        train_len = template.train_len or resolve(cell_request(template, names[0])).request.train_len
        folder = Path("results") / f"sweep-L{train_len}"
    first = cell_request(template, names[0])  # the template's own encoding: a name, never `released`
    return names, folder, dataclasses.replace(template, encoding=first.encoding, out=folder)


def sweep_job(
    template: RunRequest,
    encodings: str,
    seeds: list[int],
    reporter: Reporter | None = None,
    dry_run: bool = False,
    finetune_steps: list[int] | None = None,
    ignored: list[str] | None = None,
) -> tuple[Path, tuple[list[Cell], float | None]]:
    """`extrapolate sweep`: the encodings named by `encodings` ("all" or a list) × `seeds` into the request's
    folder (default results/sweep-L<L>). Returns the folder and (cells, the estimate of a dry run)."""
    names, folder, template = sweep_template(template, encodings)
    cells = sweep(
        template, names, seeds, folder, reporter, dry_run=dry_run, finetune_steps=finetune_steps, ignored=ignored
    )
    return folder, cells


def plan_run(request: RunRequest, reporter: Reporter | None = None) -> tuple[Path, tuple[list[Cell], float | None]]:
    """`run --dry-run`: the one cell `run` would measure, planned as a sweep of one without training anything:
    its model (to train or reused), the time estimate, and run's own output folder."""
    from extrapolate.run.checkpoint import with_encoding
    from extrapolate.run.resolution import output_folder, resolve_request

    request = with_encoding(request)
    check_used([get_spec(request.encoding)], request.encoding_options)  # as `run` does: resolution drops them
    ignored = ignored_options(request, [request.encoding])  # as `run` does: before resolution fills defaults
    request = resolve_request(request)
    steps = [request.finetune_steps] if request.finetune_steps else None
    template = dataclasses.replace(request, out=output_folder(request))
    return sweep_job(
        template, request.encoding, [request.seed], reporter, dry_run=True, finetune_steps=steps, ignored=ignored
    )


def submit_job(
    template: RunRequest, encodings: str, seeds: list[int], options, finetune_steps: list[int] | None = None
):
    """`extrapolate sweep --executor slurm`: the same cells as `sweep_job`, each submitted as a cluster job
    (see `cluster`). Returns the folder and the submission."""
    from extrapolate.run.cluster import submit_sweep

    names, folder, template = sweep_template(template, encodings)
    requests = cell_requests(template, names, seeds, finetune_steps)
    check_tables(folder)
    prepared = prepare(requests[0])  # fills the corpus and tokenizer caches once, before any job reads them
    cells = plan(requests, folder, prepared)
    check_cells(folder, cells, prepared, template, Reporter())
    return folder, submit_sweep(cells, folder, options)
