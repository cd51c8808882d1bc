"""StreamingLLM, LM-Infinite and STRING equal their authors' computations: each reference is ported here from
its own code and run inside a tiny RoPE model's layers in place of the project's kernels; the logits agree to
1e-4.

- StreamingLLM: mit-han-lab/streaming-llm at 2e5042606d69933d88fbf909bd77907456b9b4dd, `StartRecentKVCache`
  (streaming_llm/kv_cache.py) and the position shift of streaming_llm/pos_shift/modify_llama.py, token by
  token as examples/eval_long_ppl.py feeds it: the cache stores keys unrotated, rotates them at their place
  in the cache, and the query sits at the cache's length; after each token the cache keeps its first
  `start_size` and last `recent_size` entries.
- LM-Infinite: Glaciohound/LM-Infinite at a0ce64c6b7ae54f6059668c899603a6eb0c94c18, `Lambda_Attention_Matrix`
  (models/lambda_attention.py) with the stationary query and key of `limited_distance_forward`
  (models/llama.py): q rotated at min(limit_distance, n - 1) against the unrotated k for the global branch.
- STRING: HKUNLP/STRING at 216cc2f04cee147e8c3cfaa15723b182ecbe321e, string_for_llama.py's decoding branch of
  `forward`: keys rotated at their positions, the last `diag_size` keys attended with q at its position, the
  rest with q at position - diag_size + local_window, the two merged by their log-sum-exp. (Its prefill
  branch counts the key at distance exactly diag_size in both parts; the paper's definition, and the
  project, count it once, as the decoding branch does.)
- Dual chunk attention: HKUNLP/ChunkLlama at 2add4d7c99d24dcc1ab03414cc602abb2e28cf2c,
  chunkllama_attn_replace.py: `ChunkLlamaRotaryEmbedding`'s tables (q at i mod s, at min(i mod s + s, c) for the
  chunk before and every earlier one, k at j mod s, each times the m of `get_mscale`) and the prefill branch of
  `forward`, chunk by chunk, merged as `merge_attn_outputs` merges (its weights kept in float64 here, where it
  rounds them to bfloat16 for its bfloat16 flash outputs). It runs in place of a NoPE model's attention, so it
  sees q and k as the layer makes them.
- The Forgetting Transformer: zhixuan-lin/forgetting-transformer at 883f260c636e87971339749b0d8310004794a5cc,
  the forget gate of modeling_forgetting_transformer.py (`fgate_proj` on the layer's normed input,
  log-sigmoid in float32) and the attention of ops/forgetting_attention.py's reference in `test_op`
  (q·k·scale plus the cumulative log gate's difference, causal, softmax), with RoPE (half-pair, as the
  project's) for `fox-rope`; it runs in place of the project's attention layers.
"""

import math

import pytest
import torch

import extrapolate.model as model_module
from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.encodings import build_encoding
from extrapolate.model import TransformerLM

