"""Atomic file writes: write to a temporary file in the same folder, then rename over the target."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from extrapolate.core.errors import naming_path


def default_mode(folder: bool = False) -> int:
    """The mode `open()` (or `mkdir`) would give a new file (folder): 0o666 (0o777) less the umask; mkstemp's
    0o600 and mkdtemp's 0o700 would hide results from other users."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if folder else 0o666) & ~umask


@contextlib.contextmanager
def naming_target(path: Path) -> Iterator[None]:
    """A refused temporary file or rename names `path`, what the user asked for, not the temporary name."""
    try:
        yield
    except OSError as exc:
        exc.filename, exc.filename2 = str(path), None
        raise


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it replaces `path`, on failure it is removed. A full
    disk while writing names `path` (`core.errors.naming_path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_target(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    os.close(fd)
    try:
        with naming_path(path):
            yield Path(tmp)
        # an existing file keeps its mode, as an in-place write would
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else default_mode())
        with naming_target(path):
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_folder(path: Path | str) -> Iterator[Path]:
    """Yield a staging folder next to `path`; on success it becomes `path` (which may exist only as an empty
    folder), on failure it is removed: a reader never sees half a folder. What is in it gets the modes `open()`
    and `mkdir` would give. A full disk while filling it names `path` (`core.errors.naming_path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_target(path):
        staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".staging-{path.name}-"))
    try:
        with naming_path(path):
            yield staging
        for item in [staging, *staging.rglob("*")]:
            os.chmod(item, default_mode(folder=item.is_dir()))
        with naming_target(path):
            if path.exists():
                path.rmdir()  # only an empty folder: never replace files the caller did not write
            os.replace(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
