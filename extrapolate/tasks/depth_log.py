"""The finished depths of one retrieval cell, kept on disk while the cell runs.

A cell is written to the results table whole, when every depth is done; at long lengths on a CPU that is
an hour or more (SmolLM2 at 32768 tokens). The log lets a stopped cell resume from its next depth instead
of from the start. Each finished part (a passkey depth, a RULER batch) keeps its counts and its prompts'
records (reference, prediction, score), so a resumed cell writes the same samples file as an uninterrupted
one. It is keyed by everything the counts depend on, so a log of another model, task file, length or process
layout is ignored, and it is removed once the cell's rows are written.
"""

from __future__ import annotations

import json
from pathlib import Path

from extrapolate.core.atomic import write_text
from extrapolate.core.paths import DEPTH_LOGS_FOLDER

FOLDER = DEPTH_LOGS_FOLDER  # inside the output folder; ignored by git


class DepthLog:
    def __init__(self, path: Path, identity: str):
        self.path, self.identity = Path(path), identity

    @classmethod
    def for_cell(cls, folder: Path, run_id: str, task_identity: str, length: int, rank: int, size: int) -> DepthLog:
        identity = f"{run_id}|{task_identity}|{length}|rank {rank} of {size}"
        return cls(Path(folder) / FOLDER / f"{run_id}-passkey-{length}-rank{rank}.json", identity)

    def _read(self) -> dict:
        """The log's parts, {} for a missing, damaged or foreign log, or one written before parts kept their
        prompts' records (the parts are then simply measured again)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("identity") != self.identity or not isinstance(data.get("samples"), dict):
                return {}
            return {
                int(d): ((float(c), float(r)), list(data["samples"].get(d, []))) for d, (c, r) in data["depths"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def finished(self) -> dict[int, tuple[float, float]]:
        """part index -> the two counts it recorded (a depth's correct and ranked-first counts, a batch's score
        sum and prompts) of this process's prompts."""
        return {d: counts for d, (counts, _) in self._read().items()}

    def samples(self) -> dict[int, list[dict]]:
        """part index -> the records of its prompts (as `record` was given them)."""
        return {d: records for d, (_, records) in self._read().items()}

    def record(self, depth: int, correct: float, ranked: float, samples: list[dict] = ()) -> None:
        parts = {**self._read(), depth: ((correct, ranked), list(samples))}
        data = {
            "identity": self.identity,
            "depths": {str(d): list(counts) for d, (counts, _) in sorted(parts.items())},
            "samples": {str(d): records for d, (_, records) in sorted(parts.items())},
        }
        write_text(self.path, json.dumps(data))


class LengthLog:
    """A measurement finished whole at one length (perplexity's sums at a length), kept until its cell is in
    the table: a stopped cell's next run reads it instead of scoring the length again. Keyed like DepthLog."""

    def __init__(self, path: Path, identity: str):
        self.path, self.identity = Path(path), identity

    @classmethod
    def for_cell(cls, folder: Path, run_id: str, kind: str, identity: str, length: int, rank: int, size: int):
        key = f"{run_id}|{kind}|{identity}|{length}|rank {rank} of {size}"
        return cls(Path(folder) / FOLDER / f"{run_id}-{kind}-{length}-rank{rank}.json", key)

    def read(self) -> dict | None:
        """What was recorded, None for a missing, damaged or foreign log (the length is then measured again)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data["value"] if data.get("identity") == self.identity and isinstance(data["value"], dict) else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def record(self, value: dict) -> None:
        write_text(self.path, json.dumps({"identity": self.identity, "value": value}))


def clear_logs(folder: Path, run_id: str) -> None:
    """Remove a written cell's logs (every rank's), and the log folder once empty."""
    logs = Path(folder) / FOLDER
    for path in logs.glob(f"{run_id}-*.json"):
        path.unlink(missing_ok=True)
    if logs.is_dir() and not any(logs.iterdir()):
        logs.rmdir()
