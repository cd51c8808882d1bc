"""A lock file per output folder, so two sweeps never interleave their writes to one results table."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from extrapolate.core.errors import UserError, naming_path

LOCK = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_unlocked(folder: Path) -> None:
    """Refuse a folder another live process holds, before any preparation (corpus, tokenizer, model load)
    that `folder_lock` would only refuse afterwards."""
    pid = _holder(folder / LOCK)
    if pid and pid != os.getpid() and _alive(pid):
        raise UserError(
            f"another extrapolate process (pid {pid}) is writing to {folder}; wait for it or use another --out"
        )


def _holder(path: Path) -> int:
    """The pid a lock file names (0: none, or unreadable)."""
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # a data file's mode (less the umask)
            break
        except FileExistsError:
            check_unlocked(folder)
            path.unlink(missing_ok=True)  # a stale lock from a killed process
    else:
        raise UserError(f"could not lock {folder}")
    with naming_path(path), os.fdopen(fd, "w") as handle:  # often the first write into a results folder
        handle.write(str(os.getpid()))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


TABLE_LOCK = ".table.lock"


@contextlib.contextmanager
def table_lock(folder: Path) -> Iterator[None]:
    """Waits for exclusive use of a folder's tables: every writer of results (a local run, each cluster job of a
    sweep) appends under it, so concurrent jobs never lose each other's rows. An advisory flock, which local
    file systems and NFSv4 honour; released by the kernel if its holder dies."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / TABLE_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
