"""Bias encodings, added to the attention logits in every layer: ALiBi and the T5 relative bias."""

from __future__ import annotations

import math

import torch
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import LinearBias, PositionalEncoding, SaturatingBias
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

# T5's relative buckets: 16 exact distances, then 16 log-spaced ones up to 128 tokens (the released T5)
T5_NUM_BUCKETS = 32
T5_MAX_DISTANCE = 128


def alibi_slopes(n_heads: int) -> list[float]:
    """m_h = 2^(-8h/n) for n a power of two; otherwise the 2^k list plus every other slope of the 2^(k+1) list."""

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if n_heads < 1:
        raise ValueError("ALiBi needs at least one head")
    if n_heads & (n_heads - 1) == 0:
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


class ALiBi(PositionalEncoding):
    name, kind, has_bias = "alibi", "bias", True

    def __init__(self, n_heads: int):
        super().__init__()
        self.register_buffer("slopes", torch.tensor(alibi_slopes(n_heads), dtype=torch.float32), persistent=False)

    def bias_table(self, n, device=None):
        distance = torch.arange(n, dtype=torch.float32, device=device or self.slopes.device)  # (n,)
        return -self.slopes.to(distance.device)[:, None] * distance[None, :]  # (H, n)

    def score_bias(self, keys, device=None):
        """-m_h · d computed per score (flex's score modification): a multiply on one slope per head, where the
        table's lookup would read an (H, keys) tensor at every score; the same float32 product as the table's."""
        slopes = self.slopes.to(device or self.slopes.device)  # (H,)
        return lambda h, i, d: -slopes[h] * d.to(torch.float32)

    def fused_form(self):
        return LinearBias(self.slopes)

    def describe(self):
        return {"slopes": [round(s, 10) for s in self.slopes.tolist()]}


def t5_bucket(
    relative_position: torch.Tensor,
    num_buckets: int = T5_NUM_BUCKETS,
    max_distance: int = T5_MAX_DISTANCE,
    bidirectional: bool = False,
) -> torch.Tensor:
    """Bucket of `rp = j - i` (keys behind the query are negative). Log-spaced past num_buckets/2 exact ones."""
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative_position > 0).to(relative_position.dtype) * num_buckets
        n = relative_position.abs()
    else:
        n = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    # float32 log then truncation, as the released T5 code does, so buckets match it bit for bit.
    scaled = torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (scaled * (num_buckets - max_exact)).to(relative_position.dtype)
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


class T5Bias(PositionalEncoding):
    """One learned (buckets × heads) table shared by all layers; the bias depends on the bucket of i - j."""

    name, kind, has_bias = "t5", "bias", True

    def __init__(self, n_heads: int, num_buckets: int = T5_NUM_BUCKETS, max_distance: int = T5_MAX_DISTANCE):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        # the first distance from which every key falls in the last bucket (113 for 32 buckets / 128)
        distances = torch.arange(0, 4 * max_distance + num_buckets)
        last = t5_bucket(-distances, num_buckets, max_distance) == num_buckets - 1
        self.saturation = int(distances[last][0]) if last.any() else None
        self.table = nn.Embedding(num_buckets, n_heads)
        nn.init.zeros_(self.table.weight)

    def bias_table(self, n, device=None):
        device = device or self.table.weight.device
        rp = -torch.arange(n, device=device)  # (n,) key d tokens back has rp = -d
        buckets = t5_bucket(rp, self.num_buckets, self.max_distance)
        return self.table(buckets).float().T  # (H, n)

    def fused_form(self):
        return SaturatingBias(self.saturation) if self.saturation is not None else None

    def describe(self):
        return {"num_buckets": self.num_buckets, "max_distance": self.max_distance}


def show_t5(query: ShowQuery) -> dict:
    distances = query.distances if query.distances is not None else [0, 1, 5, 20, 200, 1000]
    if any(d < 0 for d in distances):
        raise UserError("t5 distances are how far back the key is: use numbers ≥ 0")
    buckets = t5_bucket(-torch.tensor(distances, dtype=torch.int64)).tolist()
    return {"distances": distances, "buckets": buckets, "num_buckets": T5_NUM_BUCKETS, "max_distance": T5_MAX_DISTANCE}


ALIBI = EncodingSpec(
    "alibi",
    "bias",
    "linear distance penalty per head (Press et al. 2022)",
    lambda shape: ALiBi(shape.n_heads),
    {"heads": "model heads"},
    colour="#d62728",
    show=lambda query: {"heads": query.heads, "slopes": alibi_slopes(query.heads)},
)
T5 = EncodingSpec(
    "t5",
    "bias",
    "learned bias per log-spaced distance bucket (Raffel et al. 2020)",
    lambda shape: T5Bias(shape.n_heads),
    {"num_buckets": T5_NUM_BUCKETS, "max_distance": T5_MAX_DISTANCE},
    colour="#2ca02c",
    show=show_t5,
)
