"""Deterministic training batches: batch `step` depends only on (seed, step), so a resumed run sees
exactly the batches an uninterrupted one would, with no RNG state to carry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrapolate.core.errors import UserError
from extrapolate.data.pose import draw_skip, skipped_ids, skipped_tokens, span_length

# (generator, length) -> (tokens (length + 1,), loss mask (length,)): a training row that is not corpus text
RowMaker = Callable[[torch.Generator, int], "tuple[torch.Tensor, torch.Tensor]"]


@dataclass(frozen=True)
class Curriculum:
    """Rows shorter than L before the rows of L, as many tokens a step: `stages` holds (length, steps) in order,
    and the steps after them read rows of L. A model trained at a long L learns retrieval from many short rows
    and then a few longer ones, which its 2 rows a step at L alone do not teach it (results/mission-cpu)."""

    stages: tuple[tuple[int, int], ...]

    @property
    def steps(self) -> int:
        return sum(steps for _, steps in self.stages)

    def length_at(self, step: int) -> int | None:
        """The rows' length at `step`, None past the stages (rows of L)."""
        for length, steps in self.stages:
            if step < steps:
                return length
            step -= steps
        return None


def rows_of(length: int, seq_len: int, batch_size: int) -> int:
    """Rows of `length` that read the tokens of `batch_size` rows of `seq_len`, at least one."""
    return max(1, batch_size * seq_len // length)


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T) int64
    targets: torch.Tensor  # (B, T) int64
    mask: torch.Tensor  # (B, T) float32: which targets count in the loss
    positions: torch.Tensor | None = None  # (B, T) int64 position ids of each row's inputs; None: 0 … T-1


class BatchSource:
    def __init__(
        self,
        stream: torch.Tensor,
        seq_len: int,
        batch_size: int,
        seed: int,
        extra_fraction: float = 0.0,
        extra_rows: RowMaker | None = None,
        curriculum: Curriculum | None = None,
        skip_to: int | None = None,
    ):
        if stream.numel() < seq_len + 2:
            raise UserError(f"training text has {stream.numel()} tokens, too short for sequences of {seq_len}")
        self.stream, self.seq_len, self.batch_size, self.seed = stream, seq_len, batch_size, seed
        self.extra_fraction, self.extra_rows = extra_fraction, extra_rows
        self.curriculum = curriculum
        self.skip_to = skip_to  # PoSE's L': rows of seq_len whose position ids skip to cover it (data/pose.py)

    def shape(self, step: int) -> tuple[int, int]:
        """(rows, length) of batch `step`."""
        length = None if self.curriculum is None else self.curriculum.length_at(step)
        if length is None:
            return self.batch_size, self.seq_len
        return rows_of(length, self.seq_len, self.batch_size), length

    def tokens(self, steps: int) -> int:
        """Tokens the first `steps` batches read."""
        total, step = 0, 0
        for length, count in self.curriculum.stages if self.curriculum is not None else ():
            taken = max(0, min(count, steps - step))
            total, step = total + taken * rows_of(length, self.seq_len, self.batch_size) * length, step + taken
        return total + (steps - step) * self.batch_size * self.seq_len

    def generator(self, step: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1_000_003 + step)

    def batch(self, step: int) -> Batch:
        gen = self.generator(step)
        size, n = self.shape(step)
        if self.skip_to is None:
            starts = torch.randint(0, self.stream.numel() - n - 1, (size,), generator=gen)
            rows, ids = torch.stack([self.stream[s : s + n + 1] for s in starts.tolist()]), None  # (B, T+1)
        else:
            rows, ids = self.skipped_rows(gen, size, n + 1)  # (B, T+1) each
        mask = torch.ones(size, n)
        if self.extra_rows is not None and self.extra_fraction > 0:
            chosen = torch.rand(size, generator=gen) < self.extra_fraction
            for i in chosen.nonzero().flatten().tolist():  # a prompt keeps its row's skipped ids, if any
                rows[i], mask[i] = self.extra_rows(gen, n)
        positions = None if ids is None else ids[:, :-1].contiguous()  # the inputs' ids
        return Batch(rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), mask, positions)

    def skipped_rows(self, gen: torch.Generator, size: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """PoSE's rows: (B, width) tokens, each two chunks of a span of the stream, and their (B, width) position
        ids, below L' + 1 so that the inputs' stay below L' (data/pose.py)."""
        span = span_length(width, self.stream.numel())
        starts = torch.randint(0, self.stream.numel() - span + 1, (size,), generator=gen)
        rows, ids = [], []
        for start in starts.tolist():
            skip = draw_skip(gen, width, span, self.skip_to + 1)
            rows.append(skipped_tokens(self.stream[start : start + span], width, skip))
            ids.append(skipped_ids(width, skip))
        return torch.stack(rows), torch.stack(ids)
