"""Scalable-Softmax trained in (`ssmax`): the attention weights are the paper's n^(s·z) / Σ n^(s·z), each
layer and head with its own learned s; s starts at 1/ln L (softmax's own scale at n = L); it trains, is saved
with the weights, and evaluation keeps the trained s; a cache continues a sequence exactly."""

import math

import torch

from extrapolate.core.config import ModelConfig
from extrapolate.encodings import build_encoding
from extrapolate.encodings.rotary import Rotary
from extrapolate.model import TransformerLM


def model(layers: int = 3) -> TransformerLM:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=layers, n_heads=4, max_len=64, encoding="ssmax")
    return TransformerLM(config)


def test_the_weights_are_n_to_the_s_z_over_their_sum():
    """z = q·k/√d of the RoPE-rotated q and k; a query at position i sees n = i + 1 keys."""
    torch.manual_seed(0)
    encoding = build_encoding("ssmax", d_model=64, n_heads=4, head_dim=16, max_len=64, n_layers=2)
    layer = encoding.for_layer(1)
    with torch.no_grad():
        layer.scale.copy_(torch.tensor([0.1, 0.3, 0.5, 1.0]))
    q, k = torch.randn(1, 4, 50, 16), torch.randn(1, 4, 50, 16)
    pos = torch.arange(50)
    q_ours, k_ours = layer.rotate(q, k, pos)
    causal = torch.ones(50, 50, dtype=torch.bool).triu(1)
    ours = (q_ours @ k_ours.transpose(-1, -2) / 4).masked_fill(causal, float("-inf")).softmax(-1)
    q_rope, k_rope = Rotary(16).rotate(q, k, pos)
    z = (q_rope @ k_rope.transpose(-1, -2) / 4).double()  # (1, H, 50, 50)
    n = (pos + 1).double()[None, None, :, None]  # (1, 1, 50, 1)
    s = torch.tensor([0.1, 0.3, 0.5, 1.0], dtype=torch.float64)[None, :, None, None]
    powers = (n ** (s * z)).masked_fill(causal, 0.0)
    assert torch.allclose(ours.double(), powers / powers.sum(-1, keepdim=True), atol=1e-5)


def test_each_layer_has_its_own_s_from_one_over_ln_L_and_training_moves_them():
    m = model()
    scales = [m.encoding.for_layer(i).scale for i in range(3)]
    assert len({id(s) for s in scales}) == 3
    assert all(torch.allclose(s, torch.full((4,), 1 / math.log(64))) for s in scales)
    assert sorted(k for k in m.state_dict() if k.startswith("encoding")) == [
        f"encoding.layers.{i}.scale" for i in range(3)
    ]
    tokens = torch.randint(0, 64, (2, 33))
    m.token_nll(tokens[:, :-1], tokens[:, 1:]).mean().backward()
    assert all(s.grad is not None and s.grad.abs().sum() > 0 for s in scales)


def test_at_n_equal_L_the_initial_query_is_unscaled():
    encoding = build_encoding("ssmax", d_model=64, n_heads=4, head_dim=16, max_len=64, n_layers=1)
    q, k = torch.randn(1, 4, 64, 16), torch.randn(1, 4, 64, 16)
    pos = torch.arange(64)
    q_ssmax, _ = encoding.for_layer(0).rotate(q, k, pos)
    q_rope, _ = Rotary(16).rotate(q, k, pos)
    assert torch.allclose(q_ssmax[:, :, 63], q_rope[:, :, 63], atol=1e-6)  # n = 64 = L
    assert torch.equal(q_ssmax[:, :, 0], torch.zeros_like(q_ssmax[:, :, 0]))  # n = 1: log 1 = 0


def test_a_cache_continues_the_sequence_and_evaluation_keeps_the_trained_s(tmp_path):
    from extrapolate.encodings import get_spec
    from extrapolate.run.evaluate import evaluation_encoding

    m = model().eval()
    with torch.no_grad():
        m.encoding.for_layer(2).scale.mul_(3.0)
    tokens = torch.randint(0, 64, (2, 90))  # past L = 64
    with torch.no_grad():
        whole = m.hidden_states(tokens)
        cache = m.new_cache()
        pieces = [m.hidden_states(tokens[:, :50], cache=cache), m.hidden_states(tokens[:, 50:], cache=cache)]
    assert torch.allclose(torch.cat(pieces, dim=1), whole, atol=1e-5)

    class Resolved:  # what evaluation_encoding reads of a cell
        spec, request = get_spec("ssmax"), None

    assert evaluation_encoding(Resolved, m) is m.encoding  # never rebuilt from the spec: the trained s stays
