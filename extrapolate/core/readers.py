"""Reading the files the tool is given or wrote earlier. Any failure to read or parse one becomes a one-line
UserError naming the file: a corrupt, truncated or foreign file is the user's to fix, never a traceback."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from extrapolate.core.errors import UserError


def first_line(exc: BaseException) -> str:
    """The gist of a parser's error: its first line (some span pages), or its type when it has no text."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    return text[:200] or type(exc).__name__


@contextlib.contextmanager
def reading(path: Path | str, what: str, hint: str = "") -> Iterator[None]:
    """Turn every error raised inside the block into "<what> <path> is corrupt ..." (the block reads and parses
    `path`). The parsers involved (JSON, CSV, TOML, pickle, safetensors, GGUF) each raise their own types,
    none of which the user can act on except by replacing the file."""
    try:
        yield
    except UserError:
        raise
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist") from None
    except Exception as exc:
        suffix = f"; {hint}" if hint else ""
        raise UserError(f"{what} {path} is corrupt or unreadable ({first_line(exc)}){suffix}") from None


def read_json(path: Path | str, what: str, fields: tuple[str, ...] = (), hint: str = "") -> dict:
    """A JSON object with at least `fields`, or a UserError naming the file."""
    with reading(path, what, hint):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"a JSON object was expected, not {type(data).__name__}")
        missing = [name for name in fields if name not in data]
        if missing:
            raise ValueError(f"no field '{missing[0]}'")
    return data
