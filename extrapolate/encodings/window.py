"""A sliding window on top of any encoding: each query attends to its last `window` keys only (key j is seen
from query i when i - j < window, as Mistral's and Qwen2's windowed layers do). The window is a bias over
distances, 0 inside and -inf beyond, added to the encoding's own, so every bias kernel computes it with memory
linear in the length, and the wrapped encoding keeps its hooks (a RoPE scaling rotates as it would alone).
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding, Wrapped


class SlidingWindow(Wrapped):
    def __init__(self, inner: PositionalEncoding, window: int):
        if inner.two_part_form() is not None or inner.chunk_form() is not None or not inner.toeplitz:
            raise UserError(f"{inner.name} attends by its own rule past a distance: no sliding window applies to it")
        super().__init__(inner)
        self.has_bias, self.window, self.horizon = True, window, window

    def bias_table(self, n: int, device: torch.device | None = None) -> torch.Tensor:
        """(H, n) or, over an encoding without a bias, (1, n): its bias, -inf from `window` tokens back."""
        table = self.inner.bias_table(n, device=device)  # (H, n) float32 or None
        table = torch.zeros(1, n, device=device) if table is None else table.clone()
        table[:, self.window :] = float("-inf")
        return table

    def score_bias(self, keys: int, device: torch.device | None = None):
        table = self.bias_table(keys, device=device)  # (H or 1, keys)
        if table.shape[0] == 1:  # one row for every head
            return lambda h, i, d: table[0, d]
        return lambda h, i, d: table[h, d]

    def describe(self) -> dict:
        return {**self.inner.describe(), "sliding_window": self.window}


def windowed(encoding: PositionalEncoding, window: int | None) -> PositionalEncoding:
    """`encoding` behind a sliding window of `window` tokens; itself where `window` is None or where it has
    that window already."""
    if window is None or (isinstance(encoding, SlidingWindow) and encoding.window == window):
        return encoding
    return SlidingWindow(encoding, window)
