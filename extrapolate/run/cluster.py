"""`extrapolate sweep --executor slurm`: the sweep's cells as SLURM jobs, submitted with submitit.

One job per cell. The first cell of each base model that is not trained yet trains it; the cells that reuse
that model (the RoPE scalings, its fine-tunes) wait for it (`afterok`), and a last job writes the report once
every cell job has ended (`afterany`). Each job appends its rows under the folder's table lock, so the one
results table gathers every cell. Submitting the same command again submits only what is missing: cells
already in the table, and cells whose job is still queued or running, are left alone.

Needs a file system shared by the submitting host and the nodes (the output folder and the model cache).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from extrapolate.core.atomic import write_text
from extrapolate.core.errors import UserError
from extrapolate.report.folder import check_tables
from extrapolate.report.table import load_results

JOBS = ".slurm"  # under the output folder: submitit's job files and logs, and the record of submitted jobs


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    gpus_per_task: int = 0
    cpus_per_task: int | None = None
    time_min: int = 24 * 60
    mem_gb: int | None = None
    cluster: str = "slurm"  # "local": submitit's local executor, the same code without a scheduler


@dataclass
class Submission:
    submitted: dict[str, str] = field(default_factory=dict)  # run_id -> job id
    waiting: list[str] = field(default_factory=list)  # run_ids whose earlier job is still queued or running
    done: list[str] = field(default_factory=list)  # run_ids already in the table
    report_job: str | None = None


# --- what runs on a node ----------------------------------------------------------------------------------


def cell_job(request, folder: Path) -> str:
    """One cell on a node: train or reuse its model, evaluate, append its rows under the table lock."""
    from extrapolate.run import Reporter, resolve, resolve_run, run_cell
    from extrapolate.run.prepare import prepare
    from extrapolate.training.train import TrainingDiverged

    planned = resolve(request)  # the cell's request, resolved where it was submitted: the same again here
    prepared = prepare(planned)
    resolved = resolve_run(planned, prepared)
    if resolved.run_id in finished(folder):  # a resubmitted job whose cell another job already wrote
        return "done"
    try:
        run_cell(resolved, prepared, folder, Reporter())
    except TrainingDiverged:  # its rows say so; the sweep's other jobs go on
        return "diverged"
    return "ok"


def report_job(folder: Path) -> str:
    from extrapolate.core.lock import table_lock
    from extrapolate.report.pages import write_report

    with table_lock(folder):
        write_report(folder)
    return "ok"


# --- submitting -------------------------------------------------------------------------------------------


def finished(folder: Path) -> set[str]:
    table = load_results(folder)
    return set(table["run_id"].astype(str)) if len(table) else set()


def queue_states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """{job id: (state, reason)} of the jobs SLURM still lists (queued, running), from squeue."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T %r"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        ).stdout
    except FileNotFoundError:
        raise UserError("--executor slurm: squeue is not on PATH (is this a SLURM login node?)") from None
    states = {}
    for line in out.splitlines():
        job, state, reason = (line.split(maxsplit=2) + ["", ""])[:3]
        states[job] = (state, reason)
    return states


def still_coming(record: dict[str, str], cluster: str) -> set[str]:
    """run_ids whose recorded job will still run. A job whose dependency failed never will: cancelled."""
    if cluster != "slurm":
        return set()  # the local executor's jobs have all ended when submit returns
    states = queue_states(sorted(set(record.values())))
    stuck = [job for job, (_, reason) in states.items() if "DependencyNeverSatisfied" in reason]
    if stuck:
        subprocess.run(["scancel", *stuck], check=False)
    return {run_id for run_id, job in record.items() if job in states and job not in stuck}


def require_submitit():
    """submitit, or one line saying how to install it (a dry run asks too: its plan would not submit)."""
    try:
        import submitit
    except ImportError:
        raise UserError("--executor slurm needs submitit: pip install 'extrapolate[cluster]'") from None
    return submitit


