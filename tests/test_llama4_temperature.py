"""Llama 4's attention temperature (`llama4-temperature`): RoPE with each query at position p scaled by
attn_scale·log(⌊(p + 1)/floor_scale⌋ + 1) + 1, pinned against transformers' Llama4TextAttention, which applies
it (`attn_temperature_tuning`) to its NoPE layers' queries: the same layer computed from our factor matches
the reference's output, a prefix in the cache included, and an off-by-one in the floor does not."""

import math

import pytest
import torch

from extrapolate.core.errors import UserError
from extrapolate.data.rope_config import hf_rope_parameters
from extrapolate.encodings import build_encoding
from extrapolate.encodings.partial import partially_rotated
from extrapolate.encodings.rotary import temperature_scale

transformers = pytest.importorskip("transformers")
llama4 = pytest.importorskip("transformers.models.llama4.modeling_llama4")

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 8


def reference_layer(floor_scale: int, attn_scale: float):
    """One NoPE attention layer of a Llama 4 text model, its temperature on, eager attention."""
    config = transformers.Llama4TextConfig(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=1,
        no_rope_layers=[0],  # layer 0 without RoPE: where Llama 4 applies the temperature
        attn_temperature_tuning=True,
        floor_scale=floor_scale,
        attn_scale=attn_scale,
        use_qk_norm=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return llama4.Llama4TextAttention(config, layer_idx=0).eval()


def causal_mask(queries: int, past: int) -> torch.Tensor:
    """(1, 1, T, past + T) additive mask: query i sees keys 0 … past + i."""
    keys = torch.arange(past + queries)[None, :]
    seen = keys <= (past + torch.arange(queries))[:, None]
    return torch.zeros(queries, past + queries).masked_fill(~seen, float("-inf"))[None, None]


def ours(layer, hidden: torch.Tensor, scale) -> torch.Tensor:
    """The same layer with queries × `scale(pos)` ((T,) float32), attention by SDPA: hidden (1, T, D)."""
    T = hidden.shape[1]
    q = layer.q_proj(hidden).view(1, T, HEADS, HEAD_DIM).transpose(1, 2)  # (1, H, T, Dh)
    k = layer.k_proj(hidden).view(1, T, KV_HEADS, HEAD_DIM).transpose(1, 2)  # (1, Hkv, T, Dh)
    v = layer.v_proj(hidden).view(1, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
    q = q * scale(torch.arange(T))[:, None]  # (T, 1)
    k, v = (t.repeat_interleave(HEADS // KV_HEADS, dim=1) for t in (k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (1, H, T, Dh)
    return layer.o_proj(out.transpose(1, 2).reshape(1, T, HEADS * HEAD_DIM))


@pytest.mark.parametrize("floor_scale, attn_scale", [(4, 0.1), (7, 0.5), (8192, 0.1)])
def test_the_layer_matches_transformers_llama4(floor_scale, attn_scale):
    layer, T = reference_layer(floor_scale, attn_scale), 64  # floor_scale 4: 16 steps of the temperature
    hidden = torch.randn(1, T, HIDDEN, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, _ = layer(hidden, None, causal_mask(T, 0))
        got = ours(layer, hidden, lambda pos: temperature_scale(pos, floor_scale, attn_scale))
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_positions_continue_from_the_cache_as_in_transformers():
    """Decoding after a prefix: the reference counts positions from its cache's length, as ours from pos."""
    layer, prefix, T = reference_layer(4, 0.3), 37, 5
    hidden = torch.randn(1, prefix + T, HIDDEN, generator=torch.Generator().manual_seed(2))
    cache = transformers.DynamicCache(config=layer.config)
    with torch.no_grad():
        layer(hidden[:, :prefix], None, causal_mask(prefix, 0), cache=cache)
        expected, _ = layer(hidden[:, prefix:], None, causal_mask(T, prefix), cache=cache)
        whole = ours(layer, hidden, lambda pos: temperature_scale(pos, 4, 0.3))
    assert torch.allclose(whole[:, prefix:], expected, atol=1e-5, rtol=1e-5)


def test_an_off_by_one_in_the_floor_fails_the_reference():
    """The mutation the port test must catch: ⌊p/floor_scale⌋ for ⌊(p + 1)/floor_scale⌋."""
    layer, T = reference_layer(4, 0.5), 64
    hidden = torch.randn(1, T, HIDDEN, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, _ = layer(hidden, None, causal_mask(T, 0))
        mutated = ours(layer, hidden, lambda pos: torch.log1p(torch.floor(pos.float() / 4)) * 0.5 + 1)
    assert not torch.allclose(mutated, expected, atol=1e-4, rtol=1e-4)


def test_factor_values_by_hand():
    pos = torch.tensor([0, 6, 7, 8, 15, 16, 8190, 8191])
    assert temperature_scale(pos[:6], 8, 0.1).tolist() == pytest.approx(
        [1, 1, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3), 1 + 0.1 * math.log(3)]
    )
    assert temperature_scale(pos[6:], 8192, 0.1).tolist() == pytest.approx([1, 1 + 0.1 * math.log(2)])


def make(**options):
    return build_encoding("llama4-temperature", d_model=64, n_heads=4, head_dim=16, max_len=32, options=options or None)


def test_queries_scaled_keys_as_ropes():
    torch.manual_seed(0)
    q, k, pos = torch.randn(2, 4, 100, 16), torch.randn(2, 2, 100, 16), torch.arange(100)
    rope = build_encoding("rope", d_model=64, n_heads=4, head_dim=16, max_len=32)
    (q1, k1), (q0, k0) = make(floor_scale=10, attn_scale=0.2).rotate(q, k, pos), rope.rotate(q, k, pos)
    assert torch.equal(k1, k0)
    assert torch.allclose(q1, q0 * temperature_scale(pos, 10, 0.2)[:, None], atol=1e-6)
    assert torch.equal(q1[:, :, :9], q0[:, :, :9])  # below floor_scale - 1: RoPE's queries exactly


def test_defaults_are_metas_and_a_partial_rotation_scales_the_whole_query():
    assert make().describe()["floor_scale"] == 8192 and make().describe()["attn_scale"] == 0.1
    torch.manual_seed(0)
    q, k, pos = torch.randn(1, 4, 40, 16), torch.randn(1, 4, 40, 16), torch.arange(40)
    inner = build_encoding(
        "llama4-temperature", d_model=64, n_heads=4, head_dim=8, max_len=32, options={"floor_scale": 3}
    )
    q1, _ = partially_rotated(inner, 8).rotate(q, k, pos)
    assert torch.allclose(q1[..., 8:], q[..., 8:] * temperature_scale(pos, 3, 0.1)[:, None], atol=1e-6)


def test_bad_options_and_transformers_export_are_refused():
    with pytest.raises(UserError, match="no transformers equivalent"):
        hf_rope_parameters("llama4-temperature", 10000.0, 1.0, 256, {"floor_scale": 8192, "attn_scale": 0.1})
