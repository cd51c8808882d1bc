"""DAPE against a port of its authors' code (chuanyang-Zheng/DAPE at bde344a, `megatron/model/positional_embeddings.py`,
`ParallelKerpleLog_C`, and the attention of `megatron/model/transformer.py` around it): the same output from the
blocked kernel and the whole matrix, a model's logits whole and continuing a cache, the gradients; the MLP's input
order and each residual term pinned by a mutation that fails."""

import pytest
import torch
import torch.nn.functional as F

from extrapolate.encodings.dape import DAPE
from extrapolate.kernels.own import own_attention
from tests.helpers import continued_and_whole


def attend(layer, q, k, v, block_elements):
    return own_attention(q, k, v, layer, block_elements)


def port_dape_attention(q, k, v, p, a, mlp, residual=("x", "bias"), order="scores first"):
    """The reference's attention with DAPE-KERPLE: scores q·kᵀ/√d over every pair (unmasked), the bias
    -p·log(1 + a·tril(i - j)), the MLP over the concatenated channels, both residuals, then the causal mask
    (the dtype's lowest value) and the softmax. q, k, v (B, H, n, Dh) with the queries at positions 0 … n-1."""
    B, H, n, d = q.shape
    x = q @ k.transpose(-1, -2) / d**0.5  # (B, H, n, n)
    context = torch.arange(n)[:, None]
    memory = torch.arange(n)[None, :]
    diff = torch.tril(context - memory).float()  # (n, n)
    bias = -p[:, None, None] * torch.log(1 + a[:, None, None] * diff)  # (H, n, n)
    channels = (x, torch.tile(bias, (B, 1, 1, 1)))
    if order != "scores first":
        channels = channels[::-1]
    x_a_bias = torch.permute(torch.cat(channels, dim=1), (0, 2, 3, 1))
    x_a_bias = torch.permute(mlp(x_a_bias), (0, 3, 1, 2))
    scores = x_a_bias + (x if "x" in residual else 0) + (bias if "bias" in residual else 0)
    scores = scores.masked_fill(memory > context, torch.finfo(scores.dtype).min)
    return F.softmax(scores, dim=-1) @ v


def layer_and_inputs(n=70, heads=3, dim=8, seed=0):
    torch.manual_seed(seed)
    layer = DAPE(heads, n_layers=2).for_layer(1)
    q, k, v = (torch.randn(2, heads, n, dim, dtype=torch.float64) for _ in range(3))
    layer = layer.double()
    p, a = layer.kerple.coefficients()
    return layer, q, k, v, p.double(), a.double()


def test_the_mlp_is_the_authors_mlp2():
    """2H → 32 → H with biases and LeakyReLU of slope 0.01 between (their `mlp2`, `mlp_width` 32 in every
    config): the layer's MLP against that formula on its own weights, inputs on both sides of zero."""
    layer = DAPE(3, n_layers=1).for_layer(0)
    first, second = (m for m in layer.mlp.modules() if isinstance(m, torch.nn.Linear))
    assert first.weight.shape == (32, 6) and second.weight.shape == (3, 32)
    x = 4 * torch.randn(50, 6)
    hidden = F.leaky_relu(x @ first.weight.T + first.bias, negative_slope=0.01)
    torch.testing.assert_close(layer.mlp(x), hidden @ second.weight.T + second.bias)


@pytest.mark.parametrize("block_elements", [None, 4096, 20000])
def test_dape_attends_as_the_reference_does(block_elements):
    layer, q, k, v, p, a = layer_and_inputs()
    ours = attend(layer, q, k, v, block_elements)
    torch.testing.assert_close(ours, port_dape_attention(q, k, v, p, a, layer.mlp), atol=1e-10, rtol=1e-8)


def test_a_continued_cache_attends_as_the_whole_sequence():
    """The last 9 queries against all 70 keys: the rows of the whole sequence's output."""
    layer, q, k, v, p, a = layer_and_inputs()
    whole = port_dape_attention(q, k, v, p, a, layer.mlp)
    torch.testing.assert_close(attend(layer, q[:, :, -9:], k, v, 3000), whole[:, :, -9:], atol=1e-10, rtol=1e-8)


def test_the_gradients_are_the_references():
    layer, q, k, v, p, a = layer_and_inputs(n=40)
    q.requires_grad_(True)
    ours = torch.autograd.grad(attend(layer, q, k, v, 2000).square().sum(), q)[0]
    theirs = torch.autograd.grad(port_dape_attention(q, k, v, p, a, layer.mlp).square().sum(), q)[0]
    torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("mutation", [{"residual": ("bias",)}, {"residual": ("x",)}, {"order": "bias first"}], ids=str)
def test_a_port_without_a_residual_or_with_the_channels_swapped_differs(mutation):
    layer, q, k, v, p, a = layer_and_inputs()
    ours = attend(layer, q, k, v, 4096)
    assert (ours - port_dape_attention(q, k, v, p, a, layer.mlp, **mutation)).abs().max() > 1e-3


def test_a_model_continues_a_cache_exactly():
    continued, whole, _ = continued_and_whole("dape")
    torch.testing.assert_close(continued, whole, atol=1e-5, rtol=1e-5)


def test_the_largest_block_is_bounded_by_the_budget():
    """No tensor of the walk holds more than a block: the scores of n = 4096 in blocks far below n²."""
    from extrapolate.kernels import dape as kernel

    layer, q, k, v, _, _ = layer_and_inputs(n=1024, heads=2)
    largest = []
    real_cat = torch.cat

    def spy(tensors, *args, **kwargs):
        out = real_cat(tensors, *args, **kwargs)
        largest.append(out.numel())
        return out

    kernel.torch.cat = spy
    try:
        attend(layer, q, k, v, 2**16)
    finally:
        kernel.torch.cat = real_cat
    blocks = largest[:-1]  # the last is the output itself
    assert max(blocks) <= 2**16 * 2 < 1024 * 1024
