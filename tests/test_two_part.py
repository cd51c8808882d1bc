"""Self-Extend, ReRoPE, StreamingLLM, LM-Infinite and STRING: every kernel equals a slow reference built from
the papers' definitions of the relative position (the full n × n score matrix, float64); windows that cover the
sequence give plain RoPE; decoding from a KV cache equals one pass; bad parameters end in one line.

Definitions (sources): Self-Extend, Jin et al. 2024 (arXiv 2401.01325) and its reference code
(datamllab/LongLM): d = i - j if d < w, else ⌊i/G⌋ - ⌊j/G⌋ + w - ⌊w/G⌋. ReRoPE, Su 2023 (kexue.fm/archives/9708,
bojone/rerope): min(d, w); leaky: w + (d - w)/k past w. StreamingLLM, LM-Infinite and STRING
(tests/test_reference_ports.py ports their reference code): d below the window; past it only the first s keys,
at min(i, s + w - 1) - j (StreamingLLM) and at the cap c (LM-Infinite); STRING d below S, d - S + W from it,
q and k times its attention factor 0.1·ln 2 + 1 (HKUNLP/STRING's `replace_with_string`)."""

import math

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.encodings import build_encoding
from extrapolate.kernels.attention import attention_plan, causal_attention
from extrapolate.kernels.two_part import blocked_attention, fused_attention
from extrapolate.model import TransformerLM

BASE = 10000.0


