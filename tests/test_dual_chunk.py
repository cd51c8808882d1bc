"""Dual chunk attention's kernels: the fused CPU kernel, the blocked kernel and the one-block reference agree,
whole and continuing a cache (mid-chunk, one query); within one chunk it is plain RoPE; no relative position
exceeds the chunk size; the plan names its kernel on each device (flex and its few-query SDPA call on CUDA:
tests/test_flex.py); bad options end in one line. (Equality with
the authors' code: tests/test_reference_ports.py.)"""

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.encodings import build_encoding
from extrapolate.kernels import dual_chunk
from extrapolate.kernels.attention import attention_plan, causal_attention
from extrapolate.model import TransformerLM


def encoding(head_dim: int = 16, **options):
    return build_encoding("dual-chunk", d_model=0, n_heads=4, head_dim=head_dim, max_len=64, options=options)


@pytest.mark.parametrize("options", [{}, {"chunk_size": 20, "window": 13}])
@pytest.mark.parametrize("queries", [300, 37, 1])
def test_fused_blocked_and_reference_kernels_agree_whole_and_from_a_cache(options, queries):
    torch.manual_seed(0)
    form = encoding(**options).chunk_form()
    q, k, v = torch.randn(2, 4, 300, 16), torch.randn(2, 2, 300, 16), torch.randn(2, 2, 300, 16)  # 2 key heads
    reference = dual_chunk.blocked_attention(q, k, v, form, None)[:, :, -queries:]
    rows = q[:, :, -queries:]  # the last queries, every earlier key from a cache
    assert torch.allclose(dual_chunk.fused_attention(rows, k, v, form), reference, atol=1e-5)
    assert torch.allclose(dual_chunk.blocked_attention(rows, k, v, form, 4096), reference, atol=1e-5)


def test_within_one_chunk_it_is_plain_rope():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, max_len=64)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    tokens = torch.randint(0, 64, (2, 40))  # the default chunk: ⌊3·64/4⌋ - ⌊64/8⌋ = 40 tokens
    with torch.no_grad():
        rope = model(tokens)
        model.set_encoding(encoding(head_dim=8))
        assert torch.allclose(model(tokens), rope, atol=1e-5)
        # the next chunk's query at 49: the chunk before is seen from min(9 + 40, 48), one closer than RoPE
        longer = torch.randint(0, 64, (2, 50))
        model.set_encoding(build_encoding("rope", d_model=0, n_heads=4, head_dim=8, max_len=64))
        rope_longer = model(longer)
        model.set_encoding(encoding(head_dim=8))
        differs = (model(longer) - rope_longer).abs().amax(dim=(0, 2))  # (positions,)
        assert differs[:49].max() < 1e-4 and differs[49] > 1e-2


def test_no_relative_position_exceeds_the_chunk_size_and_near_keys_keep_their_distance():
    dca = encoding()
    assert dca.describe() == {"base": 10000.0, "chunk_size": 48, "window": 8} and dca.chunk == 40
    last = 1000
    seen = [dca.relative_position(last, key) for key in range(last + 1)]
    assert max(seen) == 48 and min(seen) == 0
    assert all(seen[last - d] == d for d in range(last % 40 + 1))  # the query's own chunk: exact distances


def test_past_L_q_and_k_carry_the_reference_factor_and_a_given_one_replaces_it():
    q, k = torch.ones(1, 1, 3, 16), torch.ones(1, 1, 3, 16)
    pos = torch.tensor([0, 39, 41])  # the default chunk is 40 tokens: 41 is the next chunk's second
    dca = encoding()
    m = 0.05 * torch.log(torch.tensor(4.0)) + 1  # n = 256 = 4L
    assert torch.allclose(dca.rotate(q, k, pos, seq_len=256)[0], q * m)  # q: scaled only, the kernels rotate it
    in_chunk = dca.rotate_at(k, torch.tensor([0.0, 39.0, 1.0]))  # k: at its place in its chunk, once
    assert torch.equal(dca.rotate(q, k, pos, seq_len=64)[1], in_chunk)  # within L: no factor
    assert torch.allclose(dca.rotate(q, k, pos, seq_len=256)[1], in_chunk * m)
    assert torch.equal(encoding(attention_factor=1.0).rotate(q, k, pos, seq_len=256)[0], q)


def test_the_plan_names_its_kernel_on_each_device():
    dca = encoding()
    assert attention_plan(dca, "auto", "cpu", torch.float32, 512, 512).name == "dual-chunk"
    assert attention_plan(dca, "auto", "cpu", torch.float32, 512, 512, backward=True).name == "blocked"
    assert attention_plan(dca, "auto", "cuda", torch.bfloat16, 4096, 4096).name == "flex"
    assert attention_plan(dca, "auto", "cuda", torch.bfloat16, 1, 4097).name == "sdpa-rows"
    assert attention_plan(dca, "reference", "cpu", torch.float32, 8, 8).name == "reference"
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 100, 16, requires_grad=True) for _ in range(3))
    causal_attention(q, k, v, dca).sum().backward()  # gradients through the blocked kernel
    assert q.grad is not None and torch.isfinite(q.grad).all()


@pytest.mark.parametrize(
    "options,message",
    [
        ({"chunk_size": 8, "window": 8}, r"window \(8\) must be below its chunk_size \(8\)"),
        ({"chunk_size": 1}, "chunk_size must be a whole number ≥ 2"),
        ({"window": 0}, "window must be a whole number ≥ 1"),
    ],
)
def test_bad_options_end_in_one_line(options, message):
    with pytest.raises(UserError, match=message):
        encoding(**options)
