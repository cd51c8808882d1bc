"""Every test vector of the reference page, plus the properties that pin each encoding."""

import math

import pytest
import torch

from extrapolate.core.errors import PositionOutOfRange
from extrapolate.encodings import ALiBi, Rotary, alibi_slopes, build_encoding, sinusoidal_table, t5_bucket
from extrapolate.encodings.frequencies import (
    SCALINGS,
    dynamic_ntk,
    llama3,
    ntk,
    ntk_base,
    pi,
    rope_inv_freq,
    yarn,
    yarn_correction_dim,
)
from extrapolate.encodings.rotary import logn_scale


def close(a, b, tol=1e-6):
    assert torch.allclose(
        torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), rtol=tol, atol=0
    ), (a, b)


# ---- absolute -------------------------------------------------------------------------------------------


def test_sinusoidal_vector():
    expected = [0.84147098, 0.54030231, 0.09983342, 0.99500417, 0.00999983, 0.99995, 0.001, 0.9999995]
    close(sinusoidal_table(torch.tensor([1]), 8)[0], expected, 1e-6)


def test_sinusoidal_shift_is_a_rotation_per_pair():
    width, k = 16, 37
    pos = torch.arange(0, 5000, 97)
    pe, shifted = sinusoidal_table(pos, width), sinusoidal_table(pos + k, width)
    freq = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    for i, f in enumerate(freq.tolist()):
        c, s = math.cos(k * f), math.sin(k * f)
        sin_p, cos_p = pe[:, 2 * i].double(), pe[:, 2 * i + 1].double()
        # sin(a+b) = sin a cos b + cos a sin b; cos(a+b) = cos a cos b - sin a sin b: the same matrix for every p
        close_sin = sin_p * c + cos_p * s
        close_cos = cos_p * c - sin_p * s
        assert torch.allclose(shifted[:, 2 * i].double(), close_sin, atol=2e-3)
        assert torch.allclose(shifted[:, 2 * i + 1].double(), close_cos, atol=2e-3)


def test_sinusoidal_has_no_length_limit():
    table = sinusoidal_table(torch.tensor([10**6]), 8)
    assert torch.isfinite(table).all()


def test_learned_past_table_is_a_typed_error_unless_clamped():
    enc = build_encoding("learned", d_model=8, n_heads=2, head_dim=4, max_len=16)
    x = torch.zeros(1, 20, 8)
    with pytest.raises(PositionOutOfRange) as info:
        enc.embed(x, torch.arange(20))
    assert info.value.position == 19 and info.value.limit == 16
    clamped = build_encoding("learned", d_model=8, n_heads=2, head_dim=4, max_len=16, learned_policy="clamp")
    out = clamped.embed(x, torch.arange(20))
    assert torch.equal(out[0, 19], clamped.table.weight[15].detach())


# ---- bias -----------------------------------------------------------------------------------------------


def test_alibi_vectors():
    close(alibi_slopes(8), [2.0**-i for i in range(1, 9)])
    close(alibi_slopes(6), [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125])
    close(alibi_slopes(12)[8:], [0.70710678, 0.35355339, 0.1767767, 0.08838835], 1e-7)
    close(alibi_slopes(12)[:8], alibi_slopes(8))


@pytest.mark.parametrize("n", range(1, 65))
def test_alibi_rule_for_every_head_count(n):
    slopes = alibi_slopes(n)
    assert len(slopes) == n and len(set(slopes)) == n
    c = 2 ** math.floor(math.log2(n))
    base = [2.0 ** (-8.0 * h / c) for h in range(1, c + 1)]
    close(slopes[:c], base)
    if n > c:
        extra = [2.0 ** (-8.0 * h / (2 * c)) for h in range(1, 2 * c + 1)][0::2]
        close(slopes[c:], extra[: n - c])
    assert all(0 < s < 1 for s in slopes)


def test_alibi_bias_is_minus_slope_times_distance():
    enc = ALiBi(4)
    pos = torch.arange(6)
    bias = enc.bias(pos, pos)  # (H, 6, 6)
    i, j = 5, 2
    close(bias[:, i, j], -enc.slopes * (i - j))


