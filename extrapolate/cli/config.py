"""`--config FILE` of `run` and `sweep`: option values kept in a file, so a run's settings can be kept, shared
and re-run. A TOML file holds options by their flag names (`train-len = 512` or `train_len = 512`); a run's
`run.json` holds its resolved request, so giving it back re-creates the same run id. The values become the
command's defaults: a flag given on the command line overrides the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from extrapolate.core.errors import UserError

# a run record's request fields under the option names of the command that reads it
RECORD_NAMES = {"encoding_options": "encoding_option"}
# a run's options as `sweep` names them (a list of one)
SWEEP_NAMES = {"encoding": "encodings", "seed": "seeds"}
LISTS = (
    "tasks",
    "train_tasks",
    "eval_lens",
    "encodings",
    "seeds",
    "finetune_steps",
)  # comma-separated on the command line
# request fields a command sets itself from its options (run's optional retrieval, from its default --tasks)
DERIVED = ("optional_tasks",)


def read_config(path: Path) -> dict:
    """The option values of a TOML file or of a run record (`run.json`, `runs/<run id>.json`): its request."""
    from extrapolate.core.readers import read_json, reading

    if path.suffix == ".json":
        record = read_json(path, "run record", fields=("request",))
        values = from_record(record["request"])
        folder = record_folder(path, record)
        return {**values, "out": str(folder)} if folder is not None else values
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with reading(path, "config file"), open(path, "rb") as handle:
        data = tomllib.load(handle)
    return {name.replace("-", "_"): value for name, value in data.items()}


def record_folder(path: Path, record: dict) -> Path | None:
    """The folder a run record's run wrote to: the one the record lives in (its run.json, or runs/<run id>.json
    under it), else the `out` it recorded; None for a record of neither."""
    from extrapolate.core.paths import RUNS_FOLDER
    from extrapolate.report.table import RESULTS_FILE

    path = Path(path).resolve()
    folder = path.parent.parent if path.parent.name == RUNS_FOLDER else path.parent
    if (folder / RESULTS_FILE).exists():
        return Path(os.path.relpath(folder)) if folder.is_relative_to(Path.cwd()) else folder
    out = record.get("out")
    return Path(out) if isinstance(out, str) and out else None


def from_record(request: dict) -> dict:
    """A recorded request as option values: unset fields left to the defaults, a pretrained model's tokenizer
    (recorded as the checkpoint's own, which it always uses) left out, encoding options as NAME=VALUE items."""
    from extrapolate.run.checkpoint import is_pretrained

    if not isinstance(request, dict):
        raise UserError("the run record's request is not a table of option values")
    given = {n: v for n, v in request.items() if v is not None and v != [] and n not in DERIVED}
    values = {RECORD_NAMES.get(name, name): value for name, value in given.items()}
    if isinstance(values.get("tasks"), list):
        values["tasks"] = [recorded_task(task) for task in values["tasks"]]
    if is_pretrained(str(values.get("model", ""))):
        values.pop("tokenizer", None)
    if "encoding_option" in values:
        pairs = values["encoding_option"]
        if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in pairs
        ):
            raise UserError('the run record\'s encoding_options must be [name, value] pairs, e.g. [["window", 64]]')
        values["encoding_option"] = [f"{name}={as_text(value)}" for name, value in pairs]
    return values


def recorded_task(task):
    """A recorded request's task as --tasks names it. A record names the kinds it measured, and a record written
    before the kinds were renamed names the retrieval kind "passkey", which --tasks now reads as the task file
    of that name: it stands for the run's retrieval task (the record's passkey_task)."""
    from extrapolate.tasks.kinds import RENAMED_KINDS, RETRIEVAL

    return RETRIEVAL if task in RENAMED_KINDS else task


def as_text(value) -> str:
    """A value as a flag takes it: lists comma-separated, yes/no as true/false."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(as_text(item) for item in value)
    return str(value)


def check_type(path: Path, name: str, value) -> None:
    """A file's value of the kind its request field holds: a count a whole number, a yes/no option true or
    false, a number a number. Click would read `true` as 1 step, or 1e30 as a count, without a word."""
    import dataclasses

    from extrapolate.run.request import RunRequest

    kinds = {f.name: str(f.type).split(" |")[0] for f in dataclasses.fields(RunRequest)}
    kind, text = kinds.get(name), isinstance(value, str)  # a string is parsed as the flag's would be
    if kind == "int" and not text and (isinstance(value, bool) or not isinstance(value, int)):
        raise UserError(f"--config {path}: {name} must be a whole number, got {value!r}")
    if kind == "float" and not text and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise UserError(f"--config {path}: {name} must be a number, got {value!r}")
    if kind == "bool" and not isinstance(value, bool):
        raise UserError(f"--config {path}: {name} must be true or false, got {value!r}")


def apply_config(ctx: click.Context, param: click.Parameter, path: Path | None) -> Path | None:
    """The --config callback (eager: it runs before the other options are read): the file's values become the
    command's defaults, each checked to name one of its options."""
    if path is None:
        return path
    values = read_config(Path(path))
    params = {p.name: p for p in ctx.command.params}
    names = set(params)
    defaults = {}
    for name, value in values.items():
        if name not in names and SWEEP_NAMES.get(name) in names:  # a run's record given to sweep
            name, value = SWEEP_NAMES[name], [value]
        if name not in names or name == "config":
            raise UserError(f"--config {path}: {name!r} is not an option of `{ctx.command.name}`")
        check_type(path, name, value)
        if getattr(params[name], "is_flag", False) and not isinstance(value, bool):  # --quiet, --dry-run, …
            raise UserError(f"--config {path}: {name} must be true or false, got {value!r}")
        if getattr(params[name], "multiple", False) and not isinstance(value, list):  # one item of a repeatable
            value = [value]
        defaults[name] = as_text(value) if name in LISTS and not isinstance(value, str) else value
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return path