def executor(folder: Path, options: SlurmOptions, name: str):
    submitit = require_submitit()
    logs = folder / JOBS / "%j"
    if options.cluster == "local":
        ex = submitit.LocalExecutor(folder=logs)
        ex.update_parameters(timeout_min=options.time_min)
        return ex
    missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
    if missing:  # submitit would raise a bare RuntimeError for srun and fail at submission for sbatch
        raise UserError(
            f"--executor slurm needs a SLURM client on this machine: {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not on PATH (run from a login node, or use "
            "--executor local)"
        )
    ex = submitit.SlurmExecutor(folder=logs)
    params = dict(
        job_name=name,
        time=options.time_min,
        partition=options.partition,
        cpus_per_task=options.cpus_per_task,
        gpus_per_task=options.gpus_per_task or None,
        mem=f"{options.mem_gb}GB" if options.mem_gb else None,
    )
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return ex


@dataclass(frozen=True)
class Queued:
    """A job submitted by an earlier call and still queued or running (all a dependency needs is its id)."""

    job_id: str


def submit(ex, options: SlurmOptions, after: list, kind: str, fn, *args):
    """Submit fn(*args) once the jobs in `after` have ended (`afterok`, or `afterany` for the report)."""
    if options.cluster == "local":
        for job in after:  # no scheduler to hold it back: wait here
            job.wait()
    elif after:
        ex.update_parameters(dependency=f"{kind}:" + ":".join(str(job.job_id) for job in after))
    said = io.StringIO()  # submitit prints sbatch's stderr when it refuses; the one line below carries it
    try:
        with contextlib.redirect_stderr(said):
            job = ex.submit(fn, *args)
    except Exception as exc:
        if type(exc).__name__ != "FailedJobError":  # submitit's: sbatch ran and refused (no controller, bad partition)
            sys.stderr.write(said.getvalue())
            raise
        detail = " ".join(str(exc).split())
        raise UserError(
            f"SLURM refused the job ({detail[:300]}); jobs already submitted are recorded and "
            "the same command submits only what is missing"
        ) from None
    sys.stderr.write(said.getvalue())  # anything else said on the way (a warning) is not lost
    return job


def submit_sweep(cells, folder: Path, options: SlurmOptions) -> Submission:
    """Submit every cell of a planned sweep that is neither in the table nor still coming."""
    from extrapolate.training.checkpoint import is_complete
    from extrapolate.training.train import model_folder

    check_tables(folder)
    existed = folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    record_file = folder / JOBS / "jobs.json"
    record = json.loads(record_file.read_text()) if record_file.exists() else {}
    done, coming = finished(folder), still_coming(record, options.cluster)
    result = Submission()
    trainer: dict[Path, object] = {}  # base model folder -> the job that trains it
    jobs = []
    try:
        for cell in cells:
            resolved = cell.resolved
            run_id = resolved.run_id
            if run_id in done:
                result.done.append(run_id)
                continue
            base = None if resolved.is_pretrained else model_folder(resolved.train_config)
            if run_id in coming:
                result.waiting.append(run_id)
                if base is not None and base not in trainer and not is_complete(base):
                    trainer[base] = Queued(record[run_id])  # may be training the model: later cells wait for it
                continue
            after = [trainer[base]] if base in trainer else []
            ex = executor(folder, options, f"extrapolate-{resolved.spec.name}-s{resolved.request.seed}")
            job = submit(ex, options, after, "afterok", cell_job, resolved.request, folder.resolve())
            if base is not None and base not in trainer and not is_complete(base):
                trainer[base] = job  # this job trains the model; the cells after it reuse it
            jobs.append(job)
            record[run_id] = result.submitted[run_id] = str(job.job_id)
    finally:  # also when a submission fails: the jobs that did go in must not be submitted twice
        if record:
            write_text(record_file, json.dumps(record, indent=2))
        else:  # nothing went in (sbatch refused the first job): leave no trace of the attempt
            shutil.rmtree(folder / JOBS, ignore_errors=True)
            if not existed and not any(folder.iterdir()):
                folder.rmdir()
    if jobs:
        ex = executor(folder, options, "extrapolate-report")
        report = submit(ex, options, jobs, "afterany", report_job, folder)
        result.report_job = str(report.job_id)
        if options.cluster == "local":
            report.wait()  # without a scheduler the command lasts as long as its jobs
    return result
