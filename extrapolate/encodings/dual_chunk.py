"""Dual chunk attention (`dual-chunk`; An et al., ICML 2024, "Training-Free Long-Context Scaling of Large
Language Models", ChunkLlama; the attention Qwen2.5-1M ships): the sequence is cut into chunks of
s = c - w tokens (c = `chunk_size`, w = `window`, the local window), and no relative position ever exceeds c,
a distance the RoPE model saw in training:

- intra-chunk, keys of the query's own chunk (causal): q at i mod s, k at j mod s — the exact distance;
- successive-chunk, keys of the chunk before: q at min(i mod s + s, c), k at j mod s — near keys keep about
  their distance, clamped so that none is seen further than c;
- inter-chunk, keys of every earlier chunk: q at min(2s - 1, c) (c for w < s), k at j mod s.

The three parts are one softmax over every key, merged by log-sum-exp (kernels/dual_chunk.py). Defaults as
the reference code (HKUNLP/ChunkLlama, `replace_with_chunkllama`): c = ⌊3L/4⌋, w = ⌊L/8⌋. Like that code,
the logits of a sequence of n > L tokens are scaled by m² with m = 0.05·ln(n/L) + 1 (q and k each by m, its
cos and sin cache), which the paper's results did not use: `attention_factor=1` gives the paper's form. The
reference sets m from the longest sequence its cache has seen; here from each sequence's own length.
"""

from __future__ import annotations

import math

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import ChunkedRotary, PositionalEncoding
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.rotary import apply_rotary, rotary_cos_sin
from extrapolate.encodings.spec import EncodingSpec, Shape, ShowQuery
from extrapolate.encodings.two_part import options_of, whole_number

CHUNK_SIZE_RATIO = 0.75  # c = ⌊3L/4⌋ (the reference's `pretraining_length * 3 // 4`)
WINDOW_DIVISOR = 8  # w = ⌊L/8⌋ (the reference's `pretraining_length // 8`)


def reference_mscale(seq_len: int, original_len: int) -> float:
    """The factor the reference puts on q's and k's cos and sin: 0.05·ln(n/L) + 1 past L, 1 within it."""
    scale = seq_len / original_len
    return 1.0 if scale <= 1 else 0.05 * math.log(scale) + 1.0


class DualChunk(PositionalEncoding):
    name, kind = "dual-chunk", "rotary"

    def __init__(
        self,
        head_dim: int,
        base: float,
        original_len: int,
        chunk_size: int,
        window: int,
        attention_factor: float | None = None,
    ):
        super().__init__()
        if head_dim % 2:
            raise UserError(f"dual-chunk needs an even head dimension, got {head_dim}")
        self.chunk_size = whole_number(chunk_size, "dual-chunk chunk_size", minimum=2)
        self.window = whole_number(window, "dual-chunk window")
        if self.window >= self.chunk_size:
            raise UserError(f"dual-chunk window ({self.window}) must be below its chunk_size ({self.chunk_size})")
        self.chunk = self.chunk_size - self.window  # s: the tokens of one chunk
        self.base, self.original_len, self.attention_factor = float(base), int(original_len), attention_factor
        self.inv_freq = rope_inv_freq(head_dim, base)  # (Dh/2,): plain RoPE frequencies

    def rotate(self, q, k, pos, seq_len=None):
        """Scales q and k by the attention factor m of the whole sequence's length, which is m on every cos and
        sin, and rotates k at its place in its chunk (j mod s): a key's one rotation, made once, so a KV cache
        holds it. q is left for the kernels, which rotate it once per part."""
        if seq_len is None:
            seq_len = int(pos[-1]) + 1
        m = self.attention_factor if self.attention_factor is not None else reference_mscale(seq_len, self.original_len)
        if m != 1:
            q, k = q * m, k * m
        return q, self.rotate_at(k, (pos % self.chunk).float())

    def rotate_at(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, Dh) rotated at float positions (T,), as `Rotary` rotates at integers."""
        cos, sin = rotary_cos_sin(positions, self.inv_freq, 1.0)
        return apply_rotary(x, cos, sin)

    def successive_query(self, pos: torch.Tensor) -> torch.Tensor:
        return (pos % self.chunk + self.chunk).clamp(max=self.chunk_size).float()

    @property
    def inter_query(self) -> float:
        return float(min(2 * self.chunk - 1, self.chunk_size))

    def chunk_form(self) -> ChunkedRotary:
        return ChunkedRotary(self.chunk, self.rotate_at, self.successive_query, self.inter_query)

    def relative_position(self, query: int, key: int) -> float:
        """The relative position the query at `query` sees the key at `key` (≤ query) at."""
        apart = query // self.chunk - key // self.chunk
        if apart == 0:
            seen = query % self.chunk
        elif apart == 1:
            seen = float(self.successive_query(torch.tensor([query]))[0])
        else:
            seen = self.inter_query
        return float(seen - key % self.chunk)

    def describe(self) -> dict:
        factor = {} if self.attention_factor is None else {"attention_factor": self.attention_factor}
        return {"base": self.base, "chunk_size": self.chunk_size, "window": self.window, **factor}


def build_dual_chunk(shape: Shape) -> DualChunk:
    options = options_of(shape, "dual-chunk", ("chunk_size", "window", "attention_factor"))
    length = shape.original_len or shape.max_len
    chunk_size = options.get("chunk_size", max(2, int(length * CHUNK_SIZE_RATIO)))
    window = options.get("window", max(1, length // WINDOW_DIVISOR))
    return DualChunk(shape.head_dim, shape.base, length, chunk_size, window, options.get("attention_factor"))


def show_dual_chunk(query: ShowQuery) -> dict:
    """Its chunks and the relative position each of `--distances` gets at the last query of `--seq-len`."""
    encoding = build_dual_chunk(
        Shape(0, query.heads, query.head_dim, query.original_len, query.base, 1.0, query.original_len, query.options)
    )
    seq_len = query.seq_len if query.seq_len is not None else round(query.original_len * query.factor)
    last = seq_len - 1
    distances = [d for d in (query.distances or []) if 0 <= d <= last]
    return {
        "original_len": query.original_len,
        "seq_len": seq_len,
        **encoding.describe(),
        "chunk": encoding.chunk,
        "distances": distances,
        "relative_position": [encoding.relative_position(last, last - d) for d in distances],
    }


DUAL_CHUNK = EncodingSpec(
    "dual-chunk",
    "rotary",
    "dual chunk attention: intra-, successive- and inter-chunk positions, none past c (An et al. 2024, ChunkLlama)",
    build_dual_chunk,
    {"base": 10000.0, "chunk_size": "⌊3L/4⌋", "window": "⌊L/8⌋", "attention_factor": "0.05·ln(n/L)+1 past L"},
    "#8dd3c7",
    show_dual_chunk,
    trains_own_model=False,
)
