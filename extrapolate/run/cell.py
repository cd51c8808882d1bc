"""One (encoding, seed) cell end to end, and `run`, the job of one cell: resolve, prepare, train or reuse,
evaluate, write the tables, run.json and the report."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from pathlib import Path

from extrapolate.core.distributed import current, main_first, process_group
from extrapolate.core.paths import RUNS_FOLDER, writable_folder
from extrapolate.encodings import get_spec
from extrapolate.encodings.options import check_used
from extrapolate.report.folder import check_tables
from extrapolate.report.samples import write_samples
from extrapolate.report.table import append_positions, append_results, provenance
from extrapolate.run.checkpoint import with_encoding
from extrapolate.run.evaluate import evaluate, evaluation_seconds, trained_model
from extrapolate.run.folder_setting import check_folder
from extrapolate.run.ignored import ignored_options
from extrapolate.run.prepare import Prepared, prepare, preparing
from extrapolate.run.reporter import Reporter
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import output_folder, resolve
from extrapolate.run.resolved import ResolvedRun, resolve_run
from extrapolate.run.rows import diverged_rows, measurement_rows, measurement_samples
from extrapolate.tasks.depth_log import clear_logs
from extrapolate.tasks.kinds import RETRIEVAL
from extrapolate.training.train import TrainingDiverged


def run_cell(resolved: ResolvedRun, prepared: Prepared, folder: Path, reporter: Reporter) -> None:
    """Train or reuse, evaluate, append to the folder's tables. A diverged training is recorded as
    `status=diverged` rows, then `TrainingDiverged` goes on to the caller, which decides whether the other
    cells go on. Under torchrun every rank trains and evaluates its share; rank 0 alone writes."""
    from extrapolate.core.lock import table_lock

    writes = current().main
    try:
        trained = trained_model(resolved, prepared, reporter)
    except TrainingDiverged as diverged:
        reporter.done_training()
        if writes:
            with table_lock(folder):
                append_results(folder, diverged_rows(resolved, prepared, why_diverged(diverged)))
        raise
    measurements = evaluate(resolved, prepared, trained.model, reporter, folder)
    if writes:
        rows, positions = measurement_rows(resolved, prepared, trained.model.num_parameters(), measurements)
        with table_lock(folder):  # cluster jobs of one sweep append to the same tables
            # the prompts' records first: a cell in the table always has what its model answered beside it
            write_samples(folder, resolved.run_id, measurement_samples(resolved, prepared, measurements))
            write_outputs(folder, resolved, trained, rows, positions, evaluation_seconds(measurements))
        clear_logs(folder, resolved.run_id)  # the cell is in the table: its depth logs are done with


# request fields a run record's request leaves out: choices about the folder, not the measurement (the folder
# itself is the record's `out`)
UNRECORDED = ("out", "append", "overwrite")


def why_diverged(diverged: TrainingDiverged) -> str:
    """A diverged training's reason as its rows keep it (no cache path: a row names no machine's folders)."""
    return f"training diverged at step {diverged.step} (loss NaN or infinite); a lower --lr may help"


def run(request: RunRequest, reporter: Reporter | None = None) -> Path:
    """The main job. Returns the output folder. Under torchrun (`torchrun --nproc-per-node N -m extrapolate
    run …`) the N processes train one model on the global batch and split its evaluation."""
    from extrapolate.core.lock import folder_lock

    request = with_encoding(request)  # a pretrained model's RoPE as released where no encoding is given
    check_used([get_spec(request.encoding)], request.encoding_options)
    ignored = ignored_options(request, [request.encoding])  # before resolution fills a checkpoint's tokenizer
    resolved_request = resolve(request)
    request = resolved_request.request
    folder = output_folder(request)
    with process_group(request.device) as world:
        reporter = (reporter or Reporter()) if world.main else Reporter()
        if world.main:
            check_tables(folder)  # a damaged table in the output folder is refused before training, not after
        with main_first(world):  # rank 0 fills the corpus and tokenizer caches, the others read them
            with preparing(resolved_request, reporter.note):
                prepared = prepare(resolved_request)
        for note in ignored:
            reporter.warn(note)
        for note in prepared.notes:
            reporter.warn(note)
        for reason in prepared.left_out.values():  # only the retrieval is optional (RunRequest.optional_tasks)
            reporter.warn(f"{RETRIEVAL} left out: {reason}")
        resolved = resolve_run(resolved_request, prepared)
        if world.main:
            for note in check_folder(folder, [resolved], prepared, request.append, request.overwrite):
                reporter.warn(note)
        with contextlib.ExitStack() as stack:
            if world.main:
                stack.enter_context(new_folder_guard(folder))
                stack.enter_context(folder_lock(folder))
            run_cell(resolved, prepared, folder, reporter)  # a diverged training ends the run with its rows written
    return folder


@contextlib.contextmanager
def new_folder_guard(folder: Path):
    """Create the output folder; if it was new and the job fails before writing anything, remove it again,
    so a mistake never leaves an empty or half-made folder behind."""
    existed = folder.exists()
    writable_folder(folder)
    try:
        yield
    except BaseException:
        if not existed and folder.exists() and not any(folder.iterdir()):
            folder.rmdir()
        raise


def write_outputs(
    folder: Path,
    resolved: ResolvedRun,
    trained,
    rows: list[dict],
    positions: list[dict],
    evaluation: dict | None = None,
) -> None:
    from extrapolate.core.atomic import write_text
    from extrapolate.report.pages import write_run_report
    from extrapolate.training.finetune import read_lineage

    request = resolved.request
    table = append_results(folder, rows)
    append_positions(folder, positions)
    if trained.config is not None and rows:
        from extrapolate.report.training_log import append_training, probe_rows

        common = {
            "run_id": resolved.run_id,
            "encoding": resolved.spec.name,
            "seed": request.seed,
            "train_len": request.train_len,
        }
        append_training(folder, probe_rows(trained.summary, common))
    config_file = trained.folder / "config.json"
    record = {
        "run_id": resolved.run_id,
        "request": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(request).items() if k not in UNRECORDED
        },
        "train_config": json.loads(config_file.read_text()) if trained.config is not None else None,
        "model_config": asdict(trained.model.config),
        "model_folder": trained.folder.name,  # under the cache's models/ folder
        "finetune": read_lineage(trained.folder),  # base model, encoding, factor, L and the training at L′
        # what the evaluation ran with, defaults resolved (Self-Extend's window and group, LongRoPE's lists,
        # a randomized kind's L_max, KERPLE's learned r1 and r2)
        "encoding": {"name": resolved.spec.name, **trained.model.encoding.describe()},
        "training": {k: v for k, v in trained.summary.items() if k != "losses"},
        "evaluation": evaluation,  # its time: seconds in all and per task at each length
        "machine": rows[0].get("machine") if rows else None,  # where the rows were measured
        # where it wrote, for `--config` of a copy of this record (an absolute path would name this machine)
        "out": None if folder.is_absolute() else folder.as_posix(),
        **provenance(),
    }
    text = json.dumps(record, indent=2, default=str)
    write_text(folder / "run.json", text)  # the latest run in this folder
    write_text(folder / RUNS_FOLDER / f"{resolved.run_id}.json", text)  # every run, kept
    write_run_report(folder, table)
