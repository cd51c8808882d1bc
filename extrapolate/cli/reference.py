"""The CLI reference (docs/cli.md) as Markdown, made from the command tree itself: every command and subcommand
with its usage, help and options, in the order `--help` lists them. It reads only what the commands declare
(names, help, defaults, types), never a terminal: no width, colour or environment variable changes a byte, so
the committed file can be checked against it (tests/test_docs.py). Hidden options (former names kept working)
are left out. Regenerate: `python -m extrapolate.cli.reference > docs/cli.md`."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import PurePath

import typer

REGENERATE = "python -m extrapolate.cli.reference > docs/cli.md"
# the name a value's type shows in usage, as click names its types; the same whichever click typer uses
TYPE_NAMES = {int: "INTEGER", float: "FLOAT", str: "TEXT", bool: "BOOLEAN"}


def cli_reference() -> str:
    """Markdown for `extrapolate` and every command under it."""
    from extrapolate.cli.app import app

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated from the command line itself; do not edit by hand. After changing a command or an option,",
        f"regenerate it with `{REGENERATE}` (tests/test_docs.py fails while it differs).",
        f"Every command also takes {' / '.join(f'`{name}`' for name in help_names(root))}.",
        "",
    ]
    for path, command in walk(root, ("extrapolate",)):
        lines += command_section(path, command)
    return "\n".join(lines).rstrip("\n") + "\n"


def help_names(root) -> list[str]:
    """The help flags every command takes (the app's context settings; click's `--help` alone by default)."""
    return list(root.context_settings.get("help_option_names", ["--help"]))


def walk(command, path: tuple[str, ...]):
    """(path, command) for `command` and each visible subcommand below it, depth first, in declaration order."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from walk(sub, (*path, name))


def command_section(path: tuple[str, ...], command) -> list[str]:
    lines = [f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`", ""]
    if command.help:
        lines += [paragraphs(command.help), ""]
    lines += [f"Usage: `{usage(path, command)}`", ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    if arguments:
        lines += ["Arguments:", ""]
        lines += [f"- `{p.name.upper()}`: {paragraphs(p.help or '')}" for p in arguments]
        lines.append("")
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    panels: dict[str, list] = {}
    for option in options:  # grouped as `--help` groups them, first panel first
        panels.setdefault(getattr(option, "rich_help_panel", None) or "Options", []).append(option)
    for panel, members in panels.items():
        lines += [f"{panel}:", ""]
        lines += [option_line(option) for option in members]
        lines.append("")
    subcommands = [(n, c) for n, c in getattr(command, "commands", {}).items() if not c.hidden]
    if subcommands:
        lines += ["Commands:", ""]
        lines += [f"- `{name}`: {first_sentence(sub.help or '')}" for name, sub in subcommands]
        lines.append("")
    return lines


def usage(path: tuple[str, ...], command) -> str:
    words = [*path, "[OPTIONS]"]
    for param in command.params:
        if param.param_type_name == "argument":
            words.append(param.name.upper() if param.required else f"[{param.name.upper()}]")
    if getattr(command, "commands", None):
        words.append(
            "[COMMAND [ARGS]...]" if getattr(command, "invoke_without_command", False) else "COMMAND [ARGS]..."
        )
    return " ".join(words)


def option_line(option) -> str:
    flags = " / ".join(option.opts + option.secondary_opts)
    value = "" if option.is_flag else f" {type_name(option)}"
    notes = [paragraphs(option.help or "")] if option.help else []
    default = default_text(option)
    if default:
        notes.append(f"default: `{default}`")
    if option.multiple and "repeatable" not in (option.help or ""):
        notes.append("repeatable")
    if option.required:
        notes.append("required")
    return f"- `{flags}{value}`" + (f": {'; '.join(notes)}" if notes else "")


def type_name(option) -> str:
    """The value's type: the option's own metavar where it names one (a parsed option's, which typer releases
    name differently), else from the annotation where typer keeps it (its own click), else from click's type."""
    if getattr(option, "metavar", None):
        return option.metavar
    descriptor = getattr(option, "type_descriptor", None)
    if descriptor is not None:
        annotation = descriptor.annotation
        inner = getattr(annotation, "__args__", None)
        if inner and getattr(annotation, "__origin__", None) is list:
            annotation = inner[0]
        if inspect.isclass(annotation) and issubclass(annotation, PurePath):
            return "PATH"
        return TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)).upper())
    return option.type.name.upper()


def default_text(option) -> str:
    """The default as given on the command line; nothing where there is none (its help says what applies)."""
    default = option.default
    unset = getattr(default, "name", None) == "UNSET"  # click ≥ 8.3's marker of no default
    if unset or callable(default) or default is None or (option.multiple and not default):
        return ""
    if option.is_flag:
        if not option.secondary_opts:
            return ""  # a lone flag is off unless given
        return option.opts[0] if default else option.secondary_opts[0]
    return str(default)


def paragraphs(text: str) -> str:
    """Help text on one line: a docstring's line breaks joined, rich markup's escaped brackets unescaped."""
    return " ".join(inspect.cleandoc(text).split()).replace("\\[", "[")


def first_sentence(text: str) -> str:
    text = paragraphs(text)
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


if __name__ == "__main__":
    sys.stdout.buffer.write(cli_reference().encode("utf-8"))  # UTF-8 whatever the locale
