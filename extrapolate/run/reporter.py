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

    def evaluation_progress(self, done: int, total: int, summary: str, logged: bool) -> None:
        """A measurement finished `done` of its `total` prompts (`summary`: its score so far; `logged`: read back
        from its log, not asked again)."""

    def retrieval_depth(self, depth: float, greedy: float, logged: bool) -> None:
        """A retrieval cell finished one depth (`logged`: read back from its depth log, not asked again)."""

    def done_training(self) -> None:
        pass

    def cell(self, cell) -> None:
        pass

    def warn(self, message: str) -> None:
        pass

    def plan(self, cells, folder) -> None:
        """A dry run's cells, as soon as they are known (before anything is measured)."""

    def note(self, message: str) -> None:
        """What the work is doing now, when it takes a while and has no progress bar."""
