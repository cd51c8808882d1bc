"""The blocked bias kernel equals the plain full-matrix reference; SDPA equals it without a bias."""

import pytest
import torch

from extrapolate.encodings import build_encoding
from extrapolate.kernels.attention import causal_attention, kernel_for
from extrapolate.kernels.blocked import toeplitz_bias


def make(name, heads=4):
    enc = build_encoding(name, d_model=16 * heads, n_heads=heads, head_dim=16, max_len=64)
    if name == "t5":
        torch.nn.init.normal_(enc.table.weight)
    return enc


@pytest.mark.parametrize("name", ["alibi", "t5"])
@pytest.mark.parametrize("length", [1, 17, 128, 333])
@pytest.mark.parametrize("rows", [16, 64, 1000])
def test_blocked_equals_reference(name, length, rows):
    torch.manual_seed(length)
    enc = make(name)
    q, k, v = torch.randn(3, 2, 4, length, 16).unbind(0)
    reference = causal_attention(q, k, v, enc, "reference")
    blocked = causal_attention(q, k, v, enc, "blocked", block_elements=2 * 4 * length * rows)
    assert torch.allclose(blocked, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["alibi", "t5"])
@pytest.mark.parametrize("length", [1, 17, 333, 1500])
@pytest.mark.parametrize("rows", [16, 100, 1024])
def test_fused_bias_kernel_equals_reference(name, length, rows):
    from extrapolate.kernels.fused_bias import fused_bias_attention

    torch.manual_seed(length)
    enc = make(name)
    q, k, v = torch.randn(3, 2, 4, length, 16).unbind(0)
    with torch.no_grad():
        reference = causal_attention(q, k, v, enc, "reference")
        fused = fused_bias_attention(q, k, v, enc, rows=rows)
    # ALiBi's bias rides in q·k, so float32 rounding grows with the block's extent: 5e-5, not 1e-5
    assert torch.allclose(fused, reference, atol=5e-5, rtol=0)


def test_fused_bias_kernel_with_a_cache_and_gqa():
    from extrapolate.kernels.fused_bias import fused_bias_attention

    for name in ("alibi", "t5"):
        enc = make(name)
        q = torch.randn(1, 4, 30, 16)
        k, v = torch.randn(2, 1, 2, 200, 16).unbind(0)  # 170 cached positions before the 30 queries
        with torch.no_grad():
            assert torch.allclose(
                fused_bias_attention(q, k, v, enc, rows=8), causal_attention(q, k, v, enc, "reference"), atol=5e-5
            )


