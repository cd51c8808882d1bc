"""The forget gate's kernels (FoX): fused (CPU float32 and bf16), blocked, flex and the few-query SDPA call all
equal the one-block reference, whole and continuing a cache, with grouped-query heads; gradients reach the gate;
the plan names its kernel on each device. (Equality with the authors' code: tests/test_reference_ports.py.)"""

import warnings

import pytest
import torch

from extrapolate.encodings import build_encoding
from extrapolate.encodings.base import Decayed
from extrapolate.kernels import forget
from extrapolate.kernels.attention import attention_plan, causal_attention, flex_attention_of, rows_attention


def call(queries: int, keys: int, seed: int = 0):
    """q (2, 4, Tq, 16), k and v (2, 2, Tk, 16) and a decay (2, 4, Tk) from gates between about 0.6 and 1."""
    torch.manual_seed(seed)
    q = torch.randn(2, 4, queries, 16)
    k, v = torch.randn(2, 2, 2, keys, 16).unbind(0)
    log_gate = torch.nn.functional.logsigmoid(torch.randn(2, 4, keys) + 3)
    encoding = build_encoding("fox", d_model=64, n_heads=4, head_dim=16, max_len=64, n_layers=1)
    return q, k, v, Decayed(encoding.for_layer(0), log_gate.cumsum(-1))


@pytest.mark.parametrize("queries,keys", [(300, 300), (37, 1500), (1, 700), (1100, 1100)])
def test_every_kernel_equals_the_reference(queries, keys):
    q, k, v, encoding = call(queries, keys)
    expected = forget.blocked_attention(q, k, v, encoding.decay, None)
    torch.testing.assert_close(forget.fused_attention(q, k, v, encoding.decay, rows=256), expected, atol=3e-5, rtol=0)
    torch.testing.assert_close(forget.blocked_attention(q, k, v, encoding.decay, 1 << 14), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(rows_attention(q, k, v, encoding), expected, atol=1e-5, rtol=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        torch.testing.assert_close(flex_attention_of(q, k, v, encoding, compiled=False), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(causal_attention(q, k, v, encoding, "reference"), expected)


@pytest.mark.parametrize("queries,keys", [(300, 300), (37, 1500), (1, 700)])
def test_the_fused_kernel_keeps_the_decay_exact_in_bf16(queries, keys):
    """bf16 inputs: the decay rides in a float32 mask, so only the op's bf16 rounding differs from the float32
    reference of the same inputs (a decay of hundreds rounded to bf16 would move the logits by whole units)."""
    q, k, v, encoding = call(queries, keys)
    q, k, v = (t.bfloat16() for t in (q, k, v))
    expected = forget.blocked_attention(q.float(), k.float(), v.float(), encoding.decay, None)
    got = forget.fused_attention(q, k, v, encoding.decay, rows=256)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=0)


def test_the_decay_is_the_gates_product_between_key_and_query():
    """One head, v one-hot per key: the weights are exp(q·k/√d) · Π_{l=j+1..i} f_l, normalised."""
    q, k, v, encoding = call(6, 6)
    v = torch.eye(6).expand(2, 2, 6, 6)
    gates = torch.diff(encoding.decay, dim=-1, prepend=torch.zeros(2, 4, 1)).exp()  # f_l
    out = forget.blocked_attention(q[..., :6], k[..., :6], v, encoding.decay, None)  # (2, 4, 6, 6) the weights
    scores = (q[..., :6] @ k[..., :6].repeat_interleave(2, 1).transpose(-1, -2) / 6**0.5).exp()
    for i in range(6):
        for j in range(i + 1):
            scores[..., i, j] *= gates[..., j + 1 : i + 1].prod(-1)
    expected = scores.tril() / scores.tril().sum(-1, keepdim=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_gradients_reach_the_gate_through_the_blocked_kernel():
    q, k, v, _ = call(40, 40)
    log_gate = torch.nn.functional.logsigmoid(torch.randn(2, 4, 40) + 3).requires_grad_()
    encoding = Decayed(
        build_encoding("fox", d_model=64, n_heads=4, head_dim=16, max_len=64).for_layer(0), log_gate.cumsum(-1)
    )
    causal_attention(q, k, v, encoding).square().sum().backward()  # CPU training: the blocked kernel
    assert log_gate.grad is not None and log_gate.grad.abs().sum() > 0


def test_the_plan_names_its_kernel_on_each_device():
    fox = build_encoding("fox", d_model=64, n_heads=4, head_dim=16, max_len=64)
    assert attention_plan(fox, "auto", "cpu", torch.float32, 512, 512).name == "fused-forget"
    assert attention_plan(fox, "auto", "cpu", torch.bfloat16, 512, 512).name == "fused-forget"  # a float32 mask
    assert attention_plan(fox, "auto", "cpu", torch.float16, 512, 512).name == "blocked"
    assert attention_plan(fox, "auto", "cpu", torch.float32, 512, 512, backward=True).name == "blocked"
    assert attention_plan(fox, "auto", "cuda", torch.bfloat16, 4096, 4096, backward=True).name == "flex"
    assert attention_plan(fox, "auto", "cuda", torch.bfloat16, 1, 4097).name == "sdpa-rows"


def test_the_flex_backward_check_uses_a_decay_of_its_own_length(monkeypatch):
    """Before training on flex, one probe forward and backward runs at 2 × 128 positions: a call's own decay
    (here 8 positions) would not cover them, so the probe brings its own, which its gradient reaches."""
    from extrapolate.kernels import attention

    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus())
    seen = []

    def reference(q, k, v, encoding, compiled=True):  # the CPU build has no flex backward: the reference stands in
        seen.append(encoding.decay.shape)
        return causal_attention(q, k, v, encoding, "reference")

    monkeypatch.setattr(attention, "flex_attention_of", reference)
    _, _, _, encoding = call(8, 8)
    attention._check_backward(torch.zeros(1, 4, 8, 16), encoding)
    assert seen == [torch.Size([1, 4, 256])] and ("fox", "cpu") in attention.FLEX_STATUS.backward_checked
