"""Attention scores soft-capped on top of any encoding: every score s = q·k/√d becomes c·tanh(s / c) before the
encoding's bias and the causal mask are added (Gemma 2's attn_logit_softcapping, in the order its attention
computes it). The cap is a function of the scores themselves, which no fused causal or bias kernel takes, so
`score_cap` makes `kernels.attention.attention_plan` choose the capped kernels; the wrapped encoding keeps its
hooks (a RoPE scaling rotates as it would alone, a window stays a bias).
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding, Wrapped


def soft_cap(x: torch.Tensor, cap: float | torch.Tensor) -> torch.Tensor:
    """x squashed smoothly into (-cap, cap) as cap·tanh(x / cap), the order transformers computes it in."""
    return torch.tanh(x / cap) * cap


class ScoreCap(Wrapped):
    def __init__(self, inner: PositionalEncoding, cap: float):
        if inner.two_part_form() is not None or inner.chunk_form() is not None:
            raise UserError(f"{inner.name} attends in parts, whose kernels do not soft-cap attention scores")
        super().__init__(inner)
        self.score_cap = float(cap)

    def describe(self) -> dict:
        return {**self.inner.describe(), "attention_softcap": self.score_cap}


def capped(encoding: PositionalEncoding, cap: float | None) -> PositionalEncoding:
    """`encoding` with its attention scores soft-capped at `cap`; itself where `cap` is None or where it caps
    at `cap` already."""
    if cap is None or encoding.score_cap == cap:
        return encoding
    return ScoreCap(encoding, cap)
