"""What every CLI command shares: one-line errors (exit code 2, the policy of `core.errors`), number bounds by
flag, list parsing."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

import typer
from rich.console import Console
from typer.core import TyperGroup

from extrapolate.core.errors import UserError, exhaustion_line, is_out_of_memory, os_error_line, peer_lost_line
from extrapolate.core.numbers import FLAG_BOUNDS, check_number, parse_float_list, parse_int_list, parse_name_list  # noqa: F401
from extrapolate.encodings.options import flag_bounds

try:  # typer ≥ 0.20 vendors its own click; older releases use the click package
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover
    from click import exceptions as click_exceptions

stdout = Console()
stderr = Console(stderr=True)
for _console in (stdout, stderr):  # off a terminal (a log, a pipe) a line is never wrapped: paths stay whole
    _console.soft_wrap = not _console.is_terminal
# the range of every numeric flag: the commands' own, and those of the encodings' options (`encodings show`)
OPTION_BOUNDS = {**FLAG_BOUNDS, **flag_bounds()}


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
            with sigterm_as_interrupt():
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
            if peer_lost_line(exc):  # the process that stopped says why; this one only that it stopped too
                fail(peer_lost_line(exc), 1)
            if not is_out_of_memory(exc):
                raise  # a bug: its traceback
            fail(exhaustion_line(exc))
        except OSError as exc:  # a full disk, or the system refused a path no check foresees (read-only, /proc)
            fail(exhaustion_line(exc) or os_error_line(exc))
        if code == INTERRUPTED:  # typer turns Ctrl-C inside a command into this exit code, silently
            interrupted()
        if isinstance(code, int) and code:
            sys.exit(code)
        return code


INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
TERMINATED = 143  # 128 + SIGTERM: `kill`, a container's stop, a scheduler's end of the job's time


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised wherever the process is, as Ctrl-C's KeyboardInterrupt is: every clean-up runs (the
    folder's lock, temporary files, the depth logs) before the one line."""


_signals = threading.local()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While a command runs, SIGTERM stops it as Ctrl-C does (the default would end the process on the spot,
    without a word and without its clean-up); a second SIGTERM during the clean-up is ignored."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    _signals.terminated = False

    def terminate(signum, frame):
        if not _signals.terminated:
            _signals.terminated = True
            raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted() -> None:
    if getattr(_signals, "terminated", False):
        fail("terminated (SIGTERM); finished work is kept, run the same command again to resume", TERMINATED)
    fail("interrupted; finished work is kept, run the same command again to resume", INTERRUPTED)


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
    """Whether a parameter's value becomes a Path (newer typer releases keep the annotation; older ones a click.Path or
    their TyperPath, a subclass of it in some releases and of click's ParamType alone in others, 0.26)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        annotation = descriptor.annotation
        return annotation is Path or Path in getattr(annotation, "__args__", ())  # Path or Optional[Path]
    return any(cls.__name__ in ("Path", "TyperPath") for cls in type(getattr(param, "type", None)).__mro__)


def non_empty_path(process_value, param):
    def process(ctx, value):
        if isinstance(value, str) and not value.strip():
            raise UserError(f"{param.opts[0]}: give a path, not an empty string")
        return process_value(ctx, value)

    return process


def number_checked(callback):
    def check(ctx, param, value):
        check_number(param.opts[0], value, OPTION_BOUNDS.get(param.opts[0]))
        return value if callback is None else callback(ctx, param, value)

    return check


def renamed(value, old_value, old: str, new: str):
    """An option's value given by its name (`new`) or by its former one (`old`), which still works and says so."""
    if old_value is None:
        return value
    warn(f"{old} is called {new} now (the old name still works)")
    return old_value


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table on stdout: rich on a terminal, tab-separated lines with a header elsewhere (no value cut)."""
    if not stdout.is_terminal:
        import sys

        sys.stdout.write("\n".join([title, "\t".join(columns), *("\t".join(row) for row in rows)]) + "\n")
        sys.stdout.flush()
        return
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    stdout.print(table)
