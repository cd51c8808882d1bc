"""The `extrapolate` command line: parse into the library's request objects, call one library function,
render. No logic here: commands and their options only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from extrapolate.cli.catalogue import encodings_app, models_app, tasks_list
from extrapolate.cli.closing import latest_run_id, render_closing
from extrapolate.cli.options import DeviceOpt, KernelOpt, with_request
from extrapolate.cli.render import (
    RichReporter,
    render_bench,
    render_bench_row,
    render_comparison,
    render_submission,
    render_sweep_plan,
    reporter_for,
)
from extrapolate.cli.search import longrope_search
from extrapolate.cli.util import OneLineErrors, fail, renamed, stdout, warn
from extrapolate.core.defaults import DEFAULT_TASKS
from extrapolate.core.source import git_sha
from extrapolate.run.request import RunRequest

app = typer.Typer(
    cls=OneLineErrors,
    help="How far past its training length does a positional encoding hold up?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def show_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        stdout.print(f"extrapolate {version('extrapolate')}", highlight=False)
        raise typer.Exit()


@app.callback()
def top(
    version: Annotated[
        bool, typer.Option("--version", help="print the version and exit", callback=show_version, is_eager=True)
    ] = False,
) -> None:
    """How far past its training length does a positional encoding hold up?"""
    git_sha()  # the commit this command starts from, recorded in its rows however long it runs


app.add_typer(encodings_app, name="encodings")

QuietOpt = Annotated[bool, typer.Option(help="no progress output, only warnings and errors", rich_help_panel="Output")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the listing as JSON (a list of objects)")]


app.command("tasks")(tasks_list)


@app.command()
@with_request(tasks=None)
def run(
    encoding: Annotated[
        Optional[str],
        typer.Option(
            help="positional encoding (see `extrapolate encodings`); default rope, and for a pretrained model its "
            "RoPE as released (the scaling it ships with, if any)",
            rich_help_panel="Model",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for weights, data order and prompts", rich_help_panel="Training")] = 0,
    finetune_steps: Annotated[
        int,
        typer.Option(
            help="then fine-tune at L' for this many steps, with the scaling set for L'", rich_help_panel="Training"
        ),
    ] = 0,
    dry_run: Annotated[
        bool, typer.Option(help="print the plan and a time estimate; train nothing", rich_help_panel="Output")
    ] = False,
    quiet: QuietOpt = False,
    request: RunRequest = None,
) -> None:
    """Train (or reuse) a model with ENCODING at --train-len, evaluate it up to --eval-len, write results."""
    from dataclasses import replace

    from extrapolate.core.launch import main_process
    from extrapolate.run import run as run_job

    request = replace(request, encoding=encoding and encoding.lower(), seed=seed, finetune_steps=finetune_steps)
    if dry_run:
        from extrapolate.run.sweep import plan_run

        folder, plan = plan_run(request, reporter_for(quiet))
        render_sweep_plan(plan, folder, request.device)
        return
    folder = run_job(request, reporter_for(quiet) if main_process() else None)
    if main_process():  # under torchrun: rank 0 speaks for the job
        render_closing(folder, [latest_run_id(folder)], "summary.md")


@app.command()
@with_request(out_help="output folder (default results/sweep-L<L>)", tasks=",".join(DEFAULT_TASKS))
def sweep(
    encodings: Annotated[
        str,
        typer.Option(
            help="classic (the eight seed encodings, the RoPE scalings and NoPE), newer, all, "
            "or a comma-separated list of encodings and groups; with a pretrained --model, `released` is its own "
            "encoding as it ships (e.g. released,yarn --factor 4: both in one table)",
            rich_help_panel="Model",
        ),
    ] = "classic",
    seeds: Annotated[str, typer.Option(help="comma-separated seeds", rich_help_panel="Training")] = "0",
    dry_run: Annotated[
        bool, typer.Option(help="print the plan and a time estimate; train nothing", rich_help_panel="Output")
    ] = False,
    finetune_steps: Annotated[
        Optional[str],
        typer.Option(
            help="fine-tune steps at L' per encoding, e.g. 0,25,100,400 (0: zero-shot at L')",
            rich_help_panel="Training",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            help="local: every cell in this process; slurm: one SLURM job per cell (needs the \\[cluster] extra)",
            rich_help_panel="Cluster",
        ),
    ] = "local",
    partition: Annotated[
        Optional[str],
        typer.Option(help="slurm: partition to submit to (default: the cluster's)", rich_help_panel="Cluster"),
    ] = None,
    gpus_per_task: Annotated[int, typer.Option(help="slurm: GPUs per job", rich_help_panel="Cluster")] = 0,
    cpus_per_task: Annotated[
        Optional[int], typer.Option(help="slurm: CPU cores per job", rich_help_panel="Cluster")
    ] = None,
    time_min: Annotated[
        int, typer.Option(help="slurm: time limit per job in minutes", rich_help_panel="Cluster")
    ] = 1440,
    quiet: QuietOpt = False,
    request: RunRequest = None,
) -> None:
    """Every encoding × seed on the same model, data and budget; one results table and one report."""
    from extrapolate.cli.util import parse_int_list
    from extrapolate.core.launch import main_process
    from extrapolate.core.numbers import SEED_MAX
    from extrapolate.run.sweep import submit_job, sweep_job

    steps = parse_int_list(finetune_steps, "--finetune-steps", 0) if finetune_steps is not None else None
    if executor not in ("local", "slurm"):
        fail(f"--executor must be local or slurm, got {executor!r}")
    slurm_only = {
        "--partition": partition is not None,
        "--gpus-per-task": gpus_per_task != 0,
        "--cpus-per-task": cpus_per_task is not None,
        "--time-min": time_min != 1440,
    }
    if executor == "local" and any(slurm_only.values()):
        given = [k for k, was_given in slurm_only.items() if was_given]
        verb = "configures" if len(given) == 1 else "configure"
        warn(f"{', '.join(given)} {verb} SLURM jobs, and --executor is local: ignored")
    if executor == "slurm":
        from extrapolate.run.cluster import require_submitit

        require_submitit()  # before a plan is printed that could not be submitted
    if executor == "slurm" and not dry_run:
        from extrapolate.run.cluster import SlurmOptions

        options = SlurmOptions(partition, gpus_per_task, cpus_per_task, time_min)
        folder, submission = submit_job(
            request, encodings, parse_int_list(seeds, "--seeds", 0, SEED_MAX), options, steps
        )
        render_submission(submission, folder)
        return
    folder, plan = sweep_job(
        request,
        encodings,
        parse_int_list(seeds, "--seeds", 0, SEED_MAX),
        reporter_for(quiet) if main_process() else None,
        dry_run,
        steps,
    )
    if dry_run:
        render_sweep_plan(plan, folder, request.device)
    elif main_process():
        render_closing(folder, [cell.resolved.run_id for cell in plan[0]], "report.md")


@app.command()
def report(folder: Annotated[Path, typer.Argument(help="a results folder (with results.csv)")]) -> None:
    """Regenerate report.md (and summary.md, where the folder has one) and every figure from a folder's results
    table alone."""
    from extrapolate.report.pages import write_report

    report_page = write_report(folder)
    written = [report_page.name, *(["summary.md"] if (report_page.parent / "summary.md").exists() else [])]
    figures = sorted(p.name for p in report_page.parent.glob("*.png"))
    stdout.print(f"wrote {report_page.parent}/: {', '.join(written + figures)}", highlight=False)


@app.command()
def reproduce(
    suite: Annotated[str, typer.Option(help="suite name under tasks/suites/ or a TOML path")] = "reference",
    update: Annotated[
        bool, typer.Option(help="replace the committed reference with this run (shows the diff)")
    ] = False,
    spread: Annotated[
        bool,
        typer.Option(
            help="with --update: also run the suite's spread seeds and write the seed spread that sets every tolerance"
        ),
    ] = False,
    reuse_models: Annotated[bool, typer.Option(help="reuse cached models instead of training from scratch")] = False,
    out: Annotated[Optional[Path], typer.Option(help="keep the fresh run in this folder")] = None,
    keep: Annotated[Optional[Path], typer.Option(hidden=True, help="the former name of --out")] = None,
) -> None:
    """Re-run a reference suite and compare with results/<suite>: every quantity within the tolerance its
    measured seed spread implies, every claim holding."""
    from extrapolate.reproduce import reproduce_job

    keep = renamed(out, keep, "--keep", "--out")
    outcome = reproduce_job(
        suite, RichReporter(), replace_reference=update, spread=spread, reuse_models=reuse_models, keep=keep
    )
    if outcome.comparison is not None:
        render_comparison(outcome.comparison)
    for text, holds, detail in outcome.spread_claims or []:
        stdout.print(
            f"{'[green]✓[/]' if holds else '[red]✗[/]'} {text} over the spread seeds: {detail}", highlight=False
        )
    if update:
        if outcome.spread_claims and not all(h for _, h, _ in outcome.spread_claims):
            fail("a claim fails for some seed: the reference was not replaced", code=1)
        stdout.print(f"updated the reference in {outcome.reference}", highlight=False)
        return
    if not outcome.comparison.ok:
        fail("reproduce failed: quantities out of tolerance, cells changed or claims not holding (see above)", code=1)
    stdout.print("[bold green]reproduced[/]: every quantity within tolerance and every claim holds")


app.add_typer(models_app, name="models")
app.command("longrope-search")(longrope_search)


@app.command()
def export(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="a run folder (with run.json), a run record (runs/<run id>.json) or a model checkpoint folder"
        ),
    ],
    out: Annotated[Optional[Path], typer.Option(help="write the Hugging Face checkpoint to this folder")] = None,
    hf: Annotated[Optional[Path], typer.Option("--hf", hidden=True, help="the former name of --out")] = None,
) -> None:
    """Export a run's model as a Hugging Face checkpoint, with the RoPE scaling its run used (a model trained here
    as a Llama checkpoint; a pretrained one in its own family)."""
    from extrapolate.run.export import export_run

    out = renamed(out, hf, "--hf", "--out")
    if out is None:
        fail("export: give the folder to write with --out")
    export_run(run_dir, out)
    stdout.print(f"wrote {out}", highlight=False)


@app.command()
def bench(
    model: Annotated[str, typer.Option(help="size preset to measure")] = "small",
    eval_lens: Annotated[str, typer.Option(help="evaluation lengths")] = "4k,8k,16k,32k",
    lengths: Annotated[Optional[str], typer.Option(hidden=True, help="the former name of --eval-lens")] = None,
    encodings: Annotated[str, typer.Option(help="encodings to measure")] = "rope,alibi,t5,sinusoidal,yarn",
    device: DeviceOpt = "auto",
    dtype: Annotated[str, typer.Option(help="evaluation precision")] = "float32",
    transformers_row: Annotated[
        bool, typer.Option("--transformers/--no-transformers", help="measure an equivalent transformers Llama too")
    ] = True,
    kernel: KernelOpt = "auto",
    out: Annotated[Path, typer.Option(help="output folder")] = Path("results/bench"),
    profile: Annotated[
        bool, typer.Option(help="also profile one paired evaluation per length (OUT/profiles: op tables, traces)")
    ] = False,
    decode_steps: Annotated[
        int,
        typer.Option(
            help="also time greedy decoding of this many tokens after each length's prompt, per encoding (0: no)"
        ),
    ] = 0,
    retrieval_prompts: Annotated[
        int,
        typer.Option(
            help="prompts of the retrieval depth timed at each length, in micro-batches as the evaluation runs them "
            "(its time and peak memory; 0: none)"
        ),
    ] = 20,
) -> None:
    """Evaluation tokens/s and peak memory per encoding × length, training tokens/s and MFU, vs transformers;
    a retrieval depth's time and memory per length."""
    from extrapolate.bench.job import BenchRequest, bench_job
    from extrapolate.cli.util import parse_int_list, parse_name_list

    request = BenchRequest(
        model,
        tuple(parse_int_list(renamed(eval_lens, lengths, "--lengths", "--eval-lens"), "--eval-lens", 16, lengths=True)),
        tuple(parse_name_list(encodings, "--encodings")),
        device,
        dtype,
        transformers_row,
        kernel,
        out,
        profile,
        decode_steps,
        retrieval_prompts,
    )
    rows, summary = bench_job(request, on_row=render_bench_row)
    render_bench(rows, summary, out)


def main() -> None:
    from extrapolate.core.launch import launched, run_then_leave

    if launched():  # under torchrun: see run_then_leave for why the process skips teardown
        run_then_leave(app)
    app()


if __name__ == "__main__":
    main()
