"""LongLoRA's S²-attention (the shifted sparse attention it trains with) equals the authors' kernel, ported. It
needs no adapters, so it runs where peft is not installed (tests/test_adapters.py skips there)."""

import math

import pytest
import torch

from extrapolate.kernels.shifted_sparse import shifted_sparse_attention

# Ported from dvlab-research/LongLoRA at d4eb344c5ccc9e91c0812a2b2aeea69070df8c33,
# llama_attn_replace.py `forward_flashattn`: the heads split into halves stacked along the batch, cut by
# `cu_q_lens` (groups at 0, G, 2G, … for the first half; G/2, 3G/2, … for the second, its ends groups of their
# own) and attended causally within each cut, as flash_attn_varlen_qkvpacked_func(..., causal=True) does


def s2_reference(q, k, v, group_size):
    """q, k, v (B, H, N, D), the heads of a group of the same kv head already repeated -> (B, H, N, D)."""
    bsz, nheads, q_len, dim = q.shape
    halves = [(x[:, : nheads // 2], x[:, nheads // 2 :]) for x in (q, k, v)]
    cu_q_lens = [list(range(0, q_len, group_size)) + [q_len]]
    cu_q_lens.append([0] + list(range(group_size // 2, q_len, group_size)) + [q_len])
    outs = []
    for half, cuts in enumerate(cu_q_lens):
        qh, kh, vh = (h[half] for h in halves)
        pieces = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            scores = qh[:, :, a:b] @ kh[:, :, a:b].transpose(-1, -2) / math.sqrt(dim)
            causal = torch.ones(b - a, b - a, dtype=torch.bool).triu(1)
            pieces.append(scores.masked_fill(causal, float("-inf")).softmax(-1) @ vh[:, :, a:b])
        outs.append(torch.cat(pieces, dim=2))
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("length,group", [(64, 16), (128, 32), (48, 48), (40, 10)])
def test_shifted_sparse_attention_equals_the_reference(length, group):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, length, 8), torch.randn(2, 2, length, 8), torch.randn(2, 2, length, 8)
    expected = s2_reference(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), group)
    torch.testing.assert_close(shifted_sparse_attention(q, k, v, group), expected, atol=1e-5, rtol=0)
