"""p-RoPE (Barbero et al. 2024, "Round and round we go"): rotate only the highest-frequency fraction p of the
pairs; the lowest-frequency pairs pass through unrotated and carry content alone. It is transformers'
`proportional` rope type: floor(p·d/2) pairs keep θ_j = base^(-2j/d), the rest get frequency 0 (angle 0,
cos 1, sin 0). p = 1 is RoPE; p = 0 rotates nothing (NoPE).

Its model is trained with p-RoPE (not a scaling of a RoPE model): a pair that never rotated in training is
a different model from one that did.
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.options import P_ROPE_FRACTION, option_defaults
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def check_fraction(fraction: float, *, allow_zero: bool = False) -> float:
    low_ok = fraction >= 0 if allow_zero else fraction > 0
    if not (low_ok and fraction <= 1):
        raise UserError(f"p-rope fraction must be in (0, 1], got {fraction:g}")
    return float(fraction)


def rotated_pairs(head_dim: int, fraction: float) -> int:
    """How many pairs rotate: int(p·d // 2), computed as transformers' `proportional` type does."""
    return int(fraction * head_dim // 2)


def proportional_inv_freq(head_dim: int, base: float, fraction: float) -> torch.Tensor:
    """(d/2,) float32: RoPE's θ_j for the first floor(p·d/2) pairs (the highest frequencies), 0 after."""
    inv_freq = rope_inv_freq(head_dim, base).clone()  # (d/2,)
    inv_freq[rotated_pairs(head_dim, fraction) :] = 0.0
    return inv_freq


class PartialRotary(Rotary):
    """RoPE with the frequencies of `proportional_inv_freq`; everything else is the rotary code path."""

    def __init__(self, head_dim: int, fraction: float = P_ROPE_FRACTION, base: float = 10000.0):
        super().__init__(head_dim, "rope", base=base)
        self.name = "p-rope"
        self.fraction = check_fraction(fraction, allow_zero=True)  # 0 is meaningful in code (NoPE), not asked for
        self._static = (proportional_inv_freq(head_dim, self.base, self.fraction), 1.0)

    def describe(self):
        return {
            "base": self.base,
            "fraction": self.fraction,
            "rotated_pairs": rotated_pairs(self.head_dim, self.fraction),
            "pairs": self.head_dim // 2,
        }


def show_prope(query: ShowQuery) -> dict:
    fraction = check_fraction(query.options.get("fraction", P_ROPE_FRACTION))
    return {
        "head_dim": query.head_dim,
        "base": query.base,
        "fraction": fraction,
        "rotated_pairs": rotated_pairs(query.head_dim, fraction),
        "pairs": query.head_dim // 2,
        "inv_freq": proportional_inv_freq(query.head_dim, query.base, fraction).tolist(),
    }


PROPE = EncodingSpec(
    "p-rope",
    "rotary",
    "RoPE on the fastest fraction p of the pairs only (transformers' proportional)",
    lambda shape: PartialRotary(shape.head_dim, shape.options.get("fraction", P_ROPE_FRACTION), base=shape.base),
    {"base": 10000.0, **option_defaults("fraction")},
    colour="#7b4173",
    show=show_prope,
    group="newer",
)
