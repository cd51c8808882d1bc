"""The options a run was given (`--encoding-option`), read from its run record: what sets apart two runs of
one encoding that measured the same cell (STRING with and without its attention factor), so a label can
name it instead of a run id."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from extrapolate.core.readers import reading

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


# What a model trained here was trained with: where two runs of one encoding and options differ in these, a
# label names the difference ("rope [steps=2400]"), as it names encoding options
TRAINING = ("model", "width", "layers", "heads", "corpus", "tokenizer", "train_len", "steps", "batch_size", "lr")
TRAINING += ("curriculum", "train_tasks", "passkey_fraction")


def training_differences(records: list[dict]) -> dict[str, str]:
    """run id -> "name=value,…" of the training settings in which it differs from the other runs of its
    encoding and options (empty where none differ)."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        key = ((record.get("encoding") or {}).get("name"), record_options(record))
        groups.setdefault(key, []).append(record)
    differences = {}
    for group in groups.values():
        requests = [record.get("request") or {} for record in group]
        # a setting an older record lacks is not a difference (it ran with the default then in force)
        fields = [f for f in TRAINING if len({json.dumps(r.get(f), sort_keys=True) for r in requests if f in r}) > 1]
        for record, request in zip(group, requests):
            named = (f"{f}={shown(request[f])}" for f in fields if f in request)
            differences[str(record.get("run_id"))] = ",".join(named)
    return differences


def read_run_record(path: Path) -> dict:
    """A run record as the report reads it: a JSON object whose `encoding` and `request`, where present, are
    objects too; anything else is one line naming the file (a damaged record is the user's to replace)."""
    with reading(path, "run record", "replace it, or remove it from runs/"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise ValueError(f"a JSON object was expected, not {type(record).__name__}")
        for field in ("encoding", "request"):
            if not isinstance(record.get(field) or {}, dict):
                raise ValueError(f"its '{field}' is not an object")
    return record


def run_options(folder: Path) -> dict[str, str]:
    """run id -> its options as text (its encoding options, then the training settings that set it apart from
    the other runs of its encoding), for every run record of the folder that has any."""
    records = {}
    for path in sorted((Path(folder) / "runs").glob("*.json")):
        record = read_run_record(path)
        records[str(record.get("run_id", path.stem))] = record
    differences = training_differences(list(records.values()))
    options = {}
    for run, record in records.items():
        text = ",".join(part for part in (record_options(record), differences.get(run, "")) if part)
        if text and len(text) <= LONGEST:
            options[run] = text
    return options


def with_options(table: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The table with an `options` column (text, "" for none) that `label_variants` reads."""
    if table.empty:
        return table.assign(options="")
    options = run_options(folder)
    return table.assign(options=[options.get(run, "") for run in table["run_id"].astype(str)])