BASE = 10000.0


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def cos_sin(length: int, dim: int):
    """transformers' Llama tables (length, dim): each angle twice, half-pair layout."""
    inv_freq = 1.0 / (BASE ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def rotate(x, cos, sin, positions):
    return x * cos[positions] + rotate_half(x) * sin[positions]


# ---- StreamingLLM, ported


def streaming_llm_reference(q, k, v, start_size: int, recent_size: int):
    """q, k, v (B, H, T, D) unrotated, one head set -> (B, H, T, D): each token attends through the cache as
    modify_llama.py's position-shifted attention, the cache trimmed by StartRecentKVCache after it."""
    q, k, v = q.double(), k.double(), v.double()
    length, dim = q.shape[2], q.shape[-1]
    cos, sin = cos_sin(length + 1, dim)
    past_k = past_v = None
    out = []
    for i in range(length):
        past = 0 if past_k is None else past_k.shape[2]
        query = rotate(q[:, :, i : i + 1], cos, sin, torch.tensor([past]))  # position_ids = past length
        keys = k[:, :, i : i + 1] if past_k is None else torch.cat([past_k, k[:, :, i : i + 1]], dim=2)
        values = v[:, :, i : i + 1] if past_v is None else torch.cat([past_v, v[:, :, i : i + 1]], dim=2)
        past_k, past_v = keys, values  # stored unrotated
        rotated = rotate(keys, cos, sin, torch.arange(keys.shape[2]))  # "key pos is the pos in cache"
        weights = (query @ rotated.transpose(2, 3) / math.sqrt(dim)).softmax(-1)
        out.append(weights @ values)
        seq_len = past_k.shape[2]  # StartRecentKVCache.__call__
        if seq_len > start_size + recent_size:
            past_k = torch.cat([past_k[:, :, :start_size], past_k[:, :, seq_len - recent_size :]], dim=2)
            past_v = torch.cat([past_v[:, :, :start_size], past_v[:, :, seq_len - recent_size :]], dim=2)
    return torch.cat(out, dim=2)


# ---- LM-Infinite, ported (its short_seq, long_seq and single_query modes)


def pad_sequence_to_length(tensor, length, value):
    pad = torch.zeros(*tensor.shape[:-2], length - tensor.shape[-2], tensor.shape[-1], dtype=tensor.dtype)
    return torch.cat((tensor, pad), dim=-2)


def blockwise_sequence(sequence, block_size):
    pad_to_length = ((sequence.shape[-2] - 1) // block_size + 1) * block_size
    padded = pad_sequence_to_length(sequence, pad_to_length, 0)
    return padded.view(*sequence.shape[:-2], pad_to_length // block_size, block_size, -1)


def shift_and_pair(blockwise):
    return torch.cat(
        (torch.cat((blockwise[..., -1, None, :, :], blockwise[..., :-1, :, :]), -3), blockwise),
        -2,
    )


def lambda_attention(key_rot, key_stationary, query_rot, query_stationary, value, local_branch, global_branch, dim):
    """Lambda_Attention_Matrix(...) / √dim, .softmax(), .matmul(value), as the reference computes them."""
    query_length, key_length = query_rot.shape[-2], key_rot.shape[-2]
    min_value = torch.finfo(key_rot.dtype).min
    mode = "single_query" if query_length == 1 else "short_seq" if query_length <= local_branch else "long_seq"
    attn_stationary = torch.matmul(query_stationary, key_stationary[..., :global_branch, :].transpose(-1, -2))
    attn_stationary = torch.where(
        torch.ones(attn_stationary.shape[-2:], dtype=torch.bool).triu(-local_branch + 1 + key_length - query_length),
        min_value,
        attn_stationary,
    )
    if mode == "short_seq":
        attn_rot = torch.matmul(query_rot, key_rot.transpose(-1, -2))
        attn_rot = torch.where(torch.ones(attn_rot.shape[-2:], dtype=torch.bool).triu(1), min_value, attn_rot)
        attn = attn_rot
        attn[..., :, :global_branch] = torch.where(
            attn_stationary > min_value / 2, attn_stationary, attn_rot[..., :, :global_branch]
        )
    elif mode == "single_query":
        attn_rot = torch.matmul(query_rot, key_rot[..., max(0, key_length - local_branch) :, :].transpose(-1, -2))
        attn = torch.cat((attn_stationary, attn_rot), -1)
    else:
        pad_to_length = ((query_length - 1) // local_branch + 1) * local_branch
        patch_size = pad_to_length - query_length
        segmented_query_rot = blockwise_sequence(query_rot, local_branch)
        segmented_key_rot = shift_and_pair(blockwise_sequence(key_rot, local_branch))
        attn_rot = torch.matmul(segmented_query_rot, segmented_key_rot.transpose(-1, -2))
        band = torch.ones((local_branch, 2 * local_branch), dtype=torch.bool).triu(1).tril(local_branch)
        attn_rot = torch.where(band.logical_not(), min_value, attn_rot)
        attn_rot[..., 0, :, :local_branch] = min_value
        if patch_size != 0:
            attn_rot[..., -1, -patch_size:, :] = min_value
            attn_rot[..., -1, :, -patch_size:] = min_value
        attn_rot = attn_rot.view(query_rot.shape[:-2] + (-1, local_branch * 2))
        attn_stationary = pad_sequence_to_length(attn_stationary, pad_to_length, min_value)
        attn = torch.cat((attn_stationary, attn_rot), -1)
    attn = (attn / math.sqrt(dim)).clamp(min=min_value).softmax(-1)
    if mode == "short_seq":
        return torch.matmul(attn, value)
    if mode == "single_query":
        kept = torch.cat((value[..., :global_branch, :], value[..., max(0, key_length - local_branch) :, :]), -2)
        return torch.matmul(attn, kept)
    segmented_value = shift_and_pair(blockwise_sequence(value, local_branch))
    output_stationary = torch.matmul(attn[..., :query_length, :global_branch], value[..., :global_branch, :])
    output_rot = torch.matmul(
        attn[..., global_branch:].view(attn.shape[:-2] + (-1, local_branch, local_branch * 2)), segmented_value
    ).view(attn.shape[:-2] + (pad_to_length, -1))
    return output_stationary + output_rot[..., :query_length, :]


def lm_infinite_reference(q, k, v, local_branch: int, global_branch: int, limit_distance: int):
    """q (B, H, Tq, D), k and v (B, H, Tk, D) unrotated, the queries the last Tq positions: the reference's
    lambda-mask attention with its stationary branch (`limited_distance_forward`)."""
    q, k, v = q.double(), k.double(), v.double()
    kv_seq_len, dim = k.shape[2], q.shape[-1]
    cos, sin = cos_sin(kv_seq_len, dim)
    positions = torch.arange(kv_seq_len)
    rot_query = rotate(q, cos, sin, positions[kv_seq_len - q.shape[2] :])
    rot_key = rotate(k, cos, sin, positions)
    effective = min(limit_distance, kv_seq_len - 1)
    stationary_query = q * cos[effective] + rotate_half(q) * sin[effective]
    return lambda_attention(rot_key, k, rot_query, stationary_query, v, local_branch, global_branch, dim)


# ---- STRING, ported (its decoding branch, token by token)


STRING_ATTENTION_FACTOR = 0.1 * math.log(2) + 1  # `replace_with_string`'s attention_factor


def string_reference(q, k, v, diag_size: int, local_window: int, attention_factor: float = STRING_ATTENTION_FACTOR):
    """q, k, v (B, H, T, D) unrotated -> (B, H, T, D): each query as `forward` decodes it from the cache; a
    query with fewer than diag_size + 1 keys before it sees them all at their distances (no shifted part). The
    rotary cache's cos and sin are multiplied by the attention factor (`_set_cos_sin_cache`), so every rotated
    query and key is."""
    q, k, v = q.double(), k.double(), v.double()
    length, dim = q.shape[2], q.shape[-1]
    cos, sin = (attention_factor * table for table in cos_sin(length, dim))
    keys = rotate(k, cos, sin, torch.arange(length))  # key_states rotated at position_ids, then cached
    out = []
    for i in range(length):
        kv_seq_len = i + 1
        query_1 = rotate(q[:, :, i : i + 1], cos, sin, torch.tensor([i]))
        shifted_size = kv_seq_len - diag_size
        if shifted_size <= 0:
            weights = (query_1 @ keys[:, :, :kv_seq_len].transpose(2, 3) / math.sqrt(dim)).softmax(-1)
            out.append(weights @ v[:, :, :kv_seq_len])
            continue
        query_2 = rotate(q[:, :, i : i + 1], cos, sin, torch.tensor([i - diag_size + local_window]))
        parts = []
        for query, span in ((query_1, slice(shifted_size, kv_seq_len)), (query_2, slice(0, shifted_size))):
            scores = query @ keys[:, :, span].transpose(2, 3) / math.sqrt(dim)  # flash decoding of the span
            lse = scores.logsumexp(-1, keepdim=True)
            parts.append(((scores - lse).exp() @ v[:, :, span], lse))
        (out1, lse1), (out2, lse2) = parts
        gap21, gap12 = 1 / (1 + torch.exp(lse2 - lse1)), 1 / (1 + torch.exp(lse1 - lse2))
        out.append(out1 * gap21 + out2 * gap12)
    return torch.cat(out, dim=2)


# ---- ChunkLlama's dual chunk attention, ported (its prefill branch)


def get_mscale(scale=1):
    return 1.0 if scale <= 1 else 0.05 * math.log(scale) + 1.0


def chunk_attention(q, k, v, causal=True):
    """(out, lse (B, H, Tq)) of attention over these keys (causal: a square, j ≤ i), as `do_flash_attn`."""
    scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    lse = scores.logsumexp(-1)
    return (scores - lse[..., None]).exp() @ v, lse


def chunkllama_reference(q, k, v, chunk_size: int, local_window: int, max_position_embeddings: int):
    """q (B, H, T, D), k and v (B, Hkv, T, D) unrotated -> (B, H, T, D), as the reference's prefill computes."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # repeat_kv
    kv_seq_len, dim = q.shape[2], q.shape[-1]
    seq_len = max(kv_seq_len, max_position_embeddings)  # the cache is rebuilt for a longer sequence
    mscale = get_mscale(seq_len / max_position_embeddings)
    chunk_len = chunk_size - local_window
    inv_freq = 1.0 / (BASE ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    q_t = torch.arange(chunk_len, dtype=torch.float64)
    qc_t = (torch.arange(chunk_len, dtype=torch.float64) + chunk_len).clamp(max=chunk_size)
    k_t = torch.arange(seq_len + 512, dtype=torch.float64) % chunk_len

    def tables(t):
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        return emb.cos() * mscale, emb.sin() * mscale

    (q_cos, q_sin), (qc_cos, qc_sin), (k_cos, k_sin) = tables(q_t), tables(qc_t), tables(k_t)
    position_ids = torch.arange(kv_seq_len)
    key_states = rotate(k, k_cos, k_sin, position_ids)
    position_ids = position_ids % chunk_len
    flash_results = [chunk_attention(rotate(q[:, :, :chunk_len], q_cos, q_sin, position_ids[:chunk_len]),
                                     key_states[:, :, :chunk_len], v[:, :, :chunk_len])]  # fmt: skip
    k_prev, v_prev = key_states[:, :, :chunk_len], v[:, :, :chunk_len]
    remain_len = kv_seq_len - chunk_len
    while remain_len > 0:
        per_chunk = []
        begin = kv_seq_len - remain_len
        end = begin + min(chunk_len, remain_len)
        rows = q[:, :, begin:end]
        k_intra, v_intra = key_states[:, :, begin:end], v[:, :, begin:end]
        per_chunk.append(chunk_attention(rotate(rows, q_cos, q_sin, position_ids[begin:end]), k_intra, v_intra))
        per_chunk.append(chunk_attention(rotate(rows, qc_cos, qc_sin, position_ids[begin:end]), k_prev, v_prev, False))
        if begin - k_prev.shape[2] > 0:
            inter = position_ids[chunk_len - 1].repeat(end - begin)
            earlier = slice(0, begin - k_prev.shape[2])
            per_chunk.append(
                chunk_attention(rotate(rows, qc_cos, qc_sin, inter), key_states[:, :, earlier], v[:, :, earlier], False)
            )
        flash_results.append(per_chunk)
        k_prev, v_prev = k_intra, v_intra
        remain_len -= chunk_len
    outputs = [flash_results[0][0]]  # merge_attn_outputs
    for per_chunk in flash_results[1:]:
        outs = torch.stack([out for out, _ in per_chunk])
        lse = torch.stack([lse for _, lse in per_chunk])
        weights = (lse - lse.max(dim=0).values).exp()
        outputs.append((outs * (weights / weights.sum(dim=0))[..., None]).sum(dim=0))
    return torch.cat(outputs, dim=2)


# ---- the Forgetting Transformer, ported (its gate and its reference attention)


def fox_reference(q, k, v, log_fgate):
    """q (B, H, M, D), k and v (B, H, N, D), log_fgate (B, H, N) float32 -> (B, H, M, D), as `test_op`."""
    M, N = q.shape[2], k.shape[2]
    P_SEQ = N - M
    mask = torch.tril(torch.ones((M, N)), diagonal=P_SEQ)
    p = torch.matmul(q, k.transpose(2, 3)) * q.shape[-1] ** -0.5
    p = p.float()
    log_lambda = torch.cumsum(log_fgate, dim=-1)
    decay_bias = log_lambda[..., -M:, None] - log_lambda[..., None, :]
    p = p + decay_bias
    p[:, :, mask == 0] = float("-inf")
    p = torch.softmax(p.float(), dim=-1)
    return torch.matmul(p, v)


def fox_layer(rope: bool):
    """The FoX (LLaMA) attention layer's forward over the project's layer weights and its encoding's gate."""

    def forward(self, x, pos, encoding, kernel, cache=None, seq_len=None):
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)  # float32, as theirs
        k = self.k_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        k, v = (t.repeat_interleave(self.heads // self.kv_heads, dim=1) for t in (k, v))  # repeat_kv
        log_fgate = torch.nn.functional.logsigmoid(encoding.gate(x).float()).transpose(1, 2)  # (B, H, T)
        if rope:
            cos, sin = (t.float() for t in cos_sin(length, self.head_dim))
            q, k = rotate(q, cos, sin, torch.arange(length)), rotate(k, cos, sin, torch.arange(length))
        out = fox_reference(q, k, v, log_fgate).to(x.dtype)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))

    return forward


# ---- the tiny checkpoint, its attention replaced by each reference


def tiny_model():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, encoding="rope", max_len=16)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


def with_encoding(model, name, **options):
    c = model.config
    encoding = build_encoding(
        name, d_model=c.d_model, n_heads=c.n_heads, head_dim=c.head_dim, max_len=c.max_len, options=options
    )
    model.set_encoding(encoding)
    return model


@pytest.mark.parametrize("start_size,recent_size", [(4, 11), (1, 6), (2, 30)])
def test_streaming_llm_gives_the_logits_of_the_reference_cache(monkeypatch, start_size, recent_size):
    model = with_encoding(tiny_model(), "streaming-llm", sink_tokens=start_size, window=recent_size + 1)
    tokens = torch.randint(0, 64, (2, 48))  # past the cache of start + recent tokens
    with torch.no_grad():
        ours = model(tokens)
        monkeypatch.setattr(
            model_module,
            "causal_attention",
            lambda q, k, v, *_: streaming_llm_reference(q, k, v, start_size, recent_size).to(q.dtype),
        )
        theirs = model(tokens)
    assert theirs.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)


@pytest.mark.parametrize("local,global_,limit", [(8, 3, 8), (16, 10, 16), (8, 2, 5), (40, 10, 40)])
def test_lm_infinite_gives_the_logits_of_the_reference_lambda_attention(monkeypatch, local, global_, limit):
    """n = 48 tokens: past the local branch (its long_seq mode, a length it does not divide included) and,
    with a branch of 40, not past it twice (short_seq); then one token from the cache (single_query)."""
    model = with_encoding(tiny_model(), "lm-infinite", window=local, sink_tokens=global_, distance_cap=limit)
    tokens = torch.randint(0, 64, (2, 48))
    with torch.no_grad():
        ours = model(tokens)
        cache = model.new_cache()
        model.hidden_states(tokens[:, :-1], cache=cache)
        ours_next = model.lm_head(model.hidden_states(tokens[:, -1:], cache=cache))
        monkeypatch.setattr(
            model_module,
            "causal_attention",
            lambda q, k, v, *_: lm_infinite_reference(q, k, v, local, global_, limit).to(q.dtype),
        )
        theirs = model(tokens)
        cache = model.new_cache()
        model.hidden_states(tokens[:, :-1], cache=cache)
        theirs_next = model.lm_head(model.hidden_states(tokens[:, -1:], cache=cache))
    assert theirs.abs().max() > 1
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)
    assert torch.allclose(ours_next, theirs_next, atol=1e-4, rtol=0)


