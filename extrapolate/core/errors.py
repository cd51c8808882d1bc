"""Typed errors, and the one policy every command follows when something goes wrong.

- A mistake the user can fix (an unknown name, a value out of range, a missing, corrupt or foreign file)
  raises `UserError` with one line that says what and where; the CLI prints it as `error: <line>` and exits 2.
  Inside `core.readers.reading` a parser's own exception (or a `ValueError` raised there by a check on the
  parsed content) becomes such a line, naming the file.
- Resource exhaustion is no bug either: out of memory on the host or a device (`is_out_of_memory`), a full
  disk or quota (`is_disk_full`). `exhaustion_line` says it in one line naming the device's allocation or
  the path; the CLI prints it and exits 2, as for any file operation the system refused (`os_error_line`).
  The system's error for a failed write carries no file name, so a write names its path (`naming_path`).
- Everything else is a bug and shows its traceback: code catches only the exceptions it expects and knows
  what to do with, never `Exception` to go on silently. Where a library raises many types for one condition
  (a hub download, a model it cannot load, a compiler missing) `Exception` is caught at that one call and
  said: as a `UserError`, or as a warning with the fallback taken. `ValueError` is for arguments no command
  line can produce (a programming error), behind the `UserError` checks the commands run first.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

# ENOSPC: the file system is full; EDQUOT: the user's quota on it is (absent where the system has no quotas)
DISK_FULL = frozenset(code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None)


class UserError(Exception):
    """Bad input from the user (unknown name, invalid parameter, missing file, ...)."""


class PositionOutOfRange(UserError):
    """An encoding was asked for a position it has no representation for (a learned table past its rows)."""

    table = True  # a learned table's end: `--learned-policy clamp` runs past it on a model trained here

    def __init__(self, position: int, limit: int):
        super().__init__(f"position {position} is past the learned table of {limit} rows")
        self.position = position
        self.limit = limit


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation the machine cannot satisfy, on the host or a device: the request is too big, not a bug.
    Python's MemoryError, torch's OutOfMemoryError (a device), and a RuntimeError in an allocator's words
    ("CUDA out of memory", the CPU allocator's "can't allocate memory: you tried to allocate …")."""
    if not isinstance(exc, (MemoryError, RuntimeError)):
        return False
    text = str(exc).lower()
    return (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or "out of memory" in text
        or "can't allocate memory" in text
    )


def is_disk_full(exc: BaseException) -> bool:
    """A write the file system has no room for: the disk or the user's quota on it is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def os_error_line(exc: OSError) -> str:
    """'<path>: <reason>' for a refused file operation, the way the shell's tools say it."""
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def memory_owner(exc: BaseException) -> str:
    """Which memory ran out: a device's (torch names its allocator in the message) or the host's."""
    text = str(exc)
    for device in ("CUDA", "MPS", "XPU"):
        if device in text:
            return f"the {device} device"
    return "the host"


PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "[gloo]", "NCCL")


def peer_lost_line(exc: BaseException) -> str:
    """One line for a collective of a torchrun launch that failed because another of its processes stopped
    (killed, out of memory, an error of its own, which that process reports): "" for any other error."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return ""
    text = " ".join(str(exc).split())
    if type(exc).__name__ != "DistBackendError" and not any(mark in text for mark in PEER_LOST):
        return ""
    return (
        f"another process of this launch stopped ({text[:160]}); finished work is kept, run the same command "
        "again to resume"
    )


def exhaustion_line(exc: BaseException) -> str | None:
    """The one line for resource exhaustion, None for any other error: a full disk as "<path>: No space left on
    device" (the path a write names, `naming_path`), out of memory with the allocator's own words on what was
    asked of which device, and what to change."""
    if is_disk_full(exc):
        return os_error_line(exc)
    if is_out_of_memory(exc):
        detail = " ".join(str(exc).split())[:160]
        where = memory_owner(exc)
        return f"out of memory on {where}: a smaller --batch-size, width or length fits; finished work is kept" + (
            f" ({detail})" if detail else ""
        )
    return None


@contextlib.contextmanager
def naming_path(path: Path | str) -> Iterator[None]:
    """Inside the block, a full disk names `path`: the error of a failed write or close carries no file name,
    and "No space left on device" alone does not say which folder ran out of room."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc) and not exc.filename:
            exc.filename = str(path)
        raise