def test_the_bias_floor_keeps_a_far_key_that_outscores_its_distance():
    """The floor under the key bias (`fused_bias._floor`) moves only keys no score can lift to a weight: a
    key 1900 positions back whose q·k makes up for ALiBi's steepest slope (0.25·1900 = 475) keeps its weight,
    and keys it floors weigh nothing in the reference either. Measured against the reference at full weight."""
    from extrapolate.kernels.fused_bias import fused_bias_attention

    torch.manual_seed(0)
    enc = make("alibi")
    q, k, v = torch.randn(3, 1, 4, 2000, 16).unbind(0)
    direction = torch.randn(16)
    q[:, 0, -50:] = 3 * direction / direction.norm()  # the last rows of the steepest head look for one key
    k[:, 0, 60] = 650 * direction / direction.norm()  # score 3·650/4 = 487.5 against a bias of -472.5 … -484.75
    with torch.no_grad():
        reference = causal_attention(q, k, v, enc, "reference")
        fused = fused_bias_attention(q, k, v, enc, rows=256)
    assert torch.allclose(fused, reference, atol=5e-5, rtol=0)
    weight_of_far_key = torch.softmax(  # the far key still carries weight in the last row: the case is real
        q[0, 0, -1] @ k[0, 0].T / 4 + enc.bias(torch.tensor([1999]), torch.arange(2000))[0, 0], -1
    )[60]
    assert weight_of_far_key > 0.5


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 5e-5), (torch.bfloat16, 2e-2)])
def test_alibi_per_head_skips_the_keys_that_weigh_nothing_and_is_the_reference(monkeypatch, dtype, tolerance):
    """The per-head variant starts each head's keys before a block at its first key the floor lets weigh
    anything: the steep heads skip most keys (checked: the case is real), and the output is the reference's."""
    from extrapolate.kernels import fused_bias

    starts = []
    first_reaching = fused_bias._first_reaching
    monkeypatch.setattr(fused_bias, "_first_reaching", lambda *a: starts.append(first_reaching(*a)) or starts[-1])
    torch.manual_seed(0)
    enc = make("alibi")
    q = torch.randn(2, 4, 1800, 16).to(dtype)
    k, v = torch.randn(2, 2, 2, 3000, 16).to(dtype).unbind(0)  # grouped-query, 1200 cached keys
    with torch.no_grad():
        reference = causal_attention(q.float(), k.float(), v.float(), enc, "reference")
        fused = fused_bias.fused_bias_attention(q, k, v, enc, rows=256, skip=True)
    torch.testing.assert_close(fused.float(), reference, atol=tolerance, rtol=0)
    assert max(heads[0] for heads in starts) > 2000  # the steepest head skipped thousands of keys
    assert min(heads[-1] for heads in starts) == 0  # the flattest sees every key


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_cached_sdpa_continues_a_cache_exactly(dtype, tolerance):
    """Queries after cached keys (grouped-query): the two fused calls merged equal causal attention."""
    from extrapolate.kernels.attention import cached_sdpa

    enc = make("rope")
    for queries, kv_heads in [(150, 2), (1, 3), (7, 6)]:  # a prompt's suffix, a decoding step, answer tokens
        q = torch.randn(2, 6, queries, 16)
        k, v = torch.randn(2, 2, kv_heads, 420, 16).unbind(0)  # the earlier positions come from the cache
        with torch.no_grad():
            out = cached_sdpa(q.to(dtype), k.to(dtype), v.to(dtype))
            expected = causal_attention(q, k, v, enc, "reference")
        assert out.dtype == dtype and out.shape == q.shape
        assert torch.allclose(out.float(), expected, atol=tolerance, rtol=0)


def test_blocked_handles_grouped_query_attention():
    enc = make("alibi", heads=4)
    q = torch.randn(1, 4, 50, 16)
    k, v = torch.randn(2, 1, 2, 50, 16).unbind(0)
    assert torch.allclose(
        causal_attention(q, k, v, enc, "blocked", block_elements=1000),
        causal_attention(q, k, v, enc, "reference"),
        atol=1e-5,
    )


@pytest.mark.parametrize("name", ["rope", "nope", "sinusoidal"])
def test_sdpa_equals_reference_without_bias(name):
    enc = make(name)
    assert kernel_for(enc).name == "sdpa"
    q, k, v = torch.randn(3, 1, 4, 70, 16).unbind(0)
    assert torch.allclose(causal_attention(q, k, v, enc), causal_attention(q, k, v, enc, "reference"), atol=1e-5)


def test_toeplitz_block_matches_explicit_bias():
    enc = make("alibi")
    table = enc.bias_table(40)
    block = toeplitz_bias(table, 10, 25, torch.float32)  # queries 10..24, keys 0..24
    pos = torch.arange(40)
    explicit = enc.bias(pos[10:25], pos[:25])
    causal = pos[:25][None, :] > pos[10:25][:, None]
    assert torch.equal(torch.isinf(block[0]), causal)
    assert torch.allclose(block[:, ~causal], explicit[:, ~causal])


def test_bias_kinds_use_a_bias_kernel():
    assert kernel_for(make("alibi")).name == "fused-bias" and kernel_for(make("t5"), "sdpa").name == "fused-bias"
    assert kernel_for(make("alibi"), "blocked").name == "blocked"


