"""Declarative task files (TOML) under tasks/: loaded, validated field by field, versioned."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from pathlib import Path

from .config import config_hash
from .errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks"


@dataclass(frozen=True)
class PasskeyTask:
    version: int
    name: str
    description: str
    variant: str
    task_sentence: str
    filler: str
    key_line: str
    question: str
    answer: str
    key_digits: int
    depths: tuple[float, ...]
    trials: int
    distractors: int
    seed: int
    threshold: float

    @property
    def identity(self) -> str:
        """Recorded with results: the same identity means the same prompts."""
        return f"{self.name}-v{self.version}-{self.variant}-{config_hash(self.__dict__, 8)}"


def _check(data: dict, path: str) -> PasskeyTask:
    expected = {f.name: f.type for f in fields(PasskeyTask)}
    for name in expected:
        if name not in data:
            raise UserError(f"task file {path}: missing field '{name}'")
    unknown = sorted(set(data) - set(expected))
    if unknown:
        raise UserError(f"task file {path}: unknown field '{unknown[0]}'")

    def need(ok: bool, field: str, what: str):
        if not ok:
            raise UserError(f"task file {path}: field '{field}' {what}")

    need(isinstance(data["version"], int) and data["version"] >= 1, "version", "must be an integer ≥ 1")
    need(data["variant"] in ("classic", "compact"), "variant", "must be 'classic' or 'compact'")
    for text in ("name", "task_sentence", "filler", "key_line", "question", "answer"):
        need(isinstance(data[text], str) and data[text].strip() != "", text, "must be a non-empty string")
    need("{key}" in data["key_line"], "key_line", "must contain {key}")
    need("{key}" in data["answer"], "answer", "must contain {key}")
    need(isinstance(data["key_digits"], int) and 1 <= data["key_digits"] <= 12, "key_digits", "must be an integer in 1…12")
    depths = data["depths"]
    need(isinstance(depths, list) and depths and all(isinstance(d, (int, float)) and 0 <= d <= 1 for d in depths),
         "depths", "must be a non-empty list of numbers in [0, 1]")
    need(isinstance(data["trials"], int) and data["trials"] >= 1, "trials", "must be an integer ≥ 1")
    need(isinstance(data["distractors"], int) and data["distractors"] >= 1, "distractors", "must be an integer ≥ 1")
    if isinstance(data["key_digits"], int):  # distractors are other keys of the same width: there must be enough
        pool = 9 * 10 ** (data["key_digits"] - 1) - 1
        need(data["distractors"] <= pool, "distractors", f"must be at most {pool} with {data['key_digits']}-digit keys")
    need(isinstance(data["seed"], int), "seed", "must be an integer")
    need(isinstance(data["threshold"], (int, float)) and 0 < data["threshold"] <= 1, "threshold", "must be in (0, 1]")
    return PasskeyTask(**{**data, "depths": tuple(float(d) for d in depths), "threshold": float(data["threshold"])})


def load_task(name_or_path: str) -> PasskeyTask:
    path = Path(name_or_path)
    if not path.exists():
        path = TASKS_DIR / f"{name_or_path}.toml"
    if not path.exists():
        from .registry import unknown_name_message

        raise UserError(unknown_name_message("task", name_or_path, list_task_names() + ["perplexity"]))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"task file {path.name} is not valid TOML: {exc}") from None
    return _check(data, path.name)


def list_task_names() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("*.toml")) if TASKS_DIR.exists() else []
