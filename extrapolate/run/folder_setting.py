"""A results folder is one experiment. Before anything is trained, the cells a job will write are checked
against the rows and run records the folder holds: rows of another model, corpus, tokenizer, training length,
precision or evaluation setting are refused (or, with --append, added and said so), and a cell already in the
table measured another way is refused unless --overwrite replaces it. Nothing is ever replaced in silence."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from extrapolate.core.errors import UserError
from extrapolate.core.paths import RUNS_FOLDER
from extrapolate.report.table import load_results, of_kind, with_task_names
from extrapolate.run.prepare import Prepared
from extrapolate.run.resolved import ResolvedRun, task_setup
from extrapolate.run.rows import common_columns
from extrapolate.tasks.kinds import asked_kinds

# columns every row of one experiment shares (encoding, seed, factor and fine-tune steps vary by design)
SHARED_COLUMNS = ("model", "corpus", "tokenizer", "train_len", "dtype")
# request fields of the run records that fix how a measurement is made; a record without one predates it
SHARED_FIELDS = ("eval_tokens", "eval_docs", "protocol", "stride", "bos", "chat_template")


@dataclass(frozen=True)
class Difference:
    what: str  # e.g. "model", "perplexity's protocol", "eval_docs"
    here: str  # this job's value
    there: str  # the folder's values
    cell: bool  # the folder holds rows of this job's own cell (a replacement) rather than of other cells

    def __str__(self) -> str:
        return f"{self.what} {self.here} where its rows have {self.there}"


def check_folder(
    folder: Path, cells: list[ResolvedRun], prepared: Prepared, append: bool, overwrite: bool
) -> list[str]:
    """Refuse (UserError, one line) a job whose `cells` differ from what `folder` holds; return the notes to log
    (what --append adds beside, what --overwrite replaces)."""
    table = load_results(folder)
    if table.empty or not cells:
        return []
    records = run_records(folder)
    differences = [d for resolved in cells for d in cell_differences(resolved, prepared, table, records)]
    differences = list(dict.fromkeys(differences))
    replaced = [d for d in differences if d.cell]
    if replaced and not overwrite:
        raise UserError(
            f"{folder} already holds these cells measured another way ({replaced[0]}): --overwrite replaces "
            "their rows, or give another --out"
        )
    beside = [d for d in differences if not d.cell]
    if beside and not append:
        raise UserError(
            f"{folder} holds another experiment ({beside[0]}): --append adds these rows beside it, or give "
            "another --out"
        )
    again = [r for r in cells if (table["run_id"].astype(str) == r.run_id).any()]
    return (
        [f"--overwrite: replacing rows measured with {d.what} {d.there} by {d.here}" for d in replaced]
        + [f"--append: adding rows with {d.what} {d.here} beside rows with {d.there}" for d in beside]
        + [
            f"{r.spec.name} · seed {r.request.seed} is in {folder} already: measured again at "
            f"{', '.join(map(str, r.lengths))}, the rows it measures replaced, the others kept"
            for r in again
        ]
    )


def cell_differences(
    resolved: ResolvedRun, prepared: Prepared, table: pd.DataFrame, records: dict[str, dict]
) -> list[Difference]:
    """How one cell's rows would differ from the folder's: its shared columns, each task's protocol, the
    evaluation fields of the run records (the folder's own cell's record when it has one, else every record)."""
    own = table[table["run_id"].astype(str) == resolved.run_id]
    mine = not own.empty
    columns = common_columns(resolved, prepared)
    out = []
    for column in SHARED_COLUMNS:
        out += differ(column, columns[column], table[column], mine)
    setup = task_setup(resolved, prepared)
    named = with_task_names(table)
    for kind in asked_kinds(resolved.request.tasks):
        rows = table[of_kind(table, kind)]
        if kind.reads_task_file:  # another task file of the kind (qa2 beside qa1) is another task, not a protocol
            rows = rows[named.loc[rows.index, "task"] == kind.task_name(setup)]
        out += differ(f"{kind.task_name(setup)}'s protocol", kind.protocol(setup), rows["protocol"], mine)
    others = [records[resolved.run_id]] if resolved.run_id in records else list(records.values())
    for field in SHARED_FIELDS:
        if field == "stride":  # a window's step only where windows slide: the full protocol has none
            if resolved.request.protocol != "sliding":
                continue
            compared = [r for r in others if r.get("protocol") == "sliding"]
        else:
            compared = others
        there = pd.Series([text(r[field], field) for r in compared if field in r], dtype=object)  # None: a value
        out += differ(field, text(getattr(resolved.request, field), field), there, mine)
    return out


def differ(what: str, here, there: pd.Series, mine: bool) -> list[Difference]:
    """[the difference] where `here` is none of the filled values `there` (compared as text: 256 and 256.0 alike)."""
    values = sorted({text(v) for v in there if v is not None and not (isinstance(v, float) and v != v)})
    if not values or text(here) in values:
        return []
    return [Difference(what, text(here), " and ".join(values), mine)]


UNSET = {"eval_docs": "all"}  # what an unset request field means, as a message says it


def text(value, field: str = "") -> str:
    if value is None:
        return UNSET.get(field, "none")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def run_records(folder: Path) -> dict[str, dict]:
    """{run id: its recorded request} of every run record in the folder that can be read (an unreadable one
    is left to the commands that read it)."""
    out = {}
    for path in sorted((folder / RUNS_FOLDER).glob("*.json")):
        try:
            request = json.loads(path.read_text(encoding="utf-8")).get("request")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(request, dict):
            out[path.stem] = request
    return out
