"""The CUDA paths on a card, where one is present (skipped elsewhere; CI is CPU-only): every encoding's
planned kernel against the full-matrix reference, forward and gradients, at a full pass, a prompt continuing a
cache and a decoding step; out of memory in a cell is an `oom` row and one message. The same checks at scale,
with timings, are `scripts/gpu_check.py`."""

import pytest
import torch

from extrapolate.encodings import ENCODINGS, build_encoding
from extrapolate.kernels.attention import attention_plan, causal_attention

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

SHAPES = [(512, 512), (300, 1024), (1, 1025), (6, 1024)]


@pytest.mark.parametrize("name", [name for name, _ in ENCODINGS])
@pytest.mark.parametrize("queries,keys", SHAPES)
def test_every_planned_kernel_equals_the_reference_on_the_card(name, queries, keys):
    encoding = build_encoding(name, d_model=128, n_heads=4, head_dim=32, max_len=256, factor=4.0).cuda()
    for p in encoding.parameters():
        torch.nn.init.normal_(p, std=0.5)
    torch.manual_seed(0)
    q = torch.randn(1, 4, queries, 32, device="cuda", requires_grad=True)
    k, v = (torch.randn(1, 2, keys, 32, device="cuda", requires_grad=True) for _ in range(2))
    plan = attention_plan(encoding, "auto", "cuda", torch.float32, queries, keys, backward=True).name
    assert plan not in ("blocked", "reference")
    got, want = causal_attention(q, k, v, encoding, "auto"), causal_attention(q, k, v, encoding, "reference")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for a, b in zip(
        torch.autograd.grad(got.square().sum(), (q, k, v)), torch.autograd.grad(want.square().sum(), (q, k, v))
    ):
        torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)


def test_out_of_memory_on_the_card_is_a_row_and_one_message():
    from extrapolate.run.evaluate import measure

    said = []
    torch.cuda.set_per_process_memory_fraction(0.02)
    try:
        status, result = measure(torch.device("cuda"), lambda: torch.empty(1 << 40, device="cuda"), said.append)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert status == "oom" and result is None and said and said[0].startswith("asked for")
