"""The commit the running code comes from, read once per process: a long run records the commit it started
from, not one made while it ran."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

EDITED = "+dirty"  # after the commit of code that differs from it: the commit alone cannot make the run again


@cache
def git_sha() -> str:
    """The checkout's commit, with EDITED where the package or its task files differ from it (results and
    other files may: a run writes its own); "unknown" outside a git checkout."""
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head is None:
            return "unknown"
        edited = git("status", "--porcelain", "--untracked-files=no", "--", "extrapolate", "tasks", top=True)
        return head + (EDITED if edited else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def git(*args: str, top: bool = False) -> str | None:
    """git's output in the package's checkout (from its top folder with `top`), None where git refuses."""
    package = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, cwd=package.parent if top else package, timeout=5
    )
    return done.stdout.strip() if done.returncode == 0 else None
