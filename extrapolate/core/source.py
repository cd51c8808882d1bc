"""The commit the running code comes from, read once per process: a long run records the commit it started
from, not one made while it ran."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path


@cache
def git_sha() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=5,
        )
        return done.stdout.strip() if done.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
