"""The benchmark scripts' tables: a row appended to a CSV file, its header written with the first row."""

from __future__ import annotations

import csv
from pathlib import Path


def append_row(table: Path, columns: list[str], row: dict) -> None:
    table.parent.mkdir(parents=True, exist_ok=True)
    new = not table.exists()
    with table.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        if new:
            writer.writeheader()
        writer.writerow(row)


def provenance(record: dict) -> dict:
    """Where and from what a row was measured: the run record's machine and commit, and the day."""
    from datetime import datetime, timezone

    return {
        "machine": record.get("machine"),
        "git_sha": record.get("git_sha"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }
