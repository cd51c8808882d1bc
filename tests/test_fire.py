"""FIRE: the normalised distance from the paper's formula, the reference code's initial values, and the blocked
kernel (one query block at a time, linear memory) against the full-matrix reference."""

import pytest
import torch

from extrapolate.encodings.fire import Fire, normalised_distance
from extrapolate.kernels.attention import blocked_attention, causal_attention, kernel_for


def test_normalised_distance_values():
    c, threshold = torch.tensor(0.1), torch.tensor(512.0)
    q_pos = torch.tensor([100, 1000, 1000, 400])
    k_pos = torch.tensor([90, 990, 0, 100])
    x = normalised_distance(q_pos, k_pos, c, threshold).diagonal()
    # ψ(d)/(ψ(max(L, i)) + 1e-6), ψ(x) = ln(0.1·x + 1), worked by hand: i = 100 (below L = 512), d = 10 → ln 2 /
    # ln 52.2; i = 1000, d = 10 → ln 2 / ln 101; i = 1000, d = 1000 → ln 101 / ln 101 (1 - 2.2e-7); i = 400,
    # d = 300 → ln 31 / ln 52.2
    expected = [0.17525475289099296, 0.15019045068056147, 0.9999997833209816, 0.868246450150321]
    assert x.tolist() == pytest.approx(expected, rel=1e-5)


def test_initial_values_follow_the_reference():
    # the paper's published code: c = 0.1, L = 512 (learned through a multiplier), MLP 1 → 32 → heads
    encoding = Fire(6)
    c, threshold = encoding.c_and_threshold()
    assert c.item() == pytest.approx(0.1, rel=1e-6) and threshold.item() == pytest.approx(512.0, rel=1e-6)
    assert encoding.hidden.out_features == 32 and encoding.out.out_features == 6
    assert not encoding.toeplitz and kernel_for(encoding, "flex").name == "blocked"


def test_bias_depends_on_the_query_position_past_the_threshold():
    torch.manual_seed(0)
    encoding = Fire(2, threshold=8.0)
    with torch.no_grad():
        bias = encoding.bias(torch.arange(64), torch.arange(64))  # (H, T, T)
    # below the threshold the bias is a function of i - j alone; past it, the same distance differs by row
    assert torch.allclose(bias[:, 5, 2], bias[:, 7, 4])
    assert not torch.allclose(bias[:, 40, 30], bias[:, 60, 50])


@pytest.mark.parametrize("length,block", [(300, 2 * 4 * 300 * 40), (97, 1 << 23)])
def test_blocked_kernel_equals_the_reference(length, block):
    torch.manual_seed(1)
    encoding = Fire(4, threshold=32.0)  # a low threshold so the blocks cross it
    q, k, v = torch.randn(3, 2, 4, length, 16).unbind(0)
    with torch.no_grad():
        blocked = blocked_attention(q, k, v, encoding, block)
        reference = causal_attention(q, k, v, encoding, "reference")
    assert torch.allclose(blocked, reference, atol=1e-5)


def test_blocked_kernel_continues_a_cache():
    """Queries that continue cached keys (decoding) get the bias of their absolute positions."""
    torch.manual_seed(2)
    encoding = Fire(4, threshold=16.0)
    q, k, v = torch.randn(3, 1, 4, 120, 16).unbind(0)
    with torch.no_grad():
        full = causal_attention(q, k, v, encoding, "reference")
        tail = blocked_attention(q[:, :, -5:], k, v, encoding)
    assert torch.allclose(tail, full[:, :, -5:], atol=1e-5)


def test_bias_block_memory_is_linear():
    """One block at 32768 keys holds (H, rows, keys), never keys × keys; its MLP slices stay bounded."""
    encoding = Fire(4)
    with torch.no_grad():
        block = encoding.bias_block(32768 - 16, 32768)
    assert block.shape == (4, 16, 32768)
    assert torch.isinf(block[:, 0, -1]).all() and torch.isfinite(block[:, -1]).all()
