"""The progress sink of long work: the CLI renders it, the library never prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # light at import: the command line's renderers subclass it before torch is imported
    from extrapolate.training.train import StepCallback


class Reporter:
    def training(self, total: int, reused: bool, label: str = "training") -> StepCallback | None:
        return None

    def evaluating(self, what: str, length: int) -> None:
        pass

    def evaluation_progress(self, done: int, total: int, summary: str, logged: bool, unit: str = "prompts") -> None:
        """A measurement finished `done` of its `total` units (prompts, depths, windows; `summary`: its score so
        far; `logged`: read back from its log, not asked again)."""

    def evaluated(self, what: str, length: int, summary: str) -> None:
        """A length's measurement is done: `summary` its value (e.g. "ppl 41.2", "accuracy 85%") or its status."""

    def done_training(self) -> None:
        pass

    def cell(self, cell, index: int = 0, count: int = 0, eta: float | None = None) -> None:
        """A sweep's cell `index` of `count` begins (or is skipped); `eta`: the sweep's seconds left, if known."""

    def warn(self, message: str) -> None:
        pass

    def plan(self, cells, folder) -> None:
        """A dry run's cells, as soon as they are known (before anything is measured)."""

    def note(self, message: str) -> None:
        """What the work is doing now, when it takes a while and has no progress bar."""
