"""xPos (Sun et al. 2022, torchscale's `xpos_relative_position`): RoPE, with pair j of the query at position n
scaled by ζ_j^(n/γ) and of the key at position m by ζ_j^(-m/γ), ζ_j = (2j + 0.4·d) / (1.4·d) < 1, γ = 512.
Pair j of a score is then multiplied by ζ_j^((n-m)/γ): it decays with the distance, the low-frequency pairs
(ζ near 1) least.

Overflow: ζ_0 = 2/7, so ζ_0^(-m/γ) alone passes float32's largest number (3.4e38) at m ≈ 36,000. Only the
product's exponent (n - m)/γ matters, so positions are taken relative to a reference point r: q gets
ζ^((n-r)/γ) and k ζ^(-(m-r)/γ), whose product is the same for every r. With r = the middle of the sequence
(half its full length, so a prompt and its cached continuation share it) each factor needs only half the
range: exact to about 65,000 tokens. Past that a cell is recorded `unsupported`, never silently wrong.
"""

from __future__ import annotations

import math

import torch

from extrapolate.core.errors import PositionOutOfRange, UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.options import XPOS_SCALE_BASE, option_defaults
from extrapolate.encodings.rotary import apply_rotary, rotary_cos_sin
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

MAX_EXPONENT = 80.0  # |ln scale| per factor: e^80 ≈ 5.5e34 leaves float32 (and bf16) headroom for q and k themselves


class ScaleOutOfRange(PositionOutOfRange):
    table = False  # no table: the scales themselves leave float32

    def __init__(self, length: int, limit: int):
        super().__init__(length, limit)
        self.args = (f"xPos scales at {length} tokens exceed float32 (exact up to {limit} tokens)",)


def xpos_zeta(head_dim: int) -> torch.Tensor:
    """(d/2,) float64: ζ_j = (2j + 0.4·d) / (1.4·d), j = 0 … d/2-1."""
    return (torch.arange(0, head_dim, 2, dtype=torch.float64) + 0.4 * head_dim) / (1.4 * head_dim)


def longest_exact(head_dim: int, scale_base: float) -> int:
    """The longest sequence whose scale factors stay within e^±MAX_EXPONENT around the middle reference."""
    steepest = -math.log(float(xpos_zeta(head_dim)[0]))  # ln(1/ζ_0), the fastest decaying pair
    return int(2 * MAX_EXPONENT * scale_base / steepest)


class XPos(PositionalEncoding):
    name, kind = "xpos", "rotary"

    def __init__(self, head_dim: int, base: float = 10000.0, scale_base: float = XPOS_SCALE_BASE):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"xpos needs an even head dimension, got {head_dim}")
        if not scale_base > 0:
            raise UserError(f"xpos scale base must be > 0, got {scale_base}")
        self.head_dim, self.base, self.scale_base = head_dim, float(base), float(scale_base)
        self.inv_freq = rope_inv_freq(head_dim, base)  # (d/2,) float32, as RoPE
        self.log_zeta = xpos_zeta(head_dim).log()  # (d/2,) float64, all < 0
        self.limit = longest_exact(head_dim, self.scale_base)
        self._memo: tuple[tuple, tuple] | None = None

    def scales(self, pos: torch.Tensor, reference: int) -> torch.Tensor:
        """(T, Dh) float32: ζ_j^((p - r)/γ) for the query side (the key side is its inverse), in float64 first
        so that q's and k's factors multiply back to ζ^((n-m)/γ) to float32 rounding."""
        exponent = (pos.to(torch.float64) - reference)[:, None] / self.scale_base * self.log_zeta.to(pos.device)
        return torch.cat((exponent, exponent), dim=-1).exp().to(torch.float32)  # (T, Dh), half-pair layout

    def rotate(self, q, k, pos, seq_len=None):
        if seq_len is None:
            seq_len = int(pos[-1]) + 1
        if seq_len > self.limit:
            raise ScaleOutOfRange(seq_len, self.limit)
        key = (int(pos[0]), pos.numel(), seq_len, pos.device)
        if self._memo is None or self._memo[0] != key:  # every layer of one forward uses the same factors
            cos, sin = rotary_cos_sin(pos, self.inv_freq, 1.0)  # (T, Dh) each
            up = self.scales(pos, seq_len // 2)  # (T, Dh)
            self._memo = (key, (cos * up, sin * up, cos / up, sin / up))
        q_cos, q_sin, k_cos, k_sin = self._memo[1]
        return apply_rotary(q, q_cos, q_sin), apply_rotary(k, k_cos, k_sin)

    def describe(self):
        return {
            "base": self.base,
            "scale_base": self.scale_base,
            "reference": "middle of the sequence",
            "longest_exact": self.limit,
        }


def show_xpos(query: ShowQuery) -> dict:
    scale_base = query.options.get("scale_base", XPOS_SCALE_BASE)
    if not scale_base > 0:
        raise UserError(f"--scale-base must be > 0, got {scale_base}")
    distances = query.distances if query.distances is not None else [0, 1, 5, 20, 200, 1000]
    if any(d < 0 for d in distances):
        raise UserError("xpos distances are how far back the key is: use numbers ≥ 0")
    zeta = xpos_zeta(query.head_dim)
    decay = lambda j: [float(zeta[j] ** (d / scale_base)) for d in distances]  # noqa: E731
    return {
        "head_dim": query.head_dim,
        "base": query.base,
        "scale_base": scale_base,
        "zeta": zeta.tolist(),
        "inv_freq": rope_inv_freq(query.head_dim, query.base).tolist(),
        "distances": distances,
        "decay_first_pair": decay(0),
        "decay_last_pair": decay(len(zeta) - 1),
        "longest_exact": longest_exact(query.head_dim, scale_base),
    }


XPOS = EncodingSpec(
    "xpos",
    "rotary",
    "RoPE with a per-pair decay ζ_j^((n-m)/γ) (Sun et al. 2022, torchscale)",
    lambda shape: XPos(shape.head_dim, base=shape.base, scale_base=shape.options.get("scale_base", XPOS_SCALE_BASE)),
    {"base": 10000.0, **option_defaults("scale_base")},
    colour="#6b6ecf",
    show=show_xpos,
    group="newer",
)
