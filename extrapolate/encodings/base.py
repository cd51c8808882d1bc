"""The one interface every positional encoding implements: three hooks, each a no-op by default.

- `embed(x, pos)`: add a signal to the token embeddings once, below the first block (absolute kinds);
- `rotate(q, k, pos)`: rotate queries and keys in every layer (rotary kinds);
- `bias_table(n)`: the additive logit bias as a function of the query-key distance (bias kinds).

The model calls all three and knows no encoding by name. Training-free extensions of a RoPE model whose
relative position is not the distance itself (Self-Extend, ReRoPE) rotate nothing in `rotate`: they describe
their two-part attention in `two_part_form()`, and the attention kernels rotate q and k per part (dual chunk
attention, whose parts are set by chunks rather than distance, in `chunk_form()`). Most bias
kinds depend only on the distance i - j, so they expose an (H, n) table over distances instead of an (H, n, n)
matrix; kernels gather it per block. A bias that also depends on the query's own position (FIRE) sets
`toeplitz = False` and gives the blocked kernel one query block at a time through `bias_block`.

One more hook, `positions(pos)`, lets an encoding replace the positions of a whole forward pass once, before
the three above see them (randomized positions in training); it is the identity by default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LinearBias:
    """A bias -m_h·d (ALiBi's form): within a block of query rows one value per key, which the fused kernels
    carry as a mask of one row per head."""

    slopes: torch.Tensor  # (H,) float32


@dataclass(frozen=True)
class SaturatingBias:
    """A bias constant per head from `saturation` tokens back (T5's form): the fused kernels give far keys that
    constant through their log-sum-exp and only a band of `saturation` keys an explicit bias."""

    saturation: int


@dataclass(frozen=True)
class TwoPartRotary:
    """Rotary attention in two parts by distance d = i - j: keys with d < `window` see q and k rotated at
    their own positions (plain RoPE); keys further back see q rotated at `far_query(i)` and k at `far_key(j)`,
    so their relative position is far_query(i) - far_key(j) (or only the first `far_keys` keys are seen that
    far back). The kernels attend to each part and merge the two by their log-sum-exp, so no score matrix is
    ever held whole."""

    window: int
    rotate: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x (B, H, T, Dh), positions (T,) float) -> x rotated
    far_query: Callable[[torch.Tensor], torch.Tensor]  # absolute query positions (T,) int64 -> (T,) float32
    far_key: Callable[[torch.Tensor], torch.Tensor]  # absolute key positions (T,) int64 -> (T,) float32
    # (x (B, H, T, Dh), start, far) -> x of positions start … start + T - 1 rotated at those positions (far:
    # at far_key's), from angles kept between calls: what `rotate` gives, without recomputing every cached key's
    rotate_from: Callable[[torch.Tensor, int, bool], torch.Tensor]
    # the far part sees only the first `far_keys` keys, the rest of it masked (StreamingLLM's attention sinks,
    # LM-Infinite's global tokens: a Λ-shaped mask); None: every key from the window on
    far_keys: int | None = None


@dataclass(frozen=True)
class ChunkedRotary:
    """Dual chunk attention's rotary form: the sequence is cut into chunks of `chunk` tokens; every key is
    rotated at its position in its chunk (j mod chunk) by the encoding's `rotate`, before the kernels see it
    (and before a KV cache keeps it), and the query, by the kernels, at one of three positions by the chunk
    the key lies in: its own position in its chunk (i mod chunk) for keys of its own chunk (causal), and
    `successive_query(i)` for keys of the chunk before, `inter_query` for keys of every earlier chunk. The kernels
    attend to each part and merge them by their log-sum-exp, so no score matrix is ever held whole."""

    chunk: int
    rotate: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x (B, H, T, Dh), positions (T,) float) -> x rotated
    successive_query: Callable[[torch.Tensor], torch.Tensor]  # absolute query positions (T,) int64 -> (T,) float32
    inter_query: float


class PositionalEncoding(nn.Module):
    name: str = "base"
    kind: str = "none"  # absolute | bias | rotary | none
    has_bias: bool = False
    toeplitz: bool = True  # the bias depends on i - j only (`bias_table`); False: on i too (`bias_block`)
    horizon: int | None = None  # keys this many tokens back or further are never seen (a sliding window)
    score_cap: float | None = None  # scores soft-capped as c·tanh(s / c) before the bias (`softcap.ScoreCap`)
    # a forget gate's decay enters the scores (FoX): the attention layer computes it from its input
    # (`log_forget`), and the kernels add c_i - c_j from the call's `decay` (`Decayed`)
    forgets: bool = False
    # training attends in groups of this many tokens, half the heads shifted by half a group (LongLoRA's
    # S²-attention, `ShiftedSparse`); None: every earlier key
    sparse_group: int | None = None
    # an encoding that attends by a rule of its own, not a softmax of q·k plus a bias the shared kernels build
    # (stick-breaking's weights, CoPE's positions counted from the scores): the name of the kernel
    # (kernels/own.py) that the plan runs and a result records; None: the shared kernels
    own_kernel: str | None = None

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        """pos: (T,) int64 -> (T,) int64, the positions every hook of this forward pass sees. Called once per
        forward, so an encoding that draws positions (in training) draws them once for all layers."""
        return pos

    def embed(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x: (B, T, D), pos: (T,) int64 -> (B, T, D)."""
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor, seq_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q: (B, H, T, Dh), k: (B, Hkv, T, Dh), pos: (T,) int64 -> rotated (q, k).

        `seq_len`: the length of the whole sequence when it is fed in pieces (a cached prompt, then the
        answer); length-dependent scalings must use it so every piece sees the same frequencies."""
        return q, k

    def bias_table(self, n: int, device: torch.device | None = None) -> torch.Tensor | None:
        """(H, n) float32: the logit bias for a key `d = i - j` tokens back, d = 0 … n-1; None if no bias."""
        return None

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """(H, Tq, Tk) bias for explicit positions (causal part only; j > i gets the d = 0 value).

        Convenience for tests and small inputs; kernels use `bias_table` to stay linear in memory.
        """
        distance = (q_pos[:, None] - k_pos[None, :]).clamp(min=0)  # (Tq, Tk)
        table = self.bias_table(int(distance.max()) + 1, device=q_pos.device)
        if table is None:
            return None
        return table[:, distance]  # (H, Tq, Tk)

    def score_bias(self, keys: int, device: torch.device | None = None) -> Callable | None:
        """The bias as a function `bias(h, i, d)` of the head, the query's absolute position i and the
        distance d = i - j (0 ≤ d < keys), elementwise on integer index tensors: what flex_attention's score
        modification computes inside its kernel. By default a lookup in the distance table; None if no bias."""
        table = self.bias_table(keys, device=device)  # (H, keys) float32
        if table is None:
            return None
        return lambda h, i, d: table[h, d]

    def bias_block(self, q0: int, q1: int, device: torch.device | None = None) -> torch.Tensor | None:
        """(H, q1-q0, q1) float32 bias of queries at absolute positions q0 … q1-1 against keys 0 … q1-1, with
        -inf above the diagonal; only for `toeplitz = False` kinds, whose bias no distance table can hold."""
        return None

    def fused_form(self) -> LinearBias | SaturatingBias | None:
        """The form in which the fused bias kernels take this encoding's bias; None: the blocked kernel."""
        return None

    def two_part_form(self) -> TwoPartRotary | None:
        """Set when the relative position depends on the distance in a way no rotation of q and k alone can
        express; `rotate` is then the identity and the attention kernels rotate each part."""
        return None

    def log_forget(self, x: torch.Tensor) -> torch.Tensor | None:
        """x: the attention layer's input (B, T, D) -> (B, H, T) float32 log forget gate of each head and
        position, for an encoding that `forgets`; None otherwise."""
        return None

    def chunk_form(self) -> ChunkedRotary | None:
        """Set when the relative position depends on which chunks the query and key lie in (dual chunk
        attention); `rotate` then rotates nothing, and the attention kernels rotate each part."""
        return None

    def describe(self) -> dict:
        """Parameters that identify this encoding (recorded with results)."""
        return {}


class Wrapped(PositionalEncoding):
    """An encoding on top of another (a sliding window, a soft cap): every hook and property passes through to
    `inner` unless the wrapper overrides it, so a RoPE scaling under it rotates as it would alone. Neither
    fused form applies to the wrapped attention."""

    def __init__(self, inner: PositionalEncoding):
        super().__init__()
        self.inner = inner
        self.name, self.kind, self.has_bias, self.toeplitz = inner.name, inner.kind, inner.has_bias, inner.toeplitz
        self.horizon, self.score_cap, self.forgets = inner.horizon, inner.score_cap, inner.forgets
        self.sparse_group, self.own_kernel = inner.sparse_group, inner.own_kernel

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

    def log_forget(self, x: torch.Tensor) -> torch.Tensor | None:
        return self.inner.log_forget(x)

    def describe(self) -> dict:
        return self.inner.describe()


class Decayed(Wrapped):
    """One attention call of an encoding that `forgets`: the encoding, with the cumulative log forget gate
    `decay` (B, H, Tk) float32 of every key position of the call (a cache's included), which the kernels read."""

    def __init__(self, inner: PositionalEncoding, decay: torch.Tensor):
        super().__init__(inner)
        self.forgets, self.decay = True, decay


class ShiftedSparse(Wrapped):
    """An encoding that trains with LongLoRA's shifted sparse attention in groups of `group` tokens
    (kernels/shifted_sparse.py): set on a model for its fine-tuning only; evaluation attends in full."""

    def __init__(self, inner: PositionalEncoding, group: int):
        super().__init__(inner)
        self.sparse_group = group
