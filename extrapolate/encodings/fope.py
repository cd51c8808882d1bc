"""FoPE, Fourier position embedding (Hua et al. 2024, "Fourier Position Embedding: Enhancing Attention's Periodic
Extension for Length Generalization"): RoPE whose every rotated dimension is a Fourier series over RoPE's
frequencies instead of one of them, with the frequencies a training length cannot teach removed.

As the authors' code computes it (yiju-zhao/Fourier-Position-Embedding at 3713108, `olmo/model.py`,
`FourierEmbedding`, with the settings of every shipped FoPE config):

- RoPE's frequencies ω_j = base^(-2j/d) below the floor 2π/L (a wavelength longer than the training length L)
  are dropped, D of d/2 kept;
- each head h has two coefficient matrices C_cos, C_sin of shape (D, d_out), d_out = min(D, d/4), drawn once
  (xavier normal with gain 0.3, plus an identity, or a stepped identity where D ≠ d_out) and frozen;
- pair j < d_out of a vector at position t turns by cos_j(t) = Σ_D cos(t·ω_D)·C_cos[D, j] and
  sin_j(t) = Σ_D sin(t·ω_D)·C_sin[D, j]: x'_j = x_j·cos_j − x_{j+d/2}·sin_j, x'_{j+d/2} = x_{j+d/2}·cos_j +
  x_j·sin_j (RoPE's half-pair layout);
- pairs j ≥ d_out take cos_j = sin_j = 1 (the reference pads both with 1): a fixed map of those pairs, the same
  at every position, which doubles their share of q·k — kept as the reference computes it;
- q and k take the same map; every layer has its own coefficients.

Unlike RoPE's, q'·k' depends on both positions, not only on their distance. The coefficients are buffers,
saved with the weights: the model is evaluated as it was trained (the spec's `trained_parameters`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.options import FOPE_GAIN, option_defaults
from extrapolate.encodings.rotary import rotate_half
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def kept_frequencies(head_dim: int, base: float, train_len: int) -> torch.Tensor:
    """(D,) float32: RoPE's frequencies at or above the floor 2π/L, fastest first (the reference's order)."""
    inv_freq = rope_inv_freq(head_dim, base)  # (d/2,)
    return inv_freq[~(inv_freq < 2 * math.pi / train_len)]


def series_width(kept: int, head_dim: int) -> int:
    """d_out: the pairs that turn with the position, min(D, d/4) (the reference's; the rest are padded)."""
    return min(kept, head_dim // 4)


def stepped_identity(rows: int, columns: int) -> torch.Tensor:
    """(rows, columns): the identity where square, else a 1 at (i·step, i), step = ⌈rows/columns⌉, while
    i·step < rows (the reference's `get_step_eye`: with rows = 18, columns = 16, nine ones)."""
    if rows == columns:
        return torch.eye(rows)
    out = torch.zeros(rows, columns)
    step = math.ceil(rows / columns)
    for i in range(columns):
        if i * step < rows:
            out[i * step, i] = 1.0
    return out


def initial_coefficients(n_heads: int, kept: int, width: int, gain: float) -> torch.Tensor:
    """(H, D, d_out) float32: xavier normal with `gain` (fans D·d_out and H·d_out, torch's rule for a 3-D
    tensor), plus the stepped identity; drawn from torch's generator, as the reference draws them."""
    coefficients = torch.empty(n_heads, kept, width)
    nn.init.xavier_normal_(coefficients, gain=gain)
    return coefficients + stepped_identity(kept, width)


def grown_to(old: torch.Tensor, fresh: torch.Tensor, name: str) -> torch.Tensor:
    """A FoPE buffer of a model trained at L, fitted to the same model at a longer L' (a fine-tune), which keeps
    more of the slow frequencies: as the authors' checkpoint loading grows them (`olmo/checkpoint.py`), the
    frequencies are L''s (L's first, fastest first) and each coefficient matrix is L''s fresh one (xavier plus
    the stepped identity) with L''s values in its top-left corner."""
    if name.endswith("inv_freq"):
        if not torch.allclose(fresh[: old.numel()], old):
            raise UserError(f"fope's frequencies at L' do not begin with those at L ({name})")
        return fresh
    grown = fresh.clone()  # (H, D', o')
    grown[:, : old.shape[1], : old.shape[2]] = old  # (H, D, o): L's coefficients kept
    return grown


def fourier_factors(
    pos: torch.Tensor, inv_freq: torch.Tensor, cos_coef: torch.Tensor, sin_coef: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(H, T, Dh) float32 cos and sin factors of positions `pos` (T,): each pair's Fourier series, the pairs
    past d_out padded with 1, both halves of the head alike."""
    angle = pos.to(torch.float32)[:, None] * inv_freq.to(pos.device)[None, :]  # (T, D)
    cos = torch.einsum("td,hdo->hto", angle.cos(), cos_coef)  # (H, T, d_out)
    sin = torch.einsum("td,hdo->hto", angle.sin(), sin_coef)  # (H, T, d_out)
    pad = head_dim // 2 - cos.shape[-1]
    cos = nn.functional.pad(cos, (0, pad), value=1.0)  # (H, T, Dh/2)
    sin = nn.functional.pad(sin, (0, pad), value=1.0)
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # (H, T, Dh) each


class FoPELayer(PositionalEncoding):
    """One layer's FoPE: its own frozen coefficients over the shared kept frequencies."""

    name, kind = "fope", "rotary"

    def __init__(self, inv_freq: torch.Tensor, n_heads: int, head_dim: int, gain: float):
        super().__init__()
        self.head_dim = head_dim
        width = series_width(inv_freq.numel(), head_dim)
        self.register_buffer("inv_freq", inv_freq.clone())  # (D,)
        self.register_buffer("sin_coef", initial_coefficients(n_heads, inv_freq.numel(), width, gain))  # (H, D, o)
        self.register_buffer("cos_coef", initial_coefficients(n_heads, inv_freq.numel(), width, gain))  # (H, D, o)

    def rotate(self, q, k, pos, seq_len=None):
        if k.shape[1] != q.shape[1]:  # the reference's coefficients are one set a head, for q and k alike
            raise UserError(f"fope needs a key head per query head, got {q.shape[1]} and {k.shape[1]}")
        cos, sin = fourier_factors(pos, self.inv_freq, self.cos_coef, self.sin_coef, self.head_dim)  # (H, T, Dh)
        return apply(q, cos, sin), apply(k, cos, sin)


def apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, Dh) · cos + rotate_half(x) · sin, the factors (H, T, Dh) cast to x's dtype."""
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class FoPE(PositionalEncoding):
    name, kind = "fope", "rotary"

    def __init__(
        self, head_dim: int, n_heads: int, n_layers: int, train_len: int, base: float = 10000.0, gain: float = FOPE_GAIN
    ):
        super().__init__()
        if head_dim < 4 or head_dim % 2:
            raise UserError(f"fope needs an even head dimension of at least 4 (d/4 pairs turn), got {head_dim}")
        inv_freq = kept_frequencies(head_dim, base, train_len)
        if inv_freq.numel() == 0:
            raise UserError(f"fope keeps no frequency at L = {train_len}: every wavelength is longer than L")
        self.base, self.gain, self.train_len = float(base), float(gain), int(train_len)
        self.layers = nn.ModuleList(FoPELayer(inv_freq, n_heads, head_dim, gain) for _ in range(n_layers))

    def rotate(self, q, k, pos, seq_len=None):
        """The first layer's: the model calls each layer's own (`for_layer`)."""
        return self.layers[0].rotate(q, k, pos, seq_len)

    def for_layer(self, index: int) -> PositionalEncoding:
        return self.layers[index]

    def describe(self) -> dict:
        layer = self.layers[0]
        return {
            "base": self.base,
            "gain": self.gain,
            "kept_frequencies": int(layer.inv_freq.numel()),
            "turning_pairs": int(layer.cos_coef.shape[-1]),
        }


def show_fope(query: ShowQuery) -> dict:
    """The frequencies kept at L = --original-len, the pairs that turn, the floor."""
    if query.head_dim < 4 or query.head_dim % 2:
        raise UserError(f"fope needs an even head dimension of at least 4, got {query.head_dim}")
    kept = kept_frequencies(query.head_dim, query.base, query.original_len)
    return {
        "head_dim": query.head_dim,
        "base": query.base,
        "floor": 2 * math.pi / query.original_len,
        "kept_frequencies": kept.tolist(),
        "dropped": query.head_dim // 2 - kept.numel(),
        "turning_pairs": series_width(kept.numel(), query.head_dim),
        "gain": query.options.get("fourier_gain", FOPE_GAIN),
    }


FOPE = EncodingSpec(
    "fope",
    "rotary",
    "FoPE: each pair a Fourier series over RoPE's frequencies, those slower than 2π/L dropped (Hua et al. 2024)",
    lambda shape: FoPE(
        shape.head_dim,
        shape.n_heads,
        shape.n_layers,
        shape.max_len,
        base=shape.base,
        gain=shape.options.get("fourier_gain", FOPE_GAIN),
    ),
    {"base": 10000.0, **option_defaults("fourier_gain"), "coefficients": "per layer and head, frozen"},
    colour="#a55194",
    show=show_fope,
    trained_parameters=True,
)
