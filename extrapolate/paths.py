"""Where cached corpora and trained models live: $EXTRAPOLATE_CACHE, else $XDG_CACHE_HOME/extrapolate."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("EXTRAPOLATE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "extrapolate"
