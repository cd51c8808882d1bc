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
        heads=heads, distances=parse_int_list(distances, "--distances"), position=position, width=width,
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
