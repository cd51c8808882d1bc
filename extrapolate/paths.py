"""Where cached corpora and trained models live ($EXTRAPOLATE_CACHE, else $XDG_CACHE_HOME/extrapolate), and
where the data the package reads at run time lives (task files, suites, the committed reference results)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("EXTRAPOLATE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "extrapolate"


CHECKOUT = Path(__file__).resolve().parent.parent  # the repository root, when running from a source checkout


def from_checkout() -> bool:
    """Whether the package runs from a source checkout (an editable install included): its folder sits next to
    the project's pyproject.toml and tasks/. An installed wheel's parent is site-packages, which has neither."""
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "tasks").is_dir()


def data_dir(*parts: str) -> Path:
    """A data folder named by its place in the repository, e.g. data_dir("tasks", "suites").

    From a checkout: the checkout's own folder, so an edited task file counts at once. Installed: the copy the
    wheel carries under extrapolate/_data/ (pyproject.toml maps it there). pip unpacks wheels, so that copy is
    a real folder and is read with pathlib and pandas like the checkout's."""
    if from_checkout():
        return CHECKOUT.joinpath(*parts)
    packaged = resources.files("extrapolate") / "_data"
    for part in parts:
        packaged = packaged / part
    return Path(str(packaged))
