"""A regular (non-editable) install carries what the package reads at run time: every task file, every suite
and each suite's committed reference, and finds them without the source checkout."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from extrapolate.core import paths
from extrapolate.tasks.files import tomllib

ROOT = Path(__file__).resolve().parent.parent


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def source_folder(package: str, package_dir: dict) -> Path:
    """The folder setuptools builds `package` from: the longest mapped prefix, the rest as subfolders."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in package_dir:
            return ROOT.joinpath(package_dir[prefix], *parts[cut:])
    return ROOT.joinpath(*parts)


def packaged_files() -> dict[Path, str]:
    """Source file -> its path inside the wheel, for every package-data file of the setuptools config."""
    config = setuptools_config()
    files = {}
    for package, patterns in config["package-data"].items():
        folder = source_folder(package, config.get("package-dir", {}))
        for pattern in patterns:
            for path in folder.glob(pattern):
                files[path] = "/".join(package.split(".") + [path.name])
    return files


def test_every_task_suite_and_reference_file_ships_in_the_wheel():
    from extrapolate.reproduce import load_suite

    shipped = packaged_files()
    tasks = [*sorted((ROOT / "tasks").glob("*.toml")), *sorted((ROOT / "tasks" / "ruler").glob("*.toml"))]
    tasks += sorted((ROOT / "tasks" / "suites").glob("*.toml"))
    assert tasks and all(path in shipped for path in tasks), sorted(set(tasks) - set(shipped))
    # in the wheel at the place of the repository's layout, where paths.data_dir looks for them
    assert shipped[ROOT / "tasks" / "suites" / "reference.toml"] == "extrapolate/_data/tasks/suites/reference.toml"
    assert shipped[ROOT / "tasks" / "ruler" / "vt.toml"] == "extrapolate/_data/tasks/ruler/vt.toml"
    for suite_file in (ROOT / "tasks" / "suites").glob("*.toml"):
        reference = ROOT / "results" / load_suite(str(suite_file)).name
        needed = [reference / name for name in ("results.csv", "spread.csv", "run.json", "report.md")]
        missing = [p for p in needed if p.exists() and p not in shipped]
        assert (reference / "results.csv") in shipped and not missing, missing
        assert shipped[reference / "results.csv"] == f"extrapolate/_data/results/{reference.name}/results.csv"


def test_every_code_package_is_listed():
    """The package list is written out (a mapped list and `find` do not combine): a new subpackage must be in it."""
    code = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "extrapolate").rglob("__init__.py")}
    assert code <= set(setuptools_config()["packages"]), sorted(code - set(setuptools_config()["packages"]))


def test_installed_package_reads_its_packaged_copies(monkeypatch):
    import extrapolate

    assert paths.data_dir("tasks") == ROOT / "tasks"  # this checkout
    monkeypatch.setattr(paths, "from_checkout", lambda: False)
    assert paths.data_dir("tasks", "suites") == Path(extrapolate.__file__).parent / "_data" / "tasks" / "suites"


def copy_source(target: Path) -> Path:
    """The working tree without build leftovers, so the wheel is built from what is checked out here."""
    junk = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".tmp-*")
    shutil.copytree(ROOT, target, ignore=junk)
    return target


def run(*args, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **options)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_wheel_round_trip_finds_tasks_suites_and_reference(tmp_path):
    """Build a wheel, install it into a fresh virtual environment (the dependencies come from this one, so no
    download), and use it from a folder that is not the checkout."""
    source = copy_source(tmp_path / "source")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        str(source),
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp_path / "wheel"),
    )
    (wheel,) = (tmp_path / "wheel").glob("extrapolate-*.whl")
    run(sys.executable, "-m", "venv", "--system-site-packages", str(tmp_path / "venv"))
    bin_dir = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    run(str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "COLUMNS": "200"}  # tables unwrapped
    cli = lambda *args: run(str(bin_dir / "extrapolate"), *args, cwd=elsewhere, env=env).stdout  # noqa: E731

    tasks = cli("tasks")
    assert all(path.stem in tasks for path in (ROOT / "tasks").glob("*.toml"))
    assert "llama3" in cli("encodings") and "--update" in cli("reproduce", "--help")
    probe = (
        "import extrapolate; from extrapolate.reproduce import load_suite, reference_folder; "
        "from extrapolate.tasks.files import load_task; load_task('passkey'); "
        "folder = reference_folder(load_suite('reference')); "
        "print(extrapolate.__file__); print((folder / 'results.csv').is_file())"
    )
    where, found = run(str(bin_dir / "python"), "-c", probe, cwd=elsewhere, env=env).stdout.split()
    assert Path(where).is_relative_to(tmp_path / "venv") and found == "True"


def test_every_results_folder_the_readme_names_is_committed_not_ignored():
    """`results/` is ignored except for the folders listed in .gitignore: a showcase the README describes but
    .gitignore does not except would silently never be committed."""
    import re

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    text = (ROOT / "README.md").read_text() + (ROOT / "results" / "README.md").read_text()
    folders = sorted(set(re.findall(r"results/([A-Za-z0-9_.-]+)/", text)))
    folders = [name for name in folders if not re.fullmatch(r".+-L\d+", name)]  # what `run` writes for a user
    assert folders
    probes = [f"results/{name}/results.csv" for name in folders]
    ignored = subprocess.run(["git", "check-ignore", *probes], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not ignored, f"named in the README but ignored by .gitignore: {ignored}"


def test_committed_run_records_name_no_path_of_the_machine_that_ran_them():
    """A committed result re-derives anywhere: its run records carry no absolute path (a scratch folder or a
    home directory of the machine that produced it)."""
    import json
    import re

    def strings(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)
        elif isinstance(value, str):
            yield value

    records = sorted((ROOT / "results").glob("*/run.json")) + sorted((ROOT / "results").glob("*/runs/*.json"))
    assert records
    absolute = re.compile(r"^(/|[A-Za-z]:[\\/]|~)")
    found = {
        str(path.relative_to(ROOT)): text
        for path in records
        for text in strings(json.loads(path.read_text()))
        if absolute.match(text)
    }
    assert not found, f"absolute paths in committed run records: {found}"
