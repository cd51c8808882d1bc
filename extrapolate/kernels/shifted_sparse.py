"""LongLoRA's shifted sparse attention (S²-attention; Chen et al., ICLR 2024), for fine-tuning only: the sequence
is cut into groups of G tokens, causal attention within each group; the second half of the heads is cut with
the groups shifted by G/2, so that information flows between neighbouring groups. As the authors' current
training kernel (dvlab-research/LongLoRA, `forward_flashattn`): the shifted heads' first and last half-groups
are groups of their own, and no token is rolled around to the other end (their pure-PyTorch version rolls, and
lets the first tokens see the last ones). Evaluation attends in full.
"""

from __future__ import annotations

import torch

from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.sdpa import sdpa


def grouped_causal(x_q, x_k, x_v, group: int) -> torch.Tensor:
    """Causal attention within consecutive groups of `group` tokens: (B, H, T, Dh) each, T a multiple of it."""
    batch, heads, length, dim = x_q.shape
    count = length // group

    def split(x):  # (B, H, T, Dh) -> (B·count, H, group, Dh)
        return x.reshape(batch, heads, count, group, dim).transpose(1, 2).reshape(batch * count, heads, group, dim)

    out = sdpa(split(x_q), split(x_k), split(x_v), is_causal=True)
    return out.reshape(batch, count, heads, group, dim).transpose(1, 2).reshape(batch, heads, length, dim)


def shifted_sparse_attention(q, k, v, group: int) -> torch.Tensor:
    """q: (B, H, T, Dh); k, v: (B, Hkv, T, Dh) -> (B, H, T, Dh); T a multiple of the even group size G."""
    length = q.shape[2]
    if length % group or group % 2:
        raise ValueError(f"shifted sparse attention needs an even group size dividing the length ({group}, {length})")
    k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])
    half, shift = q.shape[1] // 2, group // 2
    plain = grouped_causal(q[:, :half], k[:, :half], v[:, :half], group)
    q2, k2, v2 = q[:, half:], k[:, half:], v[:, half:]
    middle = slice(shift, length - shift)  # whole groups, shifted by G/2
    parts = [grouped_causal(q2[:, :, middle], k2[:, :, middle], v2[:, :, middle], group)] if length > group else []
    edges = [slice(0, shift), slice(length - shift, length)]  # the half-groups at either end, each a group
    ends = [sdpa(q2[:, :, e], k2[:, :, e], v2[:, :, e], is_causal=True) for e in edges]
    shifted = torch.cat([ends[0], *parts, ends[1]], dim=2)
    return torch.cat([plain, shifted], dim=1)
