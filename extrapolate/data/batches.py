"""Deterministic training batches: batch `step` depends only on (seed, step), so a resumed run sees
exactly the batches an uninterrupted one would, with no RNG state to carry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrapolate.core.errors import UserError

# (generator, length) -> (tokens (length + 1,), loss mask (length,)): a training row that is not corpus text
RowMaker = Callable[[torch.Generator, int], "tuple[torch.Tensor, torch.Tensor]"]


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T) int64
    targets: torch.Tensor  # (B, T) int64
    mask: torch.Tensor  # (B, T) float32: which targets count in the loss


class BatchSource:
    def __init__(
        self,
        stream: torch.Tensor,
        seq_len: int,
        batch_size: int,
        seed: int,
        extra_fraction: float = 0.0,
        extra_rows: RowMaker | None = None,
    ):
        if stream.numel() < seq_len + 2:
            raise UserError(f"training text has {stream.numel()} tokens, too short for sequences of {seq_len}")
        self.stream, self.seq_len, self.batch_size, self.seed = stream, seq_len, batch_size, seed
        self.extra_fraction, self.extra_rows = extra_fraction, extra_rows

    def generator(self, step: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1_000_003 + step)

    def batch(self, step: int) -> Batch:
        gen = self.generator(step)
        n = self.seq_len
        starts = torch.randint(0, self.stream.numel() - n - 1, (self.batch_size,), generator=gen)
        rows = torch.stack([self.stream[s : s + n + 1] for s in starts.tolist()])  # (B, T+1)
        mask = torch.ones(self.batch_size, n)
        if self.extra_rows is not None and self.extra_fraction > 0:
            chosen = torch.rand(self.batch_size, generator=gen) < self.extra_fraction
            for i in chosen.nonzero().flatten().tolist():
                rows[i], mask[i] = self.extra_rows(gen, n)
        return Batch(rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), mask)
