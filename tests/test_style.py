"""The code's format and lint rules (pyproject.toml, [tool.ruff]) hold everywhere: the test command CI runs fails
on an unformatted file or a lint error, so no change lands that `ruff format` / `ruff check` would alter."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    command = [shutil.which("ruff")] if shutil.which("ruff") else [sys.executable, "-m", "ruff"]
    return subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module", autouse=True)
def ruff_installed():
    if ruff("--version").returncode != 0:
        pytest.fail("ruff is missing: pip install -e '.[test]'")


def test_lint_clean():
    result = ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_formatted():
    result = ruff("format", "--no-cache", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr
