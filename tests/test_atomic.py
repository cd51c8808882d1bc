"""Atomic writes: all or nothing, and the file ends with the mode an ordinary write would give it."""

import errno
import os
import shutil
import stat
from pathlib import Path

import pytest

from extrapolate.core.atomic import atomic_folder, atomic_path, write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_file_gets_the_umask_mode_not_mkstemps_private_one(tmp_path, umask_022):
    path = tmp_path / "results.csv"
    write_text(path, "a,b\n")
    assert path.read_text() == "a,b\n"
    assert mode(path) == 0o644


def test_existing_file_keeps_its_mode(tmp_path, umask_022):
    path = tmp_path / "summary.md"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_text(path, "new")
    assert path.read_text() == "new"
    assert mode(path) == 0o640


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("finished work")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert path.read_text() == "finished work"
    assert os.listdir(tmp_path) == ["run.json"]


def test_figures_are_saved_with_the_umask_mode_and_leave_no_temporary(tmp_path, umask_022):
    import matplotlib.pyplot as plt

    from extrapolate.report.plots import save_figure

    for name in ("passkey.png", "passkey.svg"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        save_figure(fig, tmp_path / name)
        assert mode(tmp_path / name) == 0o644
    assert (tmp_path / "passkey.png").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (tmp_path / "passkey.svg").read_bytes()[:500]
    assert sorted(os.listdir(tmp_path)) == ["passkey.png", "passkey.svg"]


@pytest.mark.parametrize("name", ["figure.svg", "figure.png", "figure.pdf"])
def test_a_figure_drawn_twice_is_saved_as_the_same_bytes(tmp_path, name):
    # A re-derivation that moves no number must leave committed plots unchanged (no timestamp, no random ids).
    import time

    import matplotlib.pyplot as plt

    from extrapolate.report.plots import save_figure

    saved = []
    for attempt in range(2):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 0, 2], label="rope")
        ax.fill_between([0, 1, 2], [0, 0, 0], [1, 0, 2], alpha=0.2)  # clipped paths carry the ids
        ax.legend()
        save_figure(fig, tmp_path / f"{attempt}-{name}")
        saved.append((tmp_path / f"{attempt}-{name}").read_bytes())
        if attempt == 0:
            time.sleep(1.1)  # a timestamp with one-second resolution would differ
    assert saved[0] == saved[1]


def test_a_folder_appears_whole_with_ordinary_modes_or_not_at_all(tmp_path, umask_022):
    target = tmp_path / "hf"
    with pytest.raises(RuntimeError), atomic_folder(target) as staging:
        (staging / "config.json").write_text("{}")
        raise RuntimeError("killed halfway")
    assert list(tmp_path.iterdir()) == []
    target.mkdir()  # an empty folder may stand where the new one goes
    with atomic_folder(target) as staging:
        (staging / "sub").mkdir()
        (staging / "sub" / "model.safetensors").write_bytes(b"x")
        os.chmod(staging / "sub" / "model.safetensors", 0o600)  # as some writers leave their files
    assert mode(target) == 0o755 and mode(target / "sub") == 0o755
    assert mode(target / "sub" / "model.safetensors") == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]


def no_space(path, *args, **kwargs):
    """A write that finds the disk full: the system's error names no file."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    """A failed write carries no file name; the atomic writers add the one they were writing, for a full disk
    or quota only (any other error keeps what the system said)."""
    from extrapolate.core.errors import exhaustion_line

    path = tmp_path / "results.csv"
    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(OSError) as raised:
        write_text(path, "a,b\n")
    assert exhaustion_line(raised.value) == f"{path}: No space left on device"
    assert list(tmp_path.iterdir()) == []  # no temporary left behind
    with pytest.raises(OSError) as raised, atomic_folder(tmp_path / "hf"):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
    assert exhaustion_line(raised.value) == f"{tmp_path / 'hf'}: {os.strerror(errno.EDQUOT)}"
    with pytest.raises(OSError) as raised, atomic_path(path):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    assert raised.value.filename is None and exhaustion_line(raised.value) is None


def test_a_full_disk_under_a_results_folder_is_one_line_naming_the_path(tmp_path, monkeypatch):
    """`extrapolate report` on a disk that fills up: one line naming the file it was writing, exit code 2 (as
    for any file operation the system refuses), no traceback."""
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    folder = tmp_path / "results"
    shutil.copytree(Path(__file__).parents[1] / "results" / "smollm2-finetune", folder)
    written = Path.write_text

    def full_for_atomic_writes(path, *args, **kwargs):  # the temporary files of core/atomic.py
        return (no_space if path.name.startswith(".tmp-") else written)(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_for_atomic_writes)
    result = CliRunner().invoke(app, ["report", str(folder)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert lines == [f"error: {folder / 'report.md'}: No space left on device"]


def test_out_of_memory_is_one_rule_for_host_and_device():
    """The CLI's one line and an evaluation cell's `oom` row ask the same question."""
    import torch

    from extrapolate.core.errors import exhaustion_line, is_out_of_memory

    cpu = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried "
        "to allocate 17179869184 bytes. Error code 12 (Cannot allocate memory)"
    )
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    for exc, owner in (
        (MemoryError(), "the host"),
        (cuda, "the CUDA device"),
        (cpu, "the host"),
        (RuntimeError("MPS backend out of memory"), "the MPS device"),
    ):
        assert is_out_of_memory(exc)
        assert exhaustion_line(exc).startswith(f"out of memory on {owner}: a smaller --batch-size, width or length")
    for exc in (RuntimeError("shape mismatch"), ValueError("out of memory"), OSError(errno.ENOMEM, "no memory")):
        assert not is_out_of_memory(exc) and exhaustion_line(exc) is None


def test_a_refused_write_names_the_target_not_its_temporary_file(tmp_path):
    """Replacing a folder with a file fails; the error names what the user asked to write."""
    target = tmp_path / "results.json"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(OSError) as raised:
        write_text(target, "{}")
    assert raised.value.filename == str(target) and raised.value.filename2 is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary file left


def test_a_refused_folder_names_the_target_not_its_staging_folder(tmp_path):
    target = tmp_path / "export"
    (target / "kept").mkdir(parents=True)  # not empty: never replaced
    with pytest.raises(OSError) as raised:
        with atomic_folder(target) as staging:
            (staging / "config.json").write_text("{}")
    assert raised.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"] and (target / "kept").is_dir()
