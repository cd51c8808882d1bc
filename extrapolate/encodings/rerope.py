"""ReRoPE (Su 2023, "Rectified Rotary Position Embeddings"): the relative position is min(i - j, w), so no
distance past the window is ever new to the model. Keys fewer than w tokens back keep plain RoPE; further
keys see q rotated at position w against an unrotated k (relative position w - 0).

Leaky ReRoPE (option `leak` = k > 1): past w the position grows again, slowly, as w + (i - j - w)/k; q is
rotated at w + (i - w)/k and k at j/k. The window defaults to L/8, the reference code's 512 of Llama-2's
4096. (The reference code also scales q by log(i+1)/log(L) past L; that is a separate trick, left out.)"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.options import option_defaults
from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.two_part import TwoPartEncoding, show_two_part


def default_window(original_len: int) -> int:
    return max(1, original_len // 8)


class ReRoPE(TwoPartEncoding):
    name = "rerope"

    def __init__(self, head_dim: int, base: float, window: int, leak: float | None = None):
        super().__init__(head_dim, base, window)
        if leak is not None and not (isinstance(leak, (int, float)) and 1 <= leak < float("inf")):
            raise UserError(f"rerope leak must be a finite number ≥ 1 (1 is plain RoPE), got {leak!r}")
        self.leak = None if leak is None else float(leak)

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        if self.leak is None:
            return torch.full(pos.shape, float(self.window), device=pos.device)
        return self.window + (pos.float() - self.window) / self.leak

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        if self.leak is None:
            return torch.zeros(pos.shape, device=pos.device)  # rotation by 0: k as it is
        return pos.float() / self.leak

    def describe(self) -> dict:
        return {"base": self.base, "window": self.window, **({"leak": self.leak} if self.leak is not None else {})}


def build_rerope(shape: Shape) -> ReRoPE:
    options = dict(shape.options)
    window = options.pop("window", None)
    leak = options.pop("leak", None)
    if options:
        raise ValueError(f"rerope has no option(s) {sorted(options)}")
    window = default_window(shape.original_len or shape.max_len) if window is None else window
    return ReRoPE(shape.head_dim, shape.base, window, leak)


REROPE = EncodingSpec(
    "rerope",
    "rotary",
    "ReRoPE: relative position min(i-j, w) (leaky: w+(i-j-w)/k), two parts merged by log-sum-exp (Su 2023)",
    build_rerope,
    {"base": 10000.0, "window": "L/8", **option_defaults("leak")},
    "#637939",
    show_two_part(build_rerope),
    trains_own_model=False,
)
