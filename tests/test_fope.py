"""FoPE against a port of its authors' code (yiju-zhao/Fourier-Position-Embedding at 3713108, `olmo/model.py`:
`RotaryEmbedding.get_inv_freq` with the floor clamped to zero, `FourierEmbedding.apply_rotary_pos_emb` with
separate sin and cos bases per head, zeros ignored): the same q and k at every position past L, the floor and
the padded pairs each pinned by a mutation that fails."""

import math

import pytest
import torch
import torch.nn.functional as F

from extrapolate.encodings.catalog import build_encoding
from extrapolate.encodings.fope import FoPE, initial_coefficients, kept_frequencies, stepped_identity
from tests.helpers import continued_and_whole


def port_rotate_half(x):
    """The reference's `rotate_half`: (B, nh, T, hs) viewed as two halves, (-x2, x1)."""
    B, nh, T, hs = x.shape
    x1, x2 = x.view(B, nh, T, 2, hs // 2).unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def port_fope(x, all_len, head_dim, base, train_len, sin_coef, cos_coef, floor=True, pad_value=1.0):
    """The reference's FoPE of x (B, H, T, Dh), the last T of `all_len` positions: its inv_freq (float32,
    clamped below 2π/L to 0, zeros dropped), the sin/cos tables of arange(all_len), each basis mixed by its
    per-head coefficients, the pairs past them padded with `pad_value` (1 in the reference)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    if floor:
        inv_freq[inv_freq < 2 * torch.pi / train_len] = 0.0
        inv_freq = inv_freq[inv_freq != 0.0]
    seq = torch.arange(all_len, dtype=torch.float)
    positions = torch.einsum("t, hd -> htd", seq, inv_freq[None, :]).unsqueeze(0)  # (1, 1, T, D)
    q_len = x.shape[-2]
    pos_sin = positions.sin()[:, :, all_len - q_len : all_len, :]
    pos_cos = positions.cos()[:, :, all_len - q_len : all_len, :]
    fourier_sin = torch.einsum("bhtD, hDd -> bhtd", pos_sin, sin_coef)
    fourier_cos = torch.einsum("bhtD, hDd -> bhtd", pos_cos, cos_coef)
    fourier_sin = F.pad(fourier_sin, (0, head_dim // 2 - fourier_sin.size(-1)), mode="constant", value=pad_value)
    fourier_cos = F.pad(fourier_cos, (0, head_dim // 2 - fourier_cos.size(-1)), mode="constant", value=pad_value)
    fourier_sin = torch.cat((fourier_sin, fourier_sin), dim=-1)
    fourier_cos = torch.cat((fourier_cos, fourier_cos), dim=-1)
    return x * fourier_cos + port_rotate_half(x) * fourier_sin


CASES = [(16, 64), (16, 2048), (32, 256)]  # (head dim, L): square series, a stepped identity, a wider head


def rotated(head_dim, train_len, offset=0, length=None, seed=0):
    torch.manual_seed(seed)
    fope = FoPE(head_dim, n_heads=3, n_layers=2, train_len=train_len)
    length = length or 3 * train_len  # well past L
    q, k = torch.randn(2, 3, length, head_dim), torch.randn(2, 3, length, head_dim)
    layer = fope.for_layer(1)
    pos = torch.arange(offset, offset + length)
    return layer, q, k, layer.rotate(q, k, pos)


@pytest.mark.parametrize("head_dim,train_len", CASES)
def test_fope_rotates_q_and_k_as_the_reference_does(head_dim, train_len):
    layer, q, k, (q_out, k_out) = rotated(head_dim, train_len, length=min(3 * train_len, 700))
    for x, ours in ((q, q_out), (k, k_out)):
        theirs = port_fope(x, x.shape[2], head_dim, 10000.0, train_len, layer.sin_coef, layer.cos_coef)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_a_continued_cache_rotates_its_positions_as_the_whole_sequence():
    """Queries at positions 300 … 309 (after a cache) take the reference's rows all_len - q_len … all_len."""
    layer, q, _, (q_out, _) = rotated(16, 64, offset=300, length=10)
    theirs = port_fope(q, 310, 16, 10000.0, 64, layer.sin_coef, layer.cos_coef)
    torch.testing.assert_close(q_out, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mutation", [{"pad_value": 0.0}, {"floor": False}])
def test_a_port_without_the_floor_or_the_padding_differs(mutation):
    """The two parts FoPE adds to a plain series: the dropped frequencies and the pairs padded with 1."""
    layer, q, _, (q_out, _) = rotated(16, 64, length=200)
    sin_coef, cos_coef = layer.sin_coef, layer.cos_coef
    if mutation.get("floor") is False:  # the slow frequencies kept, each with a share in every turning pair
        slow = torch.full((3, 16 // 2 - sin_coef.shape[1], sin_coef.shape[2]), 0.5)
        sin_coef, cos_coef = torch.cat((sin_coef, slow), dim=1), torch.cat((cos_coef, slow), dim=1)
    mutated = port_fope(q, 200, 16, 10000.0, 64, sin_coef, cos_coef, **mutation)
    assert (q_out - mutated).abs().max() > 1e-2


def test_the_floor_keeps_the_frequencies_of_a_wavelength_up_to_L():
    """ω ≥ 2π/L kept, fastest first: at d = 16 and L = 256, ω = 1, 10^-0.5, 0.1, 10^-1.5 (the next, 0.01, turns
    less than once in 256 tokens)."""
    kept = kept_frequencies(16, 10000.0, 256)
    torch.testing.assert_close(kept, torch.tensor([1.0, 10**-0.5, 0.1, 10**-1.5]))
    assert kept.min() >= 2 * math.pi / 256 > 0.01


def test_the_stepped_identity_is_the_references():
    """D = 18 frequencies onto 16 pairs: step ⌈18/16⌉ = 2, so ones at rows 0, 2 … 16 only (nine of them)."""
    eye = stepped_identity(18, 16)
    assert eye.sum() == 9 and all(eye[2 * i, i] == 1 for i in range(9))
    assert torch.equal(stepped_identity(5, 5), torch.eye(5))


def test_the_coefficients_are_the_identity_plus_xavier_noise_of_the_gain():
    """Around the (stepped) identity, noise of std gain·√(2 / (D·d_out + H·d_out)) (torch's fans of a 3-D
    tensor), frozen: buffers, not parameters."""
    torch.manual_seed(0)
    heads, kept, width, gain = 64, 16, 8, 0.3
    noise = initial_coefficients(heads, kept, width, gain) - stepped_identity(kept, width)
    expected = gain * math.sqrt(2.0 / (kept * width + heads * width))
    assert noise.std().item() == pytest.approx(expected, rel=0.05)
    fope = FoPE(16, n_heads=2, n_layers=2, train_len=64)
    assert list(fope.parameters()) == [] and "layers.0.sin_coef" in fope.state_dict()
    assert not torch.equal(fope.layers[0].sin_coef, fope.layers[1].sin_coef)  # each layer its own


def test_each_head_has_its_own_sin_and_cos_bases_of_d_over_4_pairs_at_the_authors_gain():
    """The reference's layout (H, D, min(D, d/4)), separate draws for sin and cos and for each head, gain 0.3."""
    from extrapolate.encodings.options import FOPE_GAIN

    assert FOPE_GAIN == 0.3
    layer = FoPE(64, n_heads=3, n_layers=1, train_len=1024).layers[0]  # d = 64, L = 1024: D = 18, d/4 = 16 pairs
    assert layer.sin_coef.shape == layer.cos_coef.shape == (3, 18, 16)
    assert not torch.equal(layer.sin_coef, layer.cos_coef)
    assert not torch.equal(layer.sin_coef[0], layer.sin_coef[1])
    assert FoPE(64, n_heads=1, n_layers=1, train_len=512).layers[0].sin_coef.shape == (1, 16, 16)  # D = 16 = d/4


def test_a_fine_tune_at_a_longer_length_grows_the_bases_as_the_authors_checkpoint_does():
    """At L' more slow frequencies pass the floor: L''s frequencies (L's first) and each basis L''s fresh one
    with L''s values in its top-left corner (olmo/checkpoint.py), so the model starts from what it learned."""
    from extrapolate.core.config import ModelConfig, TrainConfig
    from extrapolate.model import TransformerLM
    from extrapolate.training.finetune import finetune_config, starting_model

    model = ModelConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=97, encoding="fope", max_len=32)
    base = TransformerLM(TrainConfig(model=model, seq_len=32, batch_size=4, steps=8, dtype="float32").model)
    grown = starting_model(finetune_config(TrainConfig(model=model, seq_len=32), "fope", 8.0, 256, 4), base, "cpu")
    before, after = base.encoding.layers[1], grown.encoding.layers[1]
    assert before.inv_freq.numel() == 2 and after.inv_freq.numel() == 4  # head_dim 16: L = 32 keeps 2, L' = 256 4
    torch.testing.assert_close(after.inv_freq, kept_frequencies(16, 10000.0, 256))
    for name in ("sin_coef", "cos_coef"):
        old, new = getattr(before, name), getattr(after, name)  # (H, 2, 2) and (H, 4, 4)
        assert new.shape == (2, 4, 4) and torch.equal(new[:, :2, :2], old)
        assert not torch.equal(new[:, 2:, 2:], torch.zeros(2, 2, 2))  # the new rows drawn, not left empty
    query = "blocks.0.attn.q_proj.weight"
    assert torch.equal(grown.state_dict()[query], base.state_dict()[query])  # the other weights as trained


def test_scores_depend_on_both_positions_not_only_their_distance():
    """Unlike RoPE: the same q and k at distance 5 score differently at positions (10, 5) and (20, 15)."""
    layer, _, _, _ = rotated(16, 64, length=30)
    q = torch.randn(1, 3, 1, 16).expand(1, 3, 30, 16)
    q_out, k_out = layer.rotate(q, q, torch.arange(30))
    near, far = (q_out[0, :, 10] * k_out[0, :, 5]).sum(-1), (q_out[0, :, 20] * k_out[0, :, 15]).sum(-1)
    assert (near - far).abs().max() > 1e-3


def test_the_encoding_builds_from_the_registry_with_its_layers():
    fope = build_encoding("fope", d_model=64, n_heads=4, head_dim=16, max_len=256, n_layers=3)
    assert len(fope.layers) == 3 and fope.describe()["kept_frequencies"] == 4


def test_a_model_continues_a_cache_exactly_and_is_evaluated_as_trained():
    """Keys are cached turned (a position-wise map), so a cache continues the whole pass; evaluation keeps the
    model's own coefficients instead of drawing new ones from the spec."""
    from extrapolate.encodings import get_spec
    from extrapolate.run.evaluate import evaluation_encoding

    continued, whole, m = continued_and_whole("fope")
    torch.testing.assert_close(continued, whole, atol=1e-5, rtol=1e-5)

    class Resolved:  # what evaluation_encoding reads of a cell
        spec, request = get_spec("fope"), None

    assert evaluation_encoding(Resolved, m) is m.encoding


def test_grouped_query_heads_are_refused_in_one_line():
    from extrapolate.core.errors import UserError

    layer = FoPE(16, n_heads=4, n_layers=1, train_len=64).for_layer(0)
    with pytest.raises(UserError, match="a key head per query head"):
        layer.rotate(torch.randn(1, 4, 5, 16), torch.randn(1, 2, 5, 16), torch.arange(5))
