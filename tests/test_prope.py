"""p-RoPE: frequencies equal to transformers' `proportional` type, p = 1 is RoPE and p = 0 is NoPE, and
scores still depend only on m - n."""

import pytest
import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings import Rotary
from extrapolate.encodings.prope import PartialRotary, proportional_inv_freq, rotated_pairs


def test_frequency_values():
    inv_freq = proportional_inv_freq(64, 10000.0, 0.25)
    # floor(0.25·64/2) = 8 pairs rotate; θ_7 = 10000^(-14/64) = 0.13335214 and θ_1 = 10000^(-2/64) = 0.74989421
    # (by hand), the other 24 pairs have frequency 0
    assert rotated_pairs(64, 0.25) == 8
    assert inv_freq[1].item() == pytest.approx(0.7498942093324559, rel=1e-6)
    assert inv_freq[7].item() == pytest.approx(0.1333521432163324, rel=1e-6)
    assert (inv_freq[8:] == 0).all()


@pytest.mark.parametrize("head_dim,fraction", [(64, 0.25), (64, 0.75), (32, 0.5), (12, 0.3), (64, 1.0)])
def test_equals_transformers_proportional(head_dim, fraction):
    utils = pytest.importorskip("transformers.modeling_rope_utils")
    if "proportional" not in utils.ROPE_INIT_FUNCTIONS:
        pytest.skip("this transformers has no proportional rope type")
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        head_dim=head_dim,
        rope_parameters={"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": fraction},
    )
    theirs, factor = utils.ROPE_INIT_FUNCTIONS["proportional"](config, "cpu")
    assert factor == 1.0
    assert torch.equal(proportional_inv_freq(head_dim, 10000.0, fraction), theirs)


def rotate(encoding, x, pos):
    return encoding.rotate(x, x.clone(), pos)[0]


def test_fraction_one_is_rope_and_zero_is_nope():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 50, 16)
    pos = torch.arange(50)
    assert torch.equal(rotate(PartialRotary(16, 1.0), x, pos), rotate(Rotary(16), x, pos))
    assert torch.equal(rotate(PartialRotary(16, 0.0), x, pos), x)


def test_unrotated_pairs_pass_through_and_scores_depend_on_distance():
    torch.manual_seed(1)
    encoding = PartialRotary(16, 0.5)  # pairs 0-3 rotate, 4-7 (dims 4-7 and 12-15) do not
    x = torch.randn(1, 1, 40, 16)
    out = rotate(encoding, x, torch.arange(40))
    passed = torch.cat((torch.arange(4, 8), torch.arange(12, 16)))
    assert torch.equal(out[..., passed], x[..., passed])
    q, k = torch.randn(2, 16).unbind(0)
    rq, rk = encoding.rotate(q.expand(1, 1, 40, 16).clone(), k.expand(1, 1, 40, 16).clone(), torch.arange(40))
    scores = rq[0, 0] @ rk[0, 0].T  # (T, T)
    assert torch.allclose(scores.diagonal(-3)[3:], scores.diagonal(-3)[:-3], atol=1e-5)


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan")])
def test_bad_fraction(fraction):
    with pytest.raises(UserError, match="fraction"):
        PartialRotary(16, fraction)
