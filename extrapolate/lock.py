"""A lock file per output folder, so two sweeps never interleave their writes to one results table."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from .errors import UserError

LOCK = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            try:
                pid = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid):
                raise UserError(f"another extrapolate process (pid {pid}) is writing to {folder}; wait for it or use another --out") from None
            path.unlink(missing_ok=True)  # a stale lock from a killed process
    else:
        raise UserError(f"could not lock {folder}")
    with os.fdopen(fd, "w") as handle:
        handle.write(str(os.getpid()))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