def test_t5_vectors():
    rp = torch.tensor([-1, -5, -20, -200, -1000])
    assert t5_bucket(rp).tolist() == [1, 5, 17, 31, 31]
    assert t5_bucket(rp, bidirectional=True).tolist() == [1, 5, 10, 15, 15]


def test_t5_buckets_monotone_and_saturate():
    buckets = t5_bucket(-torch.arange(0, 5001))
    assert (buckets[1:] >= buckets[:-1]).all()
    assert buckets[:16].tolist() == list(range(16))
    assert buckets[-1] == 31 and (buckets[113:] == 31).all() and buckets[112] < 31


def test_t5_bias_shared_table_lookup():
    enc = build_encoding("t5", d_model=8, n_heads=2, head_dim=4, max_len=8)
    torch.nn.init.normal_(enc.table.weight)
    table = enc.bias_table(300)  # (H, 300)
    assert table.shape == (2, 300)
    close(table[:, 200], enc.table.weight[31].detach())
    close(table[:, 20], enc.table.weight[17].detach())


# ---- rotary ---------------------------------------------------------------------------------------------


def test_rope_and_pi_vectors():
    close(rope_inv_freq(64, 1e4)[:4], [1, 0.7498942, 0.56234133, 0.4216965], 1e-6)
    close(pi(64, 1e4, 8, 256, 256)[0][:4], [0.125, 0.09373678, 0.07029267, 0.05271206], 1e-6)


def test_ntk_vector_and_extremes():
    assert ntk_base(64, 1e4, 8) == pytest.approx(85550.37588568537, rel=1e-12)
    inv, factor = ntk(64, 1e4, 8, 256, 256)
    theta = rope_inv_freq(64, 1e4)
    assert factor == 1.0
    assert inv[0] == theta[0]
    close(inv[-1], theta[-1] / 8, 1e-5)


@pytest.mark.parametrize(
    "length,base", [(256, 10000.0), (257, 10322.7416), (512, 96610.5436), (1024, 277354.2644), (10, 10000.0)]
)
def test_dynamic_ntk_vectors(length, base):
    inv, _ = dynamic_ntk(64, 1e4, 8, 256, length)
    close(inv, rope_inv_freq(64, base), 1e-6)


def test_yarn_vectors():
    assert yarn_correction_dim(64, 1e4, 256, 32) == pytest.approx(0.83928, abs=1e-5)
    assert yarn_correction_dim(64, 1e4, 256, 1) == pytest.approx(12.88048, abs=1e-5)
    inv, mscale = yarn(64, 1e4, 8, 256, 256)
    close(inv[:4], [1.0, 0.6994205, 0.48664153, 0.33654627], 1e-6)
    close(inv[-4:], [3.9528473e-05, 2.9642173e-05, 2.2228493e-05, 1.6669019e-05], 1e-6)
    assert mscale == pytest.approx(1.2079441542, abs=1e-10)
    assert mscale**2 == pytest.approx(1.4591290796, abs=1e-10)
    untruncated, _ = yarn(64, 1e4, 8, 256, 256, truncate=False)
    close(untruncated[:4], [1.0, 0.7411362, 0.51491, 0.35548455], 1e-6)


def test_yarn_uses_the_original_length():
    # the correction range moves with L: a bug that passes L' instead shows up here
    a, _ = yarn(64, 1e4, 8, 256, 2048)
    b, _ = yarn(64, 1e4, 8, 2048, 2048)
    assert not torch.allclose(a, b)


def test_llama3_vector():
    ratio = llama3(64, 1e4, 8, 256, 256)[0] / rope_inv_freq(64, 1e4)
    close(ratio[:9], [1.0] * 9, 1e-6)
    close(ratio[9:13], [0.724475, 0.501595, 0.334459, 0.209125], 1e-5)
    close(ratio[13:], [0.125] * 19, 1e-6)


@pytest.mark.parametrize("name", list(SCALINGS))
def test_every_scaling_at_factor_one_is_rope(name):
    for seq_len in (1, 100, 256):
        inv, factor = SCALINGS[name].fn(64, 1e4, 1.0, 256, seq_len)
        assert torch.equal(inv, rope_inv_freq(64, 1e4)) and factor == 1.0