def relative_position(
    name: str,
    i: int,
    j: int,
    window: int,
    group: int = 1,
    leak: float | None = None,
    sink_tokens: int = 0,
    distance_cap: int | None = None,
    shift: int | None = None,
    local: int | None = None,
) -> float:
    """The relative position query i sees key j at; NaN where the encoding hides the key."""
    d = i - j
    if name == "string":  # distances from S on are seen at d - S + W
        return float(d if d < shift else d - shift + local)
    if d < window:
        return float(d)
    if name == "self-extend":
        return float(i // group - j // group + window - window // group)
    if name in ("streaming-llm", "lm-infinite") and j >= sink_tokens:
        return float("nan")  # the Λ-shaped mask: past the window only the first tokens are seen
    if name == "streaming-llm":  # a full cache: the sinks at their own slots, the query at s + w - 1
        return float(min(i, sink_tokens + window - 1) - j)
    if name == "lm-infinite":
        return float(window if distance_cap is None else distance_cap)
    return float(window) if leak is None else window + (d - window) / leak


def slow_attention(q, k, v, name, **params):
    """softmax(q_i · R(rel(i, j)) k_j / √d) over the full matrix, from the definition (half-pair layout)."""
    q, k, v = q.double(), k.double(), v.double()
    heads, dim = q.shape[1], q.shape[-1]
    k, v = k.repeat_interleave(heads // k.shape[1], 1), v.repeat_interleave(heads // v.shape[1], 1)
    keys, queries = k.shape[2], q.shape[2]
    theta = BASE ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (d/2,)
    q_pos = range(keys - queries, keys)
    rel = torch.tensor(
        [[relative_position(name, i, j, **params) for j in range(keys)] for i in q_pos], dtype=torch.float64
    )  # (Tq, Tk)
    angle = rel.nan_to_num()[..., None] * theta  # (Tq, Tk, d/2)
    cos, sin = angle.cos(), angle.sin()
    q1, q2 = q[..., None, : dim // 2], q[..., None, dim // 2 :]  # (B, H, Tq, 1, d/2)
    rotated = torch.cat((q1 * cos - q2 * sin, q2 * cos + q1 * sin), -1)  # (B, H, Tq, Tk, d): q_i at rel(i, j)
    scores = (rotated * k[:, :, None]).sum(-1) / math.sqrt(dim)  # (B, H, Tq, Tk)
    future = torch.tensor([[j > i for j in range(keys)] for i in q_pos]) | rel.isnan()
    return scores.masked_fill(future, float("-inf")).softmax(-1) @ v


def make(name, head_dim=16, **options):
    return build_encoding(name, d_model=64, n_heads=4, head_dim=head_dim, max_len=32, base=BASE, options=options)


CASES = [
    ("self-extend", {"window": 5, "group": 3}),
    ("self-extend", {"window": 8, "group": 2}),
    ("self-extend", {"window": 1, "group": 4}),
    ("rerope", {"window": 6}),
    ("rerope", {"window": 6, "leak": 4.0}),
    ("streaming-llm", {"window": 6, "sink_tokens": 4}),
    ("streaming-llm", {"window": 9, "sink_tokens": 1}),
    ("lm-infinite", {"window": 8, "sink_tokens": 3}),
    ("lm-infinite", {"window": 8, "sink_tokens": 20, "distance_cap": 5}),  # sinks reaching into the window
    ("string", {"shift": 12, "local": 3}),
    ("string", {"shift": 5, "local": 5}),
]


@pytest.mark.parametrize("name,params", CASES)
@pytest.mark.parametrize("queries", [45, 7, 1])  # a full pass, and continuations of a cache
def test_every_kernel_equals_the_definition(name, params, queries):
    params = {"window": 0, **params} if name == "string" else params  # STRING's window is its shift
    torch.manual_seed(0)
    q = torch.randn(2, 4, queries, 16)
    k, v = torch.randn(2, 2, 45, 16), torch.randn(2, 2, 45, 16)  # grouped-query: 2 KV heads for 4 heads
    encoding = make(name, **{k: v for k, v in params.items() if not (name == "string" and k == "window")})
    factor = encoding.attention_factor  # STRING's reference scales every rotated q and k by it; the others by 1
    assert factor == (0.1 * math.log(2) + 1 if name == "string" else 1.0)
    expected = slow_attention(q * factor, k * factor, v, name, **params).float()
    form = encoding.two_part_form()
    results = {
        "auto": causal_attention(q, k, v, encoding, "auto"),
        "fused, 7-row blocks": fused_attention(q, k, v, form, rows=7),
        "blocked, small blocks": blocked_attention(q, k, v, form, block_elements=2 * 4 * 45 * 16),
        "reference": causal_attention(q, k, v, encoding, "reference"),
    }
    for label, got in results.items():
        assert torch.allclose(got, expected, atol=2e-6, rtol=0), (label, (got - expected).abs().max())


def tiny_model(encoding="rope"):
    torch.manual_seed(0)
    model = TransformerLM(
        ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding=encoding, max_len=16)
    ).eval()
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


def encoding_for_model(model, name, **options):
    c = model.config
    return build_encoding(
        name,
        d_model=c.d_model,
        n_heads=c.n_heads,
        head_dim=c.head_dim,
        max_len=c.max_len,
        base=c.rope_base,
        options=options,
    )


@pytest.mark.parametrize(
    "name,options",
    [
        ("self-extend", {"window": 40, "group": 3}),
        ("self-extend", {"window": 3, "group": 1}),
        ("rerope", {"window": 40}),
        ("rerope", {"window": 2, "leak": 1.0}),
        ("streaming-llm", {"window": 40, "sink_tokens": 4}),
        ("lm-infinite", {"window": 40, "sink_tokens": 10}),
        ("string", {"shift": 40, "local": 8, "attention_factor": 1.0}),
        ("string", {"shift": 6, "local": 6, "attention_factor": 1.0}),  # W = S: d - S + W = d
    ],
)
def test_plain_rope_when_the_window_covers_the_sequence(name, options):
    """w ≥ n: every key is near. G = 1 (shift 0) and leak 1 are plain RoPE at any window; STRING with its
    attention factor off (1)."""
    model = tiny_model()
    tokens = torch.randint(0, 64, (2, 40))
    with torch.no_grad():
        rope = model(tokens)
        model.set_encoding(encoding_for_model(model, name, **options))
        assert torch.allclose(model(tokens), rope, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "name,options",
    [
        ("self-extend", {"window": 6, "group": 3}),
        ("rerope", {"window": 5}),
        ("rerope", {"window": 5, "leak": 8.0}),
        ("streaming-llm", {"window": 5, "sink_tokens": 2}),
        ("lm-infinite", {"window": 6, "sink_tokens": 3}),
        ("string", {"shift": 7, "local": 2}),
    ],
)
def test_cached_decoding_equals_one_pass(name, options):
    """The cache holds unrotated keys; each continuation rotates them per part again."""
    model = tiny_model()
    model.set_encoding(encoding_for_model(model, name, **options))
    tokens = torch.randint(0, 64, (1, 30))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache()
        pieces = [model.lm_head(model.hidden_states(tokens[:, :24], cache=cache))]
        for t in range(24, 30):
            pieces.append(model.lm_head(model.hidden_states(tokens[:, t : t + 1], cache=cache)))
    assert torch.allclose(torch.cat(pieces, 1), full, atol=1e-5, rtol=0)
    assert not full.isnan().any()


def test_far_keys_change_the_logits_and_differ_from_rope():
    model = tiny_model()
    tokens = torch.randint(0, 64, (1, 40))
    with torch.no_grad():
        rope = model(tokens)
        model.set_encoding(encoding_for_model(model, "rerope", window=4))
        rerope = model(tokens)
    assert torch.allclose(rerope[:, :4], rope[:, :4], atol=1e-5)  # no key is 4 or more tokens back yet
    assert (rerope[:, 10:] - rope[:, 10:]).abs().max() > 1e-2


def test_kernel_plan_and_record():
    enc = make("self-extend", window=4, group=2)
    f32, bf16 = torch.float32, torch.bfloat16
    assert attention_plan(enc, "auto", "cpu", f32, 64, 64).name == "two-part"
    assert attention_plan(enc, "sdpa", "cpu", bf16, 1, 65).name == "two-part"
    assert attention_plan(enc, "auto", "cpu", f32, 64, 64, backward=True).name == "blocked"
    assert attention_plan(enc, "auto", "cuda", f32, 64, 64).name == "sdpa-rows"  # a few queries: one SDPA call
    assert attention_plan(enc, "auto", "cuda", bf16, 4096, 4096, backward=True).name == "flex"
    assert attention_plan(enc, "blocked", "cuda", f32, 4096, 4096).name == "blocked"
    assert attention_plan(enc, "reference", "cpu", f32, 64, 64).name == "reference"


def test_bfloat16_fused_is_close_to_float32():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 4, 300, 32), torch.randn(1, 4, 300, 32), torch.randn(1, 4, 300, 32)
    enc = make("self-extend", head_dim=32, window=16, group=4)
    f32 = causal_attention(q, k, v, enc)
    bf16 = causal_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), enc)
    assert bf16.dtype == torch.bfloat16 and (bf16.float() - f32).abs().max() < 0.05


