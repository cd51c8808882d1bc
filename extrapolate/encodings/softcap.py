"""Attention scores soft-capped on top of any encoding: every score s = q·k/√d becomes c·tanh(s / c) before the
encoding's bias and the causal mask are added (Gemma 2's attn_logit_softcapping, in the order its attention
computes it). The cap is a function of the scores themselves, which no fused causal or bias kernel takes, so
`score_cap` makes `kernels.attention.attention_plan` choose the capped kernels; the wrapped encoding keeps its
hooks (a RoPE scaling rotates as it would alone, a window stays a bias).
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding


def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """x squashed smoothly into (-cap, cap) as cap·tanh(x / cap), the order transformers computes it in."""
    return torch.tanh(x / cap) * cap


class ScoreCap(PositionalEncoding):
    def __init__(self, inner: PositionalEncoding, cap: float):
        super().__init__()
        if inner.two_part_form() is not None:
            raise UserError(f"{inner.name} attends in two parts, whose kernels do not soft-cap attention scores")
        self.inner, self.score_cap = inner, float(cap)
        self.name, self.kind = inner.name, inner.kind
        self.has_bias, self.toeplitz, self.horizon = inner.has_bias, inner.toeplitz, inner.horizon

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        return self.inner.positions(pos)

    def embed(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.inner.embed(x, pos)

    def rotate(self, q, k, pos, seq_len=None):
        return self.inner.rotate(q, k, pos, seq_len)

    def bias_table(self, n: int, device: torch.device | None = None) -> torch.Tensor | None:
        return self.inner.bias_table(n, device=device)

    def score_bias(self, keys: int, device: torch.device | None = None):
        return self.inner.score_bias(keys, device=device)

    def bias_block(self, q0: int, q1: int, device: torch.device | None = None) -> torch.Tensor | None:
        return self.inner.bias_block(q0, q1, device=device)

    def describe(self) -> dict:
        return {**self.inner.describe(), "attention_softcap": self.score_cap}


def capped(encoding: PositionalEncoding, cap: float | None) -> PositionalEncoding:
    """`encoding` with its attention scores soft-capped at `cap`; itself where `cap` is None or where it caps
    at `cap` already."""
    if cap is None or encoding.score_cap == cap:
        return encoding
    return ScoreCap(encoding, cap)