@pytest.mark.parametrize("shift,local", [(12, 3), (30, 8), (5, 5)])
@pytest.mark.parametrize("factor", [None, 1.0, 1.3])
def test_string_gives_the_logits_of_the_reference_decoding(monkeypatch, shift, local, factor):
    """By default with the reference's attention factor on cos and sin; `attention_factor` sets another (1: off).
    The factor moves these logits by far more than 1e-4, so leaving it out fails."""
    options = {} if factor is None else {"attention_factor": factor}
    model = with_encoding(tiny_model(), "string", shift=shift, local=local, **options)
    reference_factor = STRING_ATTENTION_FACTOR if factor is None else factor
    tokens = torch.randint(0, 64, (2, 48))
    with torch.no_grad():
        ours = model(tokens)
        monkeypatch.setattr(
            model_module,
            "causal_attention",
            lambda q, k, v, *_: string_reference(q, k, v, shift, local, reference_factor).to(q.dtype),
        )
        theirs = model(tokens)
        monkeypatch.setattr(
            model_module,
            "causal_attention",
            lambda q, k, v, *_: string_reference(q, k, v, shift, local, 1.0 if factor != 1.0 else 1.2).to(q.dtype),
        )
        another_factor = model(tokens)
    assert theirs.abs().max() > 1
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)
    assert not torch.allclose(ours, another_factor, atol=1e-3, rtol=0)  # the factor is what the test pins


