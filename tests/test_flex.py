"""The CUDA kernels, checked where a CPU can check them: flex_attention's score modifications and masks of
every bias and two-part encoding, the few-query SDPA path and the lower-right cache continuation against the
full-matrix reference; the block mask built from the mask's structure against flex's own `create_block_mask`,
and its memory linear in n; `attention_plan`'s CUDA choice for every encoding and shape.

flex runs eagerly here (the same score and mask functions, unfused) except in the compiled checks: compiling
costs 5–20 s a shape on a CPU, so the fast suite compiles two encodings and the slow step every one."""

import math
import subprocess
import sys
import warnings

import pytest
import torch

from extrapolate.encodings import ENCODINGS, build_encoding
from extrapolate.kernels import attention, flex
from extrapolate.kernels.attention import (
    attention_plan,
    causal_attention,
    flex_attention_of,
    lower_right_sdpa,
    rows_attention,
)

OPTIONS = {
    "self-extend": {"window": 40, "group": 3},
    "rerope": {"window": 33},
    "streaming-llm": {"window": 33, "sink_tokens": 4},
    "lm-infinite": {"window": 40, "sink_tokens": 10, "distance_cap": 30},
    "string": {"shift": 40, "local": 8},
    "dual-chunk": {"chunk_size": 40, "window": 7},
}
FLEXED = [
    *("alibi", "t5", "kerple-log", "kerple-power", "fire", "self-extend", "rerope"),
    *("streaming-llm", "lm-infinite", "string", "dual-chunk"),
]


def make(name, heads=4):
    encoding = build_encoding(
        name,
        d_model=16 * heads,
        n_heads=heads,
        head_dim=16,
        max_len=64,
        **({"options": OPTIONS[name]} if name in OPTIONS else {}),
    )
    if name == "t5":
        torch.nn.init.normal_(encoding.table.weight)  # a zero-initialised table would hide a wrong lookup
    if name == "fire":
        torch.nn.init.normal_(encoding.out.weight)
    return encoding


def inputs(queries, keys, seed=0):
    """q (1, 4, Tq, 16); k, v (1, 2, Tk, 16): grouped-query, Tk - Tq positions cached before the queries."""
    torch.manual_seed(seed)
    q = torch.randn(1, 4, queries, 16)
    k, v = torch.randn(2, 1, 2, keys, 16).unbind(0)
    return q, k, v


@pytest.fixture(autouse=True)
def quiet_eager_flex():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        yield


@pytest.mark.parametrize("name", FLEXED)
@pytest.mark.parametrize("queries,keys", [(300, 300), (200, 333), (129, 129)])
def test_flex_equals_the_reference(name, queries, keys):
    encoding = make(name)
    q, k, v = inputs(queries, keys)
    with torch.no_grad():
        expected = causal_attention(q, k, v, encoding, "reference")
        got = flex_attention_of(q, k, v, encoding, compiled=False)
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)


@pytest.mark.parametrize("name", FLEXED)
@pytest.mark.parametrize("queries", [1, 5, 127])
def test_few_queries_in_one_sdpa_call_equal_the_reference(name, queries):
    encoding = make(name)
    q, k, v = inputs(queries, 333)
    with torch.no_grad():
        torch.testing.assert_close(
            rows_attention(q, k, v, encoding), causal_attention(q, k, v, encoding, "reference"), atol=2e-6, rtol=0
        )


@pytest.mark.parametrize("queries", [1, 7, 100])
def test_lower_right_continuation_equals_the_reference(queries):
    rope = build_encoding("rope", d_model=64, n_heads=4, head_dim=16, max_len=64)
    q, k, v = inputs(queries, 100 if queries == 100 else 257)
    torch.testing.assert_close(
        lower_right_sdpa(q, k, v), causal_attention(q, k, v, rope, "reference"), atol=2e-6, rtol=0
    )


@pytest.mark.parametrize("name", ["alibi", "fire", "rerope"])
def test_few_query_gradients_equal_the_reference(name):
    """Decoding-sized passes train nowhere, but the path is differentiable like any SDPA call."""
    encoding = make(name)
    q, k, v = (t.requires_grad_() for t in inputs(5, 140))
    grads = torch.autograd.grad(rows_attention(q, k, v, encoding).square().sum(), (q, k, v))
    expected = torch.autograd.grad(causal_attention(q, k, v, encoding, "reference").square().sum(), (q, k, v))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


SHAPES = [(256, 256, 0), (200, 333, 0), (1000, 1000, 0), (130, 700, 0), (256, 256, 100), (300, 900, 257), (128, 640, 1)]