def test_defaults_follow_the_training_length_and_factor():
    """Self-Extend: w = L/4 (1024 of Llama-2's 4096 in the authors' examples), G the smallest with
    G·(L - w) + w ≥ s·L; ReRoPE: w = L/8 (the reference code's 512 of 4096)."""
    se = build_encoding("self-extend", d_model=64, n_heads=4, head_dim=16, max_len=4096, factor=4.0)
    assert se.describe() == {"base": 10000.0, "window": 1024, "group": 5, "shift": 1024 - 1024 // 5}
    assert build_encoding("self-extend", d_model=64, n_heads=4, head_dim=16, max_len=256, factor=8.0).group == 11
    assert build_encoding("self-extend", d_model=64, n_heads=4, head_dim=16, max_len=256).group == 1
    assert build_encoding("rerope", d_model=64, n_heads=4, head_dim=16, max_len=4096).describe() == {
        "base": 10000.0,
        "window": 512,
    }


@pytest.mark.parametrize(
    "name,options,needle",
    [
        ("self-extend", {"group": 0}, "group size must be a whole number ≥ 1"),
        ("self-extend", {"window": 0}, "window must be a whole number ≥ 1"),
        ("self-extend", {"group": 2.5}, "group size must be a whole number"),
        ("rerope", {"window": -3}, "window must be a whole number ≥ 1"),
        ("rerope", {"leak": 0.5}, "leak must be a finite number ≥ 1"),
    ],
)
def test_bad_parameters_are_user_errors(name, options, needle):
    with pytest.raises(UserError, match=needle):
        make(name, **options)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "name,options", [c for c in CASES if c[0] != "string"] + [("string", {"shift": 12, "local": 3})]
)
def test_kept_angles_rotate_exactly_as_fresh_ones(name, options, dtype):
    """`rotate_from` reads cos and sin from a table it keeps and grows (decoding reads it at every step); it
    must give what `rotate_at` computes from the positions, bit for bit, near and far, before and after growing."""
    encoding = make(name, **options)
    torch.manual_seed(0)
    x = torch.randn(2, 2, 70, 16).to(dtype)
    for start, length in [(0, 10), (3, 5), (10, 12), (0, 70), (69, 1)]:  # the table first holds 10, then 22, 70
        positions = torch.arange(start, start + length)
        for far in (False, True):
            angles = encoding.far_key(positions) if far else positions.float()
            expected = encoding.rotate_at(x[:, :, :length], angles)
            assert torch.equal(encoding.rotate_from(x[:, :, :length], start, far), expected), (start, length, far)