@pytest.mark.parametrize("options", [{}, {"chunk_size": 10, "window": 3}, {"chunk_size": 9, "window": 5}])
def test_dual_chunk_gives_the_logits_of_the_reference_prefill(monkeypatch, options):
    """48 tokens at L = 16: several chunks, a last one cut short, and the reference's m past L; its defaults
    (c = 12, w = 2) and others, a window over half a chunk among them (inter-chunk q at 2s - 1, not c)."""
    model = with_encoding(tiny_model(), "dual-chunk", **options)
    chunk_size, window = model.encoding.chunk_size, model.encoding.window
    tokens = torch.randint(0, 64, (2, 48))
    with torch.no_grad():
        ours = model(tokens)
        theirs_model = with_encoding(tiny_model(), "nope")  # the same weights; q and k reach attention unrotated
        monkeypatch.setattr(
            model_module,
            "causal_attention",
            lambda q, k, v, *_: chunkllama_reference(q, k, v, chunk_size, window, 16).to(q.dtype),
        )
        theirs = theirs_model(tokens)
    assert theirs.abs().max() > 1
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["fox", "fox-rope"])
def test_fox_gives_the_logits_of_the_reference_gate_and_attention(monkeypatch, name):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding=name, max_len=16)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so positions and gates matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    for layer in model.encoding.layers:  # gates from about 0.5 to 1, the range a trained FoX spans
        torch.nn.init.normal_(layer.gate.weight, std=0.1)
        torch.nn.init.constant_(layer.gate.bias, 2.0)
    tokens = torch.randint(0, 64, (2, 48))  # past L = 16
    with torch.no_grad():
        ours = model(tokens)
        cache = model.new_cache()  # a shared prefix of batch 1, continued by both rows
        model.hidden_states(tokens[:1, :30], cache=cache)
        continued = model.lm_head(model.hidden_states(tokens[:, 30:], cache=cache))
        monkeypatch.setattr(model_module.Attention, "forward", fox_layer(name == "fox-rope"))
        same_prefix = torch.cat([tokens[:1, :30].expand(2, -1), tokens[:, 30:]], dim=1)
        theirs, theirs_prefixed = model(tokens), model(same_prefix)
    assert theirs.abs().max() > 1
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)
    assert torch.allclose(continued, theirs_prefixed[:, 30:], atol=1e-4, rtol=0)


