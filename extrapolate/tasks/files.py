"""Declarative task files (TOML) under tasks/: loaded, validated field by field, versioned."""

from __future__ import annotations

import string
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

from extrapolate.core.config import config_hash
from extrapolate.core.errors import UserError
from extrapolate.core.identity import without_defaults
from extrapolate.core.numbers import INT64_MAX
from extrapolate.core.paths import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TASKS_DIR = data_dir("tasks")  # the checkout's tasks/, or the copy an installed wheel carries
SUITES = "suites"  # tasks/suites/ holds the reproduce suites, not task files
# where the task files lie, found by name: tasks/ (the passkey's) and each folder in it (RULER's in tasks/ruler/)
TASK_FOLDERS = (
    TASKS_DIR,
    *sorted(p for p in (TASKS_DIR.iterdir() if TASKS_DIR.exists() else ()) if p.is_dir() and p.name != SUITES),
)


def is_count(value, low: int, high: int | None = None) -> bool:
    """A task file's whole number in [low, high] (high None: up to int64's largest, as TOML's integers and
    torch's counts go; a bool is not one)."""
    top = INT64_MAX if high is None else high
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= top


def task_file(name: str) -> Path | None:
    """The task file of a task's name, or None."""
    return next((folder / f"{name}.toml" for folder in TASK_FOLDERS if (folder / f"{name}.toml").exists()), None)


@dataclass(frozen=True)
class PasskeyTask:
    """A retrieval task: key lines ("needles") hidden in filler, a question, the keys as the answer.

    The classic passkey has one needle with a numeric key (`key_digits`). Word keys (`keys`, a fixed list)
    make one-token answers possible. RULER-style variants add named needles: `needles` key lines with names
    from `names` (multi-key: one of them queried), `same_name` (multi-value: every needle under the queried
    name, all of its keys the answer, in order of appearance), `queries` > 1 (multi-query: several names asked,
    their keys the answer, in the order asked)."""

    version: int
    name: str
    description: str
    variant: str
    task_sentence: str
    filler: str
    key_line: str
    question: str
    answer: str
    key_digits: int  # numeric keys of this width; 0 when `keys` lists word keys
    depths: tuple[float, ...]
    trials: int
    distractors: int
    seed: int
    threshold: float
    keys: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    needles: int = 1
    queries: int = 1
    same_name: bool = False
    answer_join: str = ", "
    depth_floor: float = 0.0  # with `threshold`: every depth ≥ this too at a length that retrieves; 0 = none
    kind: ClassVar[str]  # the task kind that measures it, set by that kind's module (tasks/passkey.py)

    @property
    def identity(self) -> str:
        """Recorded with results: the same identity means the same prompts. It hashes the fields less the
        optional ones at their defaults (`identity.without_defaults`)."""
        return f"{self.name}-v{self.version}-{self.variant}-{config_hash(without_defaults(self, OPTIONAL), 8)}"

    @property
    def prompts_per_length(self) -> int:
        return self.trials * len(self.depths)

    @property
    def answer_keys(self) -> int:
        """Keys in one answer."""
        return self.needles if self.same_name else self.queries


# the fields a task file may leave out; at their defaults they are left out of its identity too
OPTIONAL = ("keys", "names", "needles", "queries", "same_name", "answer_join", "key_digits", "depth_floor")


