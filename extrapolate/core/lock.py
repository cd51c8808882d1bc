"""A lock per output folder, so two runs never interleave their writes to one results table."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from extrapolate.core.errors import UserError, naming_path

LOCK = ".lock"


def check_unlocked(folder: Path) -> None:
    """Refuse a folder another live process holds, before any preparation (corpus, tokenizer, model load)
    that `folder_lock` would only refuse afterwards."""
    import fcntl

    path = folder / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file (or none readable): nothing holds the folder
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released at once below: only asking
    except BlockingIOError:
        pid = _holder(fd)
        if pid != os.getpid():  # this process's own lock (a sweep's cell checking its folder) is no other writer
            refuse(folder, pid)
    finally:
        os.close(fd)


def refuse(folder: Path, pid: int) -> None:
    named = f" (pid {pid})" if pid else ""
    raise UserError(f"another extrapolate process{named} is writing to {folder}; wait for it or use another --out")


def _holder(fd: int) -> int:
    """The pid a lock file names (0: not written yet, or unreadable)."""
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0)
    except (OSError, ValueError):
        return 0


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Holds `folder` for this process: an advisory flock on its lock file, which names the holder's pid. The
    kernel releases it when the holder dies however it dies, so a killed run leaves no lock that refuses the
    next one, and two processes starting at once cannot both hold it (the file is locked before it is read)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    with naming_path(path):  # often the first write into a results folder
        fd = _locked(folder, path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # before releasing it: a process waiting on this file finds it gone
        os.close(fd)


def _locked(folder: Path, path: Path) -> int:
    import fcntl

    for _ in range(8):
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)  # a data file's mode (less the umask)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            refuse(folder, pid)
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            return fd
        os.close(fd)  # the holder before removed this file as it finished: lock the one now at `path`
    raise UserError(f"could not lock {folder}")


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