def test_every_plan_has_one_kernel_and_its_own_name():
    """`causal_attention` finds every plan's kernel in the table, and each plan records a distinct name."""
    from extrapolate.kernels import attention

    assert set(attention.KERNEL_FUNCTIONS) == set(attention.PLANS)
    assert len({plan.name for plan in attention.PLANS}) == len(attention.PLANS)


def test_flex_kernel_is_what_flex_runs_on_the_cpu():
    """`--kernel flex` routes a bias encoding to flex_attention on the CPU too (evaluation only); every
    encoding's flex path against the reference: tests/test_flex.py."""
    from extrapolate.kernels import attention
    from extrapolate.kernels.attention import flex_attention_of

    enc = make("alibi")
    q = torch.randn(1, 4, 200, 16)
    k, v = torch.randn(2, 1, 2, 256, 16).unbind(0)  # grouped-query, 56 cached positions before the queries
    with torch.no_grad():
        flex_out = flex_attention_of(q, k, v, enc)  # compiles: a few seconds on a CPU
        assert torch.allclose(flex_out, causal_attention(q, k, v, enc, "reference"), atol=1e-5)
        assert torch.equal(causal_attention(q, k, v, enc, "flex"), flex_out)  # the kernel choice routes to it
    assert attention.FLEX_STATUS.failed is None


def test_flex_requested_while_training_on_cpu_falls_back_to_blocked():
    from extrapolate.kernels import attention

    enc = make("alibi")
    q = torch.randn(1, 4, 200, 16, requires_grad=True)
    k, v = torch.randn(2, 1, 4, 200, 16).unbind(0)
    out = causal_attention(q, k, v, enc, "flex")  # the CPU build has no flex backward
    assert torch.allclose(out, causal_attention(q, k, v, enc, "reference"), atol=1e-5)
    (grad,) = torch.autograd.grad(out.sum(), q)
    assert torch.isfinite(grad).all() and attention.FLEX_STATUS.failed is None


def test_recorded_kernel_names_what_each_length_runs(monkeypatch):
    from extrapolate.kernels import attention
    from extrapolate.kernels.attention import recorded_kernel

    cpu, cuda, f32, bf16 = torch.device("cpu"), torch.device("cuda"), torch.float32, torch.bfloat16
    alibi, rope = make("alibi"), make("rope")
    full = lambda n: [(n, n)]  # noqa: E731  a forward over n tokens without a cache
    assert recorded_kernel(alibi, "auto", cpu, f32, full(4096)) == "fused-bias"
    assert recorded_kernel(alibi, "auto", cpu, bf16, full(4096)) == "fused-bias"  # its bias a float32 mask
    assert recorded_kernel(alibi, "auto", cpu, torch.float16, full(4096)) == "blocked"
    assert recorded_kernel(rope, "flex", cpu, f32, full(4096)) == "sdpa"  # no bias: nothing to flex
    assert recorded_kernel(alibi, "flex", cpu, f32, full(64)) == "blocked"  # too few queries to compile for
    assert recorded_kernel(rope, "auto", cpu, f32, [(4090, 4090), (1, 4091)]) == "sdpa+sdpa-cache"  # a cache continued
    assert recorded_kernel(rope, "auto", cuda, f32, [(4090, 4090), (1, 4091)]) == "sdpa+sdpa-lower-right"
    assert recorded_kernel(alibi, "auto", cuda, f32, full(256)) == "flex"
    assert recorded_kernel(alibi, "auto", cuda, f32, full(4096)) == "flex"
    assert recorded_kernel(alibi, "auto", cuda, f32, [(4090, 4090), (1, 4091)]) == "flex+sdpa-rows"
    assert recorded_kernel(alibi, "blocked", cuda, f32, full(4096)) == "blocked"  # asked for by name
    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus(failed="no compiler"))
    assert recorded_kernel(alibi, "auto", cuda, f32, full(4096)) == "blocked"  # what a failed compile fell back to


