"""The tables of one results folder, checked together before any work appends to them."""

from __future__ import annotations

from pathlib import Path

from extrapolate.report.table import POSITION_COLUMNS, POSITIONS_FILE, load_results, read_table


def check_tables(folder: Path) -> None:
    """Read the folder's tables before any work whose rows would be appended to them (and refuse a folder
    another process is writing to, before that work too)."""
    from extrapolate.core.lock import check_unlocked
    from extrapolate.core.paths import check_output_names
    from extrapolate.report.run_options import run_options
    from extrapolate.report.training_log import load_training

    check_unlocked(folder)
    check_output_names(folder)
    load_results(folder)
    read_table(folder / POSITIONS_FILE, POSITION_COLUMNS)
    load_training(folder)
    run_options(folder)  # the report reads every run record too
