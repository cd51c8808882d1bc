"""The options a run was given (`--encoding-option`), read from its run record: what sets apart two runs of
one encoding that measured the same cell (STRING with and without its attention factor), so a label can
name it instead of a run id."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

# An option added after runs were recorded, and the value a record made before it ran with: STRING's rows
# measured before its attention factor computed it as 1.
PREDATES = {"string": {"attention_factor": 1.0}}
LONGEST = 24  # options longer than this as text (LongRoPE's factor lists) leave the run id to tell runs apart


def shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def record_options(record: dict) -> str:
    """ "name=value,…" of a run record's options (sorted), with the value a record ran with before an option
    existed; "" where it had none."""
    encoding = record.get("encoding") or {}
    options = dict((record.get("request") or {}).get("encoding_options") or [])
    for name, value in PREDATES.get(encoding.get("name"), {}).items():
        if name not in encoding:
            options.setdefault(name, value)
    return ",".join(f"{name}={shown(value)}" for name, value in sorted(options.items()))


def run_options(folder: Path) -> dict[str, str]:
    """run id -> its options as text, for every run record of the folder that has options."""
    options = {}
    for path in sorted((Path(folder) / "runs").glob("*.json")):
        record = json.loads(path.read_text())
        text = record_options(record)
        if text and len(text) <= LONGEST:
            options[str(record.get("run_id", path.stem))] = text
    return options


def with_options(table: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The table with an `options` column (text, "" for none) that `label_variants` reads."""
    if table.empty:
        return table.assign(options="")
    options = run_options(folder)
    return table.assign(options=[options.get(run, "") for run in table["run_id"].astype(str)])
