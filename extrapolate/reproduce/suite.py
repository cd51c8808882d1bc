"""Suite files (tasks/suites/*.toml): what `extrapolate reproduce` re-derives, the seeds whose spread sets
the tolerances, and the qualitative claims the suite exists to show. Validated field by field on load."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.errors import UserError
from extrapolate.report.shapes import CLAIM_KINDS, Claim
from extrapolate.run import RunRequest
from extrapolate.tasks.files import SUITES, TASKS_DIR, tomllib

SUITES_DIR = TASKS_DIR / SUITES


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    path: Path
    encodings: str
    seed: int  # the seed of the committed reference run
    spread_seeds: tuple[int, ...]  # further seeds whose spread (with `seed`) sets every tolerance
    request: RunRequest
    confidence: float  # family-wise: an unchanged code base passes with at least this probability
    nll_floor: float  # nats: no perplexity tolerance is tighter than this
    claims: tuple[Claim, ...]


def suite_path(name_or_path: str) -> Path:
    if not name_or_path.strip():
        raise UserError("--suite names no suite: give a suite's name (reference) or a suite file's path")
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise UserError(f"suite file {path} does not exist")
        return path
    path = SUITES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        from extrapolate.core.registry import unknown_name_message

        raise UserError(unknown_name_message("suite", name_or_path, [p.stem for p in SUITES_DIR.glob("*.toml")]))
    return path


def load_suite(name_or_path: str) -> Suite:
    path = suite_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"suite file {path.name} is not valid TOML: {_one_line(exc)}") from None
    try:
        return _parse(data, path)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else _one_line(exc)
        raise UserError(f"suite file {path.name} is malformed: {detail}") from None


# the fields a suite file may hold (and its [spread] table and each [[claims]] entry): a name misspelt is refused,
# not run as the default it stands in for
FIELDS = (
    *("name", "version", "encodings", "model", "train_len", "eval_lens", "steps", "batch_size", "lr", "tasks"),
    *("passkey_task", "eval_tokens", "train_dtype", "tokenizer", "seed", "position_std", "position_lr_scale"),
    *("embed_std", "spread", "claims"),
)
SPREAD_FIELDS = ("seeds", "confidence", "nll_floor")
CLAIM_FIELDS = ("text", "kind", "encoding", "times_L", "value", "other")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # a suite's name names its folder under results/


def _known(data: dict, fields: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}unknown field '{unknown[0]}' (a suite takes {', '.join(fields)})")


def _parse(data: dict, path: Path) -> Suite:
    _known(data, FIELDS, "")
    spread = data.get("spread", {})
    if not isinstance(spread, dict):
        raise ValueError("spread must be a table ([spread] with seeds, confidence and nll_floor)")
    _known(spread, SPREAD_FIELDS, "spread: ")
    name = data["name"]
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"name must be letters, digits, '-' and '_' (it names a folder under results/), got {name!r}")
    seed = _integer(data, "seed", minimum=0)
    spread_seeds = tuple(_integer({"seed": s}, "seed", minimum=0) for s in _list(spread, "seeds"))
    if seed in spread_seeds or len(set(spread_seeds)) != len(spread_seeds):
        raise ValueError("spread.seeds must be distinct and must not repeat the reference seed")
    if len(spread_seeds) < 2:
        raise ValueError("spread.seeds needs at least 2 seeds (3 runs with the reference) to estimate a spread")
    request = RunRequest(
        encoding="rope",
        model=str(data["model"]),
        train_len=_integer(data, "train_len", minimum=2),
        eval_lens=tuple(_integer({"n": n}, "n", minimum=1) for n in _list(data, "eval_lens")),
        steps=_integer(data, "steps", minimum=1),
        batch_size=_integer(data, "batch_size", minimum=1),
        lr=_positive(data, "lr"),
        tasks=tuple(str(t) for t in _list(data, "tasks")),
        passkey_task=str(data.get("passkey_task", "passkey")),
        eval_tokens=_integer(data, "eval_tokens", minimum=1),
        train_dtype=str(data.get("train_dtype", "bfloat16")),
        tokenizer=str(data.get("tokenizer", "bytes")),
        seed=seed,
        device="cpu",
        position_std=_optional(data, "position_std", zero_ok=True),
        position_lr_scale=_optional(data, "position_lr_scale"),
        embed_std=_optional(data, "embed_std"),
    )
    if min(request.eval_lens) < request.train_len:
        raise ValueError(f"eval_lens must be at least train_len ({request.train_len}), got {min(request.eval_lens)}")
    if request.train_dtype not in ("float32", "bfloat16"):
        raise ValueError(f"train_dtype must be float32 or bfloat16, got {request.train_dtype!r}")
    confidence = _positive(spread, "confidence")
    if not confidence < 1:
        raise ValueError(f"spread.confidence must be in (0, 1), got {confidence}")
    # a suite exists to show its claims: none at all is a damaged or unfinished file
    claims = tuple(_claim(c, i) for i, c in enumerate(_list(data, "claims")))
    return Suite(
        name,
        _integer(data, "version", minimum=1),
        path,
        str(data["encodings"]),
        seed,
        spread_seeds,
        request,
        confidence,
        _positive(spread, "nll_floor"),
        claims,
    )


def _claim(data: dict, index: int) -> Claim:
    if not isinstance(data, dict):
        raise ValueError(f"claim {index + 1} is not a table")
    _known(data, CLAIM_FIELDS, f"claim {index + 1}: ")
    kind = data.get("kind")
    if kind not in CLAIM_KINDS:
        raise ValueError(f"claim {index + 1}: kind must be one of {', '.join(CLAIM_KINDS)}, got {kind!r}")
    times = _integer(data, "times_L", minimum=1)
    if kind == "lower_than":
        return Claim(str(data["text"]), kind, str(data["encoding"]), times, other=str(data["other"]))
    return Claim(str(data["text"]), kind, str(data["encoding"]), times, value=_positive(data, "value"))


def _list(data: dict, key: str) -> list:
    value = data[key]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{key} must be a non-empty list")
    return value


def _integer(data: dict, key: str, minimum: int) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer ≥ {minimum}, got {value!r}")
    return value


def _positive(data: dict, key: str) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a finite number > 0, got {value!r}")
    return float(value)


def _optional(data: dict, key: str, zero_ok: bool = False) -> float | None:
    """An optional number of the suite (None: the project's default); finite, > 0 (≥ 0 with `zero_ok`)."""
    if key not in data:
        return None
    if zero_ok and data[key] == 0 and not isinstance(data[key], bool):
        return 0.0
    return _positive(data, key)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
