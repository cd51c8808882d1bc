"""What every CLI command shares: one-line errors (exit code 2), number bounds by flag, list parsing."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Callable

import typer
from rich.console import Console
from typer.core import TyperGroup

from .errors import UserError

try:  # typer ≥ 0.20 vendors its own click; older releases use the click package
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions

stdout = Console()
stderr = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    from rich.markup import escape

    # escaped: a message quoting a path or a library's text ("[enforce fail at …]") must print as written
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


def warn(message: str) -> None:
    """One yellow line on stderr (never wrapped, so it reads and greps as one), and the work goes on."""
    from rich.markup import escape

    stderr.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


class OneLineErrors(TyperGroup):
    """Turn every user mistake into one red line and exit code 2 (never a traceback or a usage dump)."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        check_inputs(self)
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
            interrupted()
        except (MemoryError, RuntimeError) as exc:
            if not out_of_memory(exc):
                raise
            detail = " ".join(str(exc).split())[:160]
            fail(f"out of memory: a smaller --batch-size, width or length fits; finished work is kept ({detail})")
        except OSError as exc:  # the system refused a path the checks could not foresee (a read-only mount, /proc)
            fail(os_error_line(exc))
        if code == INTERRUPTED:  # typer turns Ctrl-C inside a command into this exit code, silently
            interrupted()
        if isinstance(code, int) and code:
            sys.exit(code)
        return code


def os_error_line(exc: OSError) -> str:
    """'<path>: <reason>' for a refused file operation, the way the shell's tools say it."""
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def interrupted() -> None:
    fail("interrupted; finished work is kept, run the same command again to resume", INTERRUPTED)


def out_of_memory(exc: BaseException) -> bool:
    """An allocation the machine cannot satisfy (host or device): the request is too big, not a bug."""
    text = str(exc).lower()
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or "out of memory" in text or "can't allocate memory" in text)


def check_inputs(command) -> None:
    """Check every parameter of `command` and its subcommands as it is parsed: through `check_number`, a NaN, an
    infinity or a meaningless count fails in one line naming the option, before the command starts any work.
    A path given as an empty string fails too (it would become "." and write into the current folder)."""
    for param in command.params:
        param.callback = number_checked(param.callback)
        if takes_path(param):
            param.process_value = non_empty_path(param.process_value, param)
    for sub in getattr(command, "commands", {}).values():
        check_inputs(sub)


def takes_path(param) -> bool:
    """Whether a parameter's value becomes a Path (typer ≥ 0.20 keeps the annotation, older ones a click.Path)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        annotation = descriptor.annotation
        return annotation is Path or Path in getattr(annotation, "__args__", ())  # Path or Optional[Path]
    return type(getattr(param, "type", None)).__name__ == "Path"


def non_empty_path(process_value, param):
    def process(ctx, value):
        if isinstance(value, str) and not value.strip():
            raise UserError(f"{param.opts[0]}: give a path, not an empty string")
        return process_value(ctx, value)

    return process


def number_checked(callback):
    def check(ctx, param, value):
        check_number(param.opts[0], value)
        return value if callback is None else callback(ctx, param, value)

    return check



def parse_int_list(text: str, what: str, minimum: int | None = None) -> list[int]:
    values = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        scale = 1
        if part.endswith("k"):
            part, scale = part[:-1], 1024
        try:
            value = int(part) * scale
        except ValueError:
            raise UserError(f"{what}: {part!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise UserError(f"{what} must be ≥ {minimum}, got {value}")
        values.append(value)
    if not values:
        raise UserError(f"{what}: give at least one number")
    return values


def parse_float_list(text: str, what: str) -> list[float]:
    """Comma-separated finite numbers (LongRoPE's per-pair factors); what they must satisfy is checked by the
    encoding, which knows how many it needs."""
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"{what}: {part!r} is not a number") from None
        if not math.isfinite(value):
            raise UserError(f"{what}: {part!r} is not a finite number")
        values.append(value)
    if not values:
        raise UserError(f"{what}: give at least one number")
    return values


def parse_name_list(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class Bound:
    holds: Callable[[float], bool]
    text: str


def at_least(minimum: int) -> Bound:
    return Bound(lambda v: v >= minimum, f"at least {minimum}")


POSITIVE = Bound(lambda v: v > 0, "> 0")
# The range in which each numeric option means something, by its flag; every command shares these names.
# Floats are also checked to be finite, whether listed here or not (NaN passes every comparison).
OPTION_BOUNDS = {
    "--train-len": at_least(2), "--eval-len": at_least(1), "--factor": POSITIVE, "--width": at_least(1),
    "--layers": at_least(1), "--heads": at_least(1), "--embed-std": POSITIVE,
    "--position-std": Bound(lambda v: v >= 0, "≥ 0 (0: zeros)"), "--position-lr-scale": POSITIVE, "--steps": at_least(1), "--batch-size": at_least(1),
    "--lr": POSITIVE, "--seed": at_least(0), "--stride": at_least(1), "--eval-tokens": at_least(1),
    "--eval-docs": at_least(1), "--passkey-fraction": Bound(lambda v: 0 <= v < 1, "in [0, 1)"),
    "--finetune-steps": at_least(0), "--finetune-len": at_least(2), "--finetune-lr": POSITIVE,
    "--gpus-per-task": at_least(0), "--cpus-per-task": at_least(1), "--time-min": at_least(1),  # sweep on SLURM
    # encodings show
    "--head-dim": at_least(2), "--base": Bound(lambda v: v > 1, "> 1"), "--original-len": at_least(1),
    "--seq-len": at_least(1), "--position": at_least(0), "--beta-fast": POSITIVE, "--beta-slow": POSITIVE,
    "--window": at_least(1), "--group": at_least(1), "--leak": Bound(lambda v: v >= 1, "≥ 1 (1 is plain RoPE)"),
    "--fraction": Bound(lambda v: 0 < v <= 1, "in (0, 1]"), "--scale-base": POSITIVE, "--max-position": at_least(1),
    "--r1": POSITIVE, "--r2": POSITIVE, "--fire-c": POSITIVE, "--threshold": POSITIVE,
}


def check_number(flag: str, value) -> None:
    """One line naming `flag` when a numeric option's value is not finite or outside its meaningful range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise UserError(f"{flag} must be a finite number, got {value}")
    bound = OPTION_BOUNDS.get(flag)
    if bound is not None and not bound.holds(value):
        raise UserError(f"{flag} must be {bound.text}, got {value:g}")