def test_dynamic_yarn_past_L_is_yarn_at_the_sequences_own_scale():
    """l = 1000 past L = 256: s = l/L = 3.90625, whatever the factor (transformers' yarn at factor 1000/256 gives
    these values to 1 ulp); an off-by-one (l - 1)/L or the static factor fails every assertion."""
    inv, mscale = SCALINGS["dynamic-yarn"].fn(64, 1e4, 8.0, 256, 1000)
    assert inv[0].item() == 1.0  # the fastest pairs keep θ
    assert inv[1].item() == pytest.approx(0.7069771885871887, rel=1e-6)
    assert inv[-1].item() == pytest.approx(1e4 ** (-62 / 64) / 3.90625, rel=1e-6)  # the slowest: θ/s
    assert mscale == pytest.approx(0.1 * math.log(3.90625) + 1, rel=1e-12)  # 1.1362577834502574


@pytest.mark.parametrize("name", ["dynamic-ntk", "dynamic-yarn"])
def test_dynamic_kinds_within_L_are_rope_and_stateless(name):
    enc = Rotary(32, name, factor=8.0, original_len=64)
    plain = Rotary(32, "rope", original_len=64)
    q, k = torch.randn(2, 1, 2, 40, 32).unbind(0)
    before = enc.rotate(q, k, torch.arange(40))
    close(before[0], plain.rotate(q, k, torch.arange(40))[0], 1e-6)
    long_q, long_k = torch.randn(2, 1, 2, 500, 32).unbind(0)
    long_out = enc.rotate(long_q, long_k, torch.arange(500))
    assert not torch.allclose(long_out[0], plain.rotate(long_q, long_k, torch.arange(500))[0])
    after = enc.rotate(q, k, torch.arange(40))
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])


@pytest.mark.parametrize("name", list(SCALINGS))
def test_rotary_scores_depend_only_on_offset(name):
    torch.manual_seed(0)
    enc = Rotary(32, name, factor=4.0, original_len=64)
    q, k = torch.randn(32, dtype=torch.float64).float(), torch.randn(32).float()
    length = 400
    pos = torch.arange(length)
    qs = q.expand(1, 1, length, 32)
    ks = k.expand(1, 1, length, 32)
    rq, rk = enc.rotate(qs, ks, pos)
    if enc.logn:  # log-n scaling multiplies each query by a factor of its position (tests/test_logn.py): the
        rq = rq / logn_scale(pos, 64)[:, None]  # rotation under it depends on the offset alone
    scores = rq[0, 0] @ rk[0, 0].T  # (T, T): entry (m, n) = <R_m q, R_n k>
    for offset in (0, 3, 50, 333):
        diagonal = torch.diagonal(scores, -offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=2e-3)


def test_yarn_attention_factor_scales_logits_by_mscale_squared():
    enc, plain = Rotary(16, "yarn", factor=8.0, original_len=64), Rotary(16, "rope", original_len=64)
    inv, mscale = enc.frequencies(64)
    q, k = torch.randn(2, 1, 1, 5, 16).unbind(0)
    rq, rk = enc.rotate(q, k, torch.arange(5))
    # same frequencies without the factor: override the cached result on a plain encoder
    plain._static = (inv, 1.0)
    pq, pk = plain.rotate(q, k, torch.arange(5))
    close((rq @ rk.transpose(-1, -2)).flatten(), (mscale**2 * (pq @ pk.transpose(-1, -2))).flatten(), 1e-5)


def test_half_layout_matches_interleaved_up_to_permutation():
    torch.manual_seed(1)
    d, length = 16, 9
    q = torch.randn(1, 1, length, d)
    rq, _ = Rotary(d, "rope").rotate(q, q, torch.arange(length))
    # interleaved reference on the permuted vector: pair j = (x_j, x_{j+d/2})
    inv = rope_inv_freq(d, 1e4)
    angle = torch.arange(length).float()[:, None] * inv[None, :]
    x1, x2 = q[0, 0, :, : d // 2], q[0, 0, :, d // 2 :]
    close(rq[0, 0, :, : d // 2], x1 * angle.cos() - x2 * angle.sin(), 1e-5)
    close(rq[0, 0, :, d // 2 :], x2 * angle.cos() + x1 * angle.sin(), 1e-5)
