"""xPos: ζ values from the paper's formula, scores that depend only on m - n and decay, agreement with an
independent interleaved implementation written from torchscale's formulas, and no overflow at long lengths."""

import math

import pytest
import torch

from extrapolate.core.errors import PositionOutOfRange
from extrapolate.encodings.xpos import XPos, longest_exact, xpos_zeta


def test_zeta_values():
    # ζ_j = (2j + 0.4·d) / (1.4·d), worked by hand for d = 64: j = 0 → 25.6/89.6 = 2/7, j = 1 → 27.6/89.6,
    # j = 31 → 87.6/89.6
    zeta = xpos_zeta(64)
    assert zeta[0].item() == pytest.approx(2 / 7, abs=1e-15)
    assert zeta[1].item() == pytest.approx(0.30803571428571430, abs=1e-15)
    assert zeta[31].item() == pytest.approx(0.97767857142857140, abs=1e-15)
    assert (zeta < 1).all() and (zeta.diff() > 0).all()


def test_longest_exact_length():
    # 2 · 80 · 512 / ln(7/2) = 65391.5…: by hand from MAX_EXPONENT = 80 and ζ_0 = 2/7
    assert longest_exact(64, 512.0) == 65391


def score_matrix(encoding, q, k, positions, seq_len=None):
    """(T, T) scores of one head: q, k (Dh,) placed at every position."""
    T = positions.numel()
    qs, ks = q.expand(1, 1, T, -1), k.expand(1, 1, T, -1)
    rq, rk = encoding.rotate(qs.clone(), ks.clone(), positions, seq_len)
    return rq[0, 0].double() @ rk[0, 0].double().T


def test_scores_depend_only_on_the_distance():
    torch.manual_seed(0)
    encoding = XPos(16)
    q, k = torch.randn(2, 16).unbind(0)
    scores = score_matrix(encoding, q, k, torch.arange(64))
    for shift in (1, 7, 30):
        assert torch.allclose(scores[shift:, shift:].diagonal(), scores.diagonal()[: 64 - shift], rtol=1e-5)
        assert torch.allclose(scores.diagonal(-shift)[shift:], scores.diagonal(-shift)[: 64 - 2 * shift], rtol=1e-5)
    # and not on the reference point: the same positions in a longer sequence give the same scores
    longer = score_matrix(encoding, q, k, torch.arange(64), seq_len=4096)
    assert torch.allclose(scores, longer, rtol=1e-5, atol=1e-6)


def test_scores_decay_with_distance():
    """With q = k aligned on one pair with no rotation (a zero-frequency view: the same vector at distance d
    rotated back), the per-pair factor ζ_j^(d/γ) is what remains: it falls with d."""
    encoding = XPos(8)
    positions = torch.arange(2048)
    up = encoding.scales(positions, 1024)  # (T, Dh)
    factor = up[2047] / up  # q at 2047 times k at m: ζ^((2047 - m)/γ)
    assert (factor[:-1, 0] < factor[1:, 0]).all()  # closer keys weigh more
    expected = xpos_zeta(8)[0] ** (2047 / 512)  # pair 0 at distance 2047, by the formula
    assert factor[0, 0].item() == pytest.approx(expected.item(), rel=1e-6)


def torchscale_style_scores(q, k, length, head_dim, scale_base=512.0):
    """Independent reimplementation from torchscale's published formulas: interleaved pairs, positions centred
    as min_pos = -length // 2, q scaled up, k scaled down. Returns the (T, T) score matrix of one head."""
    zeta = (torch.arange(0, head_dim, 2, dtype=torch.float64) + 0.4 * head_dim) / (1.4 * head_dim)
    positions = torch.arange(-(length // 2), length - length // 2, dtype=torch.float64)
    scale = zeta[None, :] ** (positions[:, None] / scale_base)  # (T, d/2)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim // 2, dtype=torch.float64) / (head_dim // 2)))
    angle = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, d/2)

    def rotate(x, s):
        pairs = x.double().view(-1, 2)  # (d/2, 2) interleaved
        a, b = pairs[:, 0], pairs[:, 1]
        cos, sin = angle.cos() * s, angle.sin() * s
        return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(1)  # (T, d)

    return rotate(q, scale) @ rotate(k, 1 / scale).T


def test_equals_an_independent_interleaved_implementation():
    torch.manual_seed(1)
    d, T = 16, 96
    q, k = torch.randn(2, d).unbind(0)
    ours = score_matrix(XPos(d), q, k, torch.arange(T))
    # our half-pair layout is the interleaved one up to a permutation of the q/k rows
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    theirs = torchscale_style_scores(q[perm.argsort()], k[perm.argsort()], T, d)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.allclose(ours[causal], theirs[causal], rtol=1e-4, atol=1e-5)


def test_no_overflow_at_32k_and_unsupported_past_the_exact_range():
    encoding = XPos(32)
    positions = torch.arange(32768)
    q = torch.ones(1, 1, 32768, 32)
    rq, rk = encoding.rotate(q, q.clone(), positions)
    assert torch.isfinite(rq).all() and torch.isfinite(rk).all()
    # pair 0 of the score of the last query and the first key, q = k = ones: 2·cos(32767·θ_0)·ζ_0^(32767/γ)
    # (by hand: the pair rotated by angles a and b gives 2·cos(a - b), θ_0 = 1), about 2e-35, and exact although
    # each factor alone (ζ_0^(±32767/γ) ≈ 1e∓35) sits near float32's limits without the reference point
    pair0 = (rq[0, 0, -1, 0] * rk[0, 0, 0, 0] + rq[0, 0, -1, 16] * rk[0, 0, 0, 16]).item()
    expected = 2 * math.cos(32767.0) * (2 / 7) ** (32767 / 512)
    assert pair0 == pytest.approx(expected, rel=1e-3)
    with pytest.raises(PositionOutOfRange):
        encoding.rotate(q[:, :, :1], q[:, :, :1], torch.tensor([70000]), seq_len=70001)