@pytest.mark.parametrize("queries,keys,window", SHAPES)
def test_block_structure_equals_flex_own_block_mask(queries, keys, window):
    """Built from the key ranges alone, the visible blocks are exactly those `create_block_mask` finds by
    evaluating the mask everywhere; a block called full is visible in every one of its (query, key) pairs."""
    from torch.nn.attention.flex_attention import create_block_mask

    offset = keys - queries
    ranges = flex.two_part_ranges(keys, window) if window else flex.causal_ranges(keys)
    total = 2 * keys if window else keys
    visible = flex.mask_function(ranges, offset)
    theirs = create_block_mask(visible, None, None, queries, total, device="cpu")
    partial, full = flex.block_structure(queries, total, offset, ranges)
    assert torch.equal((partial | full).int(), theirs.to_dense()[0, 0])
    assert not (partial & full).any()
    dense = visible(None, None, torch.arange(queries)[:, None], torch.arange(total)[None, :])  # (Tq, total)
    for qb, kb in full.nonzero().tolist():
        assert dense[qb * 128 : (qb + 1) * 128, kb * 128 : (kb + 1) * 128].all()
    mask = flex.block_mask(queries, total, offset, ranges, "cpu")
    assert torch.equal(mask.to_dense()[0, 0], theirs.to_dense()[0, 0])


@pytest.mark.parametrize("queries,keys,chunk", [(256, 256, 33), (200, 333, 64), (1000, 1000, 300), (1, 900, 128)])
def test_the_chunk_block_structure_equals_flex_own_block_mask(queries, keys, chunk):
    """Dual chunk attention's three key copies: the blocks found from the chunk intervals are those
    `create_block_mask` finds by evaluating the mask; a block called full is visible in every pair."""
    from torch.nn.attention.flex_attention import create_block_mask

    offset, total = keys - queries, flex.CHUNK_PARTS * keys
    visible = flex.chunk_mask_function(keys, offset, chunk)
    theirs = create_block_mask(visible, None, None, queries, total, device="cpu")
    partial, full = flex.chunk_structure(queries, keys, offset, chunk)
    assert torch.equal((partial | full).int(), theirs.to_dense()[0, 0])
    assert not (partial & full).any() and (full.any() or chunk < 300)  # chunks of 300: whole blocks seen
    dense = visible(None, None, torch.arange(queries)[:, None], torch.arange(total)[None, :])  # (Tq, 3·Tk)
    assert torch.equal(dense.sum(-1), torch.arange(offset + 1, keys + 1))  # each key seen once, causal
    for qb, kb in full.nonzero().tolist():
        assert dense[qb * 128 : (qb + 1) * 128, kb * 128 : (kb + 1) * 128].all()


def test_the_block_mask_of_a_long_sequence_takes_no_quadratic_memory():
    """At 65536 queries (and the two-part layout's 131072 keys) an n × n boolean mask would take 4–8 GB; the
    block mask takes (n/128)² small integers. Peak memory of a fresh process, building both."""
    code = """
import torch
from extrapolate.kernels import flex
from extrapolate.bench.timing import peak_rss_mb
torch.zeros(1)
before = peak_rss_mb()
n = 65536
flex.block_mask(n, n, 0, flex.causal_ranges(n), "cpu")
flex.block_mask(n, 2 * n, 0, flex.two_part_ranges(n, 1024), "cpu")
print(int(peak_rss_mb() - before))
"""
    grown_mb = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert grown_mb < 400, f"building the block masks grew the process by {grown_mb} MB"


ALL = [name for name, _ in ENCODINGS]


@pytest.mark.parametrize("name", ALL)
def test_cuda_runs_every_encoding_and_shape_on_a_fused_kernel(name):
    """No (encoding, shape) pair plans the blocked or reference kernel on CUDA: a training step, evaluation in
    bf16 and float32 at short and long lengths, a prompt continuing a cache, and decoding."""
    encoding = build_encoding(name, d_model=64, n_heads=4, head_dim=16, max_len=256, factor=4.0)
    shapes = {
        "training": (256, 256, True),
        "evaluation": (256, 256, False),
        "long evaluation": (65536, 65536, False),
        "continued prompt": (300, 4096, False),
        "decoding": (1, 4097, False),
        "rank scoring": (6, 4096, False),
    }
    for what, (queries, keys, backward) in shapes.items():
        for dtype in (torch.bfloat16, torch.float32):
            plan = attention_plan(encoding, "auto", "cuda", dtype, queries, keys, backward).name
            assert plan not in ("blocked", "reference"), f"{name}: {what} plans {plan}"
    # the portable kernels stay reachable by name (an encoding with a kernel of its own: that kernel, blocked)
    portable = attention_plan(encoding, "blocked", "cuda", torch.float32, 256, 256).name
    assert portable in ("blocked", "sdpa", "sdpa-cache", encoding.own_kernel)


def test_a_flex_backend_that_cannot_differentiate_falls_back_before_training(monkeypatch):
    """The backward check runs one small forward and backward first: a failure there hands training to the
    blocked kernel, with one warning, instead of failing inside a training step."""
    encoding = make("kerple-log")

    def no_backward(*args, **kwargs):
        raise RuntimeError("score_mod gradients are not supported")

    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus())
    monkeypatch.setattr(attention, "_check_backward", no_backward)
    q, k, v = inputs(200, 200)
    with pytest.warns(UserWarning, match="blocked kernel"):
        assert attention._try_flex(q, k, v, encoding, backward=True) is None
    status = attention.FLEX_STATUS
    assert status.failed_for == {("kerple-log", "backward"): "score_mod gradients are not supported"}
    # only this encoding's training leaves flex: its evaluation and every other encoding keep it
    cuda = torch.device("cuda")
    assert status.failed is None and status.usable(encoding) and status.usable(make("alibi"), backward=True)
    assert attention.attention_plan(encoding, "auto", cuda, torch.float32, 4096, 4096, backward=True).name == "blocked"
    assert attention.attention_plan(encoding, "auto", cuda, torch.float32, 4096, 4096).name == "flex"
    alibi_plan = attention.attention_plan(make("alibi"), "auto", cuda, torch.float32, 4096, 4096, backward=True)
    assert alibi_plan.name == "flex"