def test_defaults_keep_every_relative_position_inside_L():
    """StreamingLLM's window defaults to L - s (largest position L - 1); LM-Infinite's window and cap to L."""
    streaming = build_encoding("streaming-llm", d_model=64, n_heads=4, head_dim=16, max_len=256)
    infinite = build_encoding("lm-infinite", d_model=64, n_heads=4, head_dim=16, max_len=256)
    assert streaming.describe() == {"base": BASE, "window": 252, "sink_tokens": 4}
    assert infinite.describe() == {"base": BASE, "window": 256, "sink_tokens": 10, "distance_cap": 256}
    far = 10_000
    assert max(streaming.relative_position(far, d) for d in (0, 251, far - 3, far)) == 255
    assert streaming.relative_position(far, far - 100) != streaming.relative_position(far, far - 100)  # hidden
    assert infinite.relative_position(far, far) == 256 and infinite.relative_position(far, 255) == 255
    string = build_encoding("string", d_model=64, n_heads=4, head_dim=16, max_len=256)
    assert string.describe() == {"base": BASE, "shift": 84, "local": 4, "attention_factor": STRING_ATTENTION_FACTOR}
    assert string.relative_position(far, 83) == 83 and string.relative_position(far, 84) == 4


@pytest.mark.parametrize(
    "name,options,message",
    [
        ("lm-infinite", {"window": 8, "distance_cap": 9}, "distance_cap (9) must be at most its window (8)"),
        ("streaming-llm", {"sink_tokens": 0}, "sink_tokens must be a whole number ≥ 1"),
        ("streaming-llm", {"sink_tokens": 300}, "leave no window"),
        ("string", {"shift": 8, "local": 9}, "string local (9) must be at most its shift (8)"),
    ],
)
def test_bad_options_end_in_one_line(name, options, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_encoding(name, d_model=64, n_heads=4, head_dim=16, max_len=256, options=options)