def spy_kernels(monkeypatch) -> list[str]:
    """The kernels `causal_attention` runs from now on, in call order; flex is faked by the reference kernel."""
    from extrapolate.kernels import attention, fused_bias

    ran: list[str] = []

    def spy(name, attribute, fn=None, counts=lambda *args, **kwargs: True, module=attention):
        fn = fn or getattr(module, attribute)

        def wrapped(*args, **kwargs):
            if counts(*args, **kwargs):
                ran.append(name)
            return fn(*args, **kwargs)

        monkeypatch.setattr(module, attribute, wrapped)

    spy("sdpa", "sdpa", counts=lambda *args, **kwargs: kwargs.get("is_causal", False))  # not the blocked kernel's
    spy("sdpa-cache", "cached_sdpa")
    spy("fused-bias", "fused_bias_attention", module=fused_bias)
    spy("blocked", "blocked_attention")
    reference = attention.reference_attention  # flex is faked by the reference kernel, not counted as one
    spy("flex", "_try_flex", fn=lambda q, k, v, encoding, backward=False: reference(q, k, v, encoding))
    spy("reference", "reference_attention")
    return ran


@pytest.mark.parametrize(
    "name,kernel,dtype",
    [
        ("rope", "auto", "float32"),
        ("alibi", "auto", "float32"),
        ("t5", "auto", "bfloat16"),
        ("alibi", "flex", "float32"),
    ],
)
def test_passkey_rows_record_the_kernels_that_ran(monkeypatch, name, kernel, dtype):
    """The record of a passkey cell is what the prompt pass and the decoding from its cache ran."""
    import dataclasses

    from extrapolate.core.config import ModelConfig
    from extrapolate.data.tokenizers import ByteTokenizer
    from extrapolate.model import TransformerLM
    from extrapolate.tasks.files import load_task
    from extrapolate.tasks.passkey import attention_shapes, evaluate_passkey
    from extrapolate.tasks.prompt import PromptBuilder

    torch.manual_seed(0)
    builder = PromptBuilder(dataclasses.replace(load_task("passkey"), trials=2, depths=(0.5,)), ByteTokenizer())
    model = TransformerLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding=name))
    model.use_kernel(kernel)
    ran = spy_kernels(monkeypatch)
    evaluate_passkey(model, builder, 300, torch.device("cpu"), dtype)
    from extrapolate.core.device import activation_dtype
    from extrapolate.kernels.attention import recorded_kernel

    cpu = torch.device("cpu")
    recorded = recorded_kernel(
        model.encoding, kernel, cpu, activation_dtype(cpu, dtype), attention_shapes(builder, 300)
    )
    assert recorded == "+".join(dict.fromkeys(ran))


@pytest.mark.parametrize("name,kernel", [("rope", "sdpa"), ("alibi", "blocked"), ("t5", "blocked")])
def test_short_bf16_cpu_attention_computes_in_float32(name, kernel):
    """Under bf16 autocast, short rows of small heads run the float32 kernel (faster on the CPU): the result
    is the float32 attention of the bf16 inputs rounded once to bf16, bias included, and gradients flow."""
    from extrapolate.kernels.sdpa import CPU_FLOAT32_MAX_KEYS, compute_dtype

    torch.manual_seed(0)
    enc = make(name)
    q, k, v = (t.bfloat16().requires_grad_() for t in torch.randn(3, 2, 4, 100, 16).unbind(0))
    assert compute_dtype(q, 100) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = causal_attention(q, k, v, enc, kernel)
    expected = causal_attention(q.float(), k.float(), v.float(), enc, "reference").bfloat16()
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected) or (out.float() - expected.float()).abs().max() <= 2**-8
    out.float().sum().backward()
    assert q.grad.dtype == torch.bfloat16 and q.grad.abs().sum() > 0
    assert compute_dtype(q, CPU_FLOAT32_MAX_KEYS + 1) == torch.bfloat16  # longer rows: the bf16 kernel is faster
    assert compute_dtype(torch.zeros(1, 4, 10, 64, dtype=torch.bfloat16), 10) == torch.bfloat16
    assert compute_dtype(torch.zeros(1, 4, 10, 16), 10) == torch.float32