def test_a_forward_that_fails_to_compile_leaves_flex_to_the_other_encodings(monkeypatch):
    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus())

    def fails_for_kerple(q, k, v, encoding, compiled=True):
        if encoding.name == "kerple-log":
            raise RuntimeError("LoweringException: not supported")
        return causal_attention(q, k, v, encoding, "reference")

    monkeypatch.setattr(attention, "flex_attention_of", fails_for_kerple)
    q, k, v = inputs(200, 200)
    kerple = make("kerple-log")
    with torch.no_grad(), pytest.warns(UserWarning, match="kerple-log"):
        out = causal_attention(q, k, v, kerple, "flex")  # the blocked kernel takes over
    torch.testing.assert_close(out, causal_attention(q, k, v, kerple, "reference"), atol=2e-5, rtol=0)
    status = attention.FLEX_STATUS
    assert not status.usable(kerple) and not status.usable(kerple, backward=True)
    assert status.usable(make("alibi")) and status.failed is None
    status.fail(ImportError("no triton"), make("alibi"))  # flex's own compiler missing: every encoding leaves it
    assert status.failed == "no triton" and not status.usable(make("alibi"))


def test_the_backward_check_touches_no_gradient(monkeypatch):
    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus())
    # the CPU build has no flex backward: the reference kernel stands in for flex, through the same check
    monkeypatch.setattr(
        attention,
        "flex_attention_of",
        lambda q, k, v, encoding, compiled=True: causal_attention(q, k, v, encoding, "reference"),
    )
    encoding = make("fire")
    attention._check_backward(torch.zeros(1, 4, 8, 16), encoding)
    assert all(p.grad is None for p in encoding.parameters())
    assert ("fire", "cpu") in attention.FLEX_STATUS.backward_checked


def compiled_equals_reference(name, queries, keys):
    encoding = make(name)
    q, k, v = inputs(queries, keys)
    with torch.no_grad():
        got = flex_attention_of(q, k, v, encoding)  # compiles for this shape
        torch.testing.assert_close(got, causal_attention(q, k, v, encoding, "reference"), atol=2e-5, rtol=0)
    assert attention.FLEX_STATUS.failed is None


@pytest.mark.parametrize("name", ["kerple-log", "self-extend"])
def test_compiled_flex_equals_the_reference(name):
    compiled_equals_reference(name, 200, 333)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FLEXED if n not in ("kerple-log", "self-extend")])
def test_compiled_flex_equals_the_reference_for_every_encoding(name):
    compiled_equals_reference(name, 200, 333)


def test_a_sliding_window_skips_the_key_blocks_beyond_it():
    """A windowed encoding (Mistral's layers; Gemma's sliding ones) through flex equals the reference, and its
    block mask holds only the blocks within the window: the work grows as n × window, not n²."""
    from extrapolate.encodings.window import windowed

    window, queries, keys = 150, 300, 1100
    encoding = windowed(make("alibi"), window)
    q, k, v = inputs(queries, keys)
    with torch.no_grad():
        got = flex_attention_of(q, k, v, encoding, compiled=False)
    torch.testing.assert_close(got, causal_attention(q, k, v, encoding, "reference"), atol=2e-5, rtol=0)
    offset = keys - queries
    ranges = (flex.KeyRange(0, keys, 0, window - 1),)
    partial, full = flex.block_structure(queries, keys, offset, ranges)
    causal_partial, causal_full = flex.block_structure(queries, keys, offset, flex.causal_ranges(keys))
    seen, causal_seen = int((partial | full).sum()), int((causal_partial | causal_full).sum())
    # each query block of 128 rows sees at most the blocks its rows' windows touch
    assert seen <= math.ceil(queries / flex.BLOCK) * (math.ceil((flex.BLOCK + window) / flex.BLOCK) + 1)
    assert seen < causal_seen


@pytest.mark.parametrize("name", ["alibi", "t5", "kerple-log", "kerple-power"])
def test_the_score_modification_equals_the_distance_table(name):
    """Whatever an encoding's `score_bias` computes per score (ALiBi: a multiply; the others: a lookup), it
    is its distance table, value for value."""
    encoding = make(name)
    keys = 700
    table = encoding.bias_table(keys)  # (H, keys)
    h = torch.arange(table.shape[0])[:, None].expand(-1, keys)
    d = torch.arange(keys, dtype=torch.int32)[None, :].expand(table.shape[0], -1)
    with torch.no_grad():
        assert torch.equal(encoding.score_bias(keys)(h, d + 5, d), table)