def check_passkey_task(data: dict, path: str) -> PasskeyTask:
    expected = {f.name for f in fields(PasskeyTask)}
    for name in sorted(expected - set(OPTIONAL)):
        if name not in data:
            raise UserError(f"task file {path}: missing field '{name}'")
    unknown = sorted(set(data) - expected)
    if unknown:
        raise UserError(f"task file {path}: unknown field '{unknown[0]}'")

    def need(ok: bool, field: str, what: str):
        if not ok:
            raise UserError(f"task file {path}: field '{field}' {what}")

    def integer(field: str, low: int, high: int | None = None) -> None:
        need(
            is_count(data[field], low, high),
            field,
            f"must be an integer {'in ' + str(low) + '…' + str(high) if high else '≥ ' + str(low)}",
        )

    def words(field: str) -> None:
        value = data.get(field, [])
        need(
            isinstance(value, list)
            and all(isinstance(w, str) and w.strip() and w.strip() == w and " " not in w for w in value)
            and len(set(value)) == len(value),
            field,
            "must be a list of distinct words without spaces",
        )

    integer("version", 1)
    need(data["variant"] in ("classic", "compact"), "variant", "must be 'classic' or 'compact'")
    for text in ("name", "task_sentence", "filler", "key_line", "question", "answer"):
        need(isinstance(data[text], str) and data[text].strip() != "", text, "must be a non-empty string")
    # the fields filled with str.format, and the placeholders each is given (passkey/prompt.py); the question
    # is filled only when names are asked (several needles or queries), else used as written
    named = data.get("needles", 1) != 1 or data.get("queries", 1) != 1
    templates = {"key_line": ("key", "name"), "answer": ("key",), **({"question": ("name",)} if named else {})}
    used = {field: placeholders(data[field], path, field, allowed) for field, allowed in templates.items()}
    need("key" in used["key_line"], "key_line", "must contain {key}")
    need("key" in used["answer"], "answer", "must contain {key}")
    need("keys" not in data or bool(data["keys"]), "keys", "must list at least one word (or give key_digits)")
    need(("key_digits" in data) != bool(data.get("keys")), "key_digits", "or 'keys' must be given, not both")
    words("keys")
    words("names")
    if "key_digits" in data:
        integer("key_digits", 1, 12)
    for field in ("needles", "queries"):
        data.setdefault(field, 1)
        integer(field, 1, 64)
    need(isinstance(data.get("same_name", False), bool), "same_name", "must be true or false")
    need(isinstance(data.get("answer_join", ", "), str), "answer_join", "must be a string")
    depths = data["depths"]
    need(
        isinstance(depths, list)
        and depths
        and all(isinstance(d, (int, float)) and not isinstance(d, bool) and 0 <= d <= 1 for d in depths),
        "depths",
        "must be a non-empty list of numbers in [0, 1]",
    )
    # a depth twice would measure the same prompts twice and count them twice in the cell's accuracy
    need(len(set(map(float, depths))) == len(depths), "depths", "must not repeat a depth")
    integer("trials", 1)
    integer("distractors", 1)
    integer("seed", 0)
    threshold = data["threshold"]
    need(
        isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and 0 < threshold <= 1,
        "threshold",
        "must be in (0, 1]",
    )
    floor = data.get("depth_floor", 0.0)
    need(
        isinstance(floor, (int, float)) and not isinstance(floor, bool) and 0 <= floor <= threshold,
        "depth_floor",
        "must be in [0, threshold]",
    )
    if named:
        need(
            "name" in used["key_line"] and "name" in used["question"],
            "key_line",
            "and 'question' must contain {name} when there are several needles or queries",
        )
        distinct = 1 if data.get("same_name") else data["needles"]
        need(len(data.get("names", [])) >= distinct + 1, "names", f"must list at least {distinct + 1} names")
        need(
            data["queries"] <= data["needles"] and not (data.get("same_name") and data["queries"] > 1),
            "queries",
            "must be at most 'needles', and 1 with same_name",
        )
    # keys within a prompt are distinct, and distractor answers are other keys: the pool must hold them all
    pool = len(data["keys"]) if data.get("keys") else 9 * 10 ** (data["key_digits"] - 1)
    need(
        data["distractors"] + data["needles"] <= pool,
        "distractors",
        f"plus needles must be at most the {pool} possible keys",
    )
    values = {
        **data,
        "depths": tuple(float(d) for d in depths),
        "threshold": float(threshold),
        "depth_floor": float(floor),
        "keys": tuple(data.get("keys", ())),
        "names": tuple(data.get("names", ())),
        "key_digits": data.get("key_digits", 0),
    }
    return PasskeyTask(**values)


def placeholders(text: str, path: str, field: str, allowed: tuple[str, ...]) -> set[str]:
    """The placeholders `text`, a str.format template, uses (see `template_names`)."""
    return set(template_names(text, path, field, allowed))


def template_names(text: str, path: str, field: str, allowed: tuple[str, ...]) -> list[str]:
    """The placeholders `text`, a str.format template, uses, in order and as often as it uses them: only the bare
    ones `allowed` (no index, attribute, conversion or format spec: keys are numbers or words, names are words,
    and a spec would fail or cut the text only when prompts are built); a literal brace is written {{ or }}."""
    named = "only " + ", ".join("{" + name + "}" for name in allowed) if allowed else "none"
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:  # a lone { or }
        raise UserError(
            f"task file {path}: field '{field}' is not a valid template ({exc}); write {{{{ or }}}} for a literal brace"
        ) from None
    for _, name, spec, conversion in parsed:
        if name is not None and (name not in allowed or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise UserError(f"task file {path}: field '{field}' has placeholder {shown}; it may use {named}")
    return [name for _, name, _, _ in parsed if name is not None]


def load_task(name_or_path: str):
    """The task of a task file (a name under tasks/ or tasks/ruler/, or a TOML path): its `kind` (default:
    passkey) reads and checks the rest."""
    path = Path(name_or_path)
    if not path.exists() and (path.suffix == ".toml" or len(path.parts) > 1):  # a path, not a task's name
        raise UserError(f"task file {name_or_path} does not exist")
    if not path.exists():
        path = task_file(name_or_path) or path
    if not path.exists():
        from extrapolate.core.registry import unknown_name_message
        from extrapolate.tasks.kinds import without_task_file

        raise UserError(unknown_name_message("task", name_or_path, list_task_names() + without_task_file()))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"task file {path.name} is not valid TOML or cannot be read: {' '.join(str(exc).split())}"
        ) from None
    from extrapolate.tasks.kinds import RENAMED_KINDS, TASK_KINDS

    readers = [name for name, k in TASK_KINDS if k.reads_task_file]
    kind = data.pop("kind", next(name for name, k in TASK_KINDS if k.default_for_files))
    kind = RENAMED_KINDS.get(kind, kind) if isinstance(kind, str) else kind  # a file written under a kind's old name
    if kind not in readers:
        raise UserError(f"task file {path.name}: field 'kind' must be one of {', '.join(readers)}, not {kind!r}")
    return TASK_KINDS.get(kind).load_file(data, path)


def list_task_names() -> list[str]:
    return sorted(p.stem for folder in TASK_FOLDERS if folder.exists() for p in folder.glob("*.toml"))
