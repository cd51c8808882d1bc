"""Small files with one job: no module of the package grows past 450 lines (a module that does is doing two
things; split it by job, as report/labels.py from report/table.py and tasks/prompt_passes.py from passkey.py)."""

from pathlib import Path

import extrapolate

LIMIT = 450


def test_no_module_over_the_limit():
    root = Path(extrapolate.__file__).parent
    sizes = {path.relative_to(root): len(path.read_text().splitlines()) for path in root.rglob("*.py")}
    assert len(sizes) > 50  # the walk found the package
    assert {path: n for path, n in sizes.items() if n > LIMIT} == {}
