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


CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root, when running from a source checkout


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


def writable_folder(folder: Path, what: str = "output folder") -> Path:
    """Create `folder` (and its parents) or fail in one line: checked before any work whose results it would hold."""
    from extrapolate.core.errors import UserError

    folder_target(folder, what)  # a file in the way says so, not "file exists"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {folder}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise UserError(f"{what} {folder} is not writable")
    return folder


def file_target(path: Path, flag: str) -> Path:
    """Check, creating nothing, that a file can be written at `path` (given by `flag`): not a folder, in a folder
    that can be made and written. For commands that write their file only at the end of long work."""
    from extrapolate.core.errors import UserError

    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; name a file in it")
    folder_target(path.parent, f"{flag}'s folder")
    return path


def folder_target(folder: Path, what: str = "output folder") -> Path:
    """Check, creating nothing, that `folder` can be made and written: for commands that write only at the end,
    so a failure before then leaves no empty folder behind."""
    from extrapolate.core.errors import UserError

    if folder.exists() and not folder.is_dir():
        raise UserError(f"{what} {folder} is a file")
    existing = folder
    while not existing.exists():  # the nearest ancestor that exists is where the folders will be made
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"cannot create {what} {folder}: {existing} is a file")
    if not os.access(existing, os.W_OK):
        raise UserError(f"{what} {folder} is not writable")
    return folder


FIGURE_FORMATS = ("png", "svg", "pdf")
# what writers put in an output folder: files with these endings (tables, reports, records, figures), the
# lock files, and the folders of run records and of retrieval depth logs
OUTPUT_FILE_ENDINGS = (".csv", ".md", ".json", ".jsonl") + tuple("." + f for f in FIGURE_FORMATS)
RUNS_FOLDER = "runs"  # one record per run, next to the latest run's run.json
DEPTH_LOGS_FOLDER = ".partial"  # a retrieval cell's finished depths (tasks/depth_log.py); ignored by git
SAMPLES_FOLDER = "samples"  # every prompt's reference, prediction and score, one file per run (report/samples.py)


def output_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(file names, folder names) that writers put in an output folder, from the modules that write them."""
    from extrapolate.core.lock import LOCK, TABLE_LOCK

    return (LOCK, TABLE_LOCK), (RUNS_FOLDER, DEPTH_LOGS_FOLDER, SAMPLES_FOLDER)


def check_output_names(folder: Path) -> None:
    """No folder where a writer of `folder` puts a file, and no file where it puts a folder: found before any
    work, instead of an error after a run's rows were appended but before its report was written."""
    from extrapolate.core.errors import UserError

    if not folder.is_dir():
        return
    files, folders = output_names()
    for entry in folder.iterdir():
        if entry.is_dir() and (entry.suffix.lower() in OUTPUT_FILE_ENDINGS or entry.name in files):
            raise UserError(f"{entry} is a folder where a file will be written; move it out of the output folder")
        if entry.name in folders and not entry.is_dir():
            raise UserError(f"{entry} is a file where a folder will be written; move it out of the output folder")


def figure_file(path: Path, flag: str = "--plot") -> Path:
    """A figure's path, checked before anything is computed: a known format, not a folder, a folder to go in."""
    from extrapolate.core.errors import UserError

    if path.suffix.lstrip(".").lower() not in FIGURE_FORMATS:
        raise UserError(f"{flag} {str(path)!r}: name a file ending in {', '.join('.' + f for f in FIGURE_FORMATS)}")
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; name a file in it")
    writable_folder(path.parent, "folder for the figure")
    return path
