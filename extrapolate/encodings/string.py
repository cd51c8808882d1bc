"""STRING (An et al., ICLR 2025, "Why Does the Effective Context Length of LLMs Fall Short?"): the positions a
RoPE model saw often overwrite the ones it rarely saw. Keys fewer than S = `shift` tokens back keep their
distance d; further keys are seen at d − S + W (W = `local`), so the far part of the context reuses the small,
well-trained relative positions from W on. q is rotated at i − S + W against k at j: a two-part encoding.

Defaults: S = ⌊0.33·L⌋ and W = 128, the paper's values, W = L/64 where L is under 8192 (the paper's W is a
small fraction of its 128k contexts). The reference multiplies the cos and sin of every rotation (q near and far,
k) by an attention factor 0.1·ln 2 + 1 ≈ 1.069 ("STRING will make the attention map smooth, we use the
attention_factor to recover it, similar with Yarn"), so every logit is 1.143× plain RoPE's; so does this
encoding, and `--encoding-option attention_factor=1` turns it off. The reference's decoding splits the keys
exactly so (the last S keys near, the rest shifted); its prefill counts the key at distance exactly S in both
parts, which the paper's definition and this encoding do not."""

from __future__ import annotations

import math

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.two_part import TwoPartEncoding, options_of, show_two_part, whole_number

SHIFT_RATIO = 0.33  # S = 0.33·L: the paper's and the reference's default (`shifted_ratio`)
LOCAL = 128  # W: the reference's `local_value`
ATTENTION_FACTOR = 0.1 * math.log(2) + 1  # the reference's `attention_factor` on cos and sin (`replace_with_string`)


class STRING(TwoPartEncoding):
    name = "string"

    def __init__(self, head_dim: int, base: float, shift: int, local: int, attention_factor: float = ATTENTION_FACTOR):
        super().__init__(head_dim, base, shift)
        self.local = whole_number(local, "string local")
        if self.local > self.window:
            raise UserError(f"string local ({self.local}) must be at most its shift ({self.window})")
        if isinstance(attention_factor, bool) or not (0 < attention_factor < math.inf):
            raise UserError(f"string attention_factor must be a finite number > 0 (1: off), got {attention_factor!r}")
        self.attention_factor = float(attention_factor)

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        return (pos - self.window + self.local).float()

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        return pos.float()

    def describe(self) -> dict:
        return {"base": self.base, "shift": self.window, "local": self.local, "attention_factor": self.attention_factor}


def build_string(shape: Shape) -> STRING:
    options = options_of(shape, "string", ("shift", "local", "attention_factor"))
    length = shape.original_len or shape.max_len
    shift = options.get("shift", max(1, int(SHIFT_RATIO * length)))
    local = options.get("local", min(LOCAL, max(1, length // 64)))
    return STRING(shape.head_dim, shape.base, shift, local, options.get("attention_factor", ATTENTION_FACTOR))


STRING_SPEC = EncodingSpec(
    "string",
    "rotary",
    "STRING: distances from S on seen at d - S + W, the well-trained positions reused, cos and sin × 0.1·ln 2 + 1 "
    "(An et al. 2025)",
    build_string,
    {"base": 10000.0, "shift": "0.33·L", "local": "min(128, L/64)", "attention_factor": "0.1·ln 2 + 1 (1: off)"},
    "#fdbf6f",
    show_two_part(build_string),
    trains_own_model=False,
)
