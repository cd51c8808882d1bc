"""Self-Extend and ReRoPE equal their authors' computations: each reference is ported here from its own code and
run inside a tiny RoPE model's layers in place of the project's kernels, once as its prefill computes all rows
and once as its decoding computes each row from the cache; the logits agree to 1e-4.

- Self-Extend: datamllab/LongLM at cdbbb06. `self_extend_forward` (the plain-attention path, prefill and
  q_len == 1): queries far from a key rotated at i // G + w - w // G, keys at j // G, near keys (the last w) at
  their positions, chosen by its neighbour mask; in self_extend_patch/Llama_4_40.py the shift floors (the
  authors' fix 715c1e3: "We accidentally use '/'"), in the older self_extend_patch/Llama.py it divides
  exactly, w - w / G. `flash_self_extend_forward`'s decoding branch (q_len == 1, Llama.py): the query
  unrotated, each key rotated back by its relative position, i // G - j // G + w - w // G past the last w keys.
  The project's default is the floor form (the paper's, REFERENCE.md's, the fixed code's); `shift_rule=exact` gives
  the older prefill's. Where G divides w the two agree.
- ReRoPE: bojone/rerope at acfe788, rerope_patch.py and leaky_rerope_patch.py: the prefill's two score matrices
  (q and k at their positions; q at w against k unrotated, or leaky: q at (i + w(k - 1)) / k against k at j / k)
  chosen by |i - j| < w, and the decoding branch's keys rotated back by min(i - j, w) (leaky: by the table
  spliced at w). Both also multiply q by max(1, log(i + 1) / log(L)); the project leaves that out (a separate
  trick, docs/encodings.md), so the ports run it at an L past every position, where it is 1.
"""

import math

import pytest
import torch

import extrapolate.model as model_module
from tests.test_reference_ports import rotate_half, tiny_model, with_encoding

BASE = 10000.0


def llama_rotate(x, positions):
    """x (B, H, T, D) rotated as transformers' Llama rotates at (T,) positions, integer or not (float64)."""
    dim = x.shape[-1]
    inv_freq = 1.0 / (BASE ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))  # (D/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq  # (T, D/2)
    emb = torch.cat((angles, angles), dim=-1)  # (T, D)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def softmax_attention(scores, v):
    return scores.softmax(-1) @ v


def causal_mask(q_len: int, kv_len: int) -> torch.Tensor:
    """(q_len, kv_len) True where the key is in the query's future (the last query sits at kv_len - 1)."""
    rows = torch.arange(kv_len - q_len, kv_len)[:, None]
    return torch.arange(kv_len)[None, :] > rows


def row_by_row(decode):
    """Every row of a sequence computed as the reference decodes it: query i against the cache of keys 0 … i."""

    def attention(q, k, v, *args):
        rows = [decode(q[:, :, i : i + 1], k[:, :, : i + 1], v[:, :, : i + 1], *args) for i in range(q.shape[2])]
        return torch.cat(rows, dim=2)

    return attention


# ---- Self-Extend, ported


def self_extend_plain(q, k, v, group: int, window: int, fixed: bool):
    """`self_extend_forward` (q_len == kv_len or 1): q (B, H, Tq, D), k, v (B, H, Tk, D) unrotated -> (B, H, Tq, D).
    fixed: Llama_4_40.py's shift (floor); else Llama.py's (true division)."""
    q, k, v = q.double(), k.double(), v.double()
    q_len, kv_len, dim = q.shape[2], k.shape[2], q.shape[-1]
    query_position = torch.arange(kv_len - q_len, kv_len)
    key_position = torch.arange(kv_len)
    shift = 0 if query_position.max() < window else window  # `_re_group_size_2`
    grouped_window = shift // group if fixed else shift / group
    group_query_position = query_position // group + shift - grouped_window
    group_key_position = key_position // group
    neighbor = llama_rotate(q, query_position) @ llama_rotate(k, key_position).transpose(2, 3) / math.sqrt(dim)
    grouped = llama_rotate(q, group_query_position) @ llama_rotate(k, group_key_position).transpose(2, 3)
    grouped = grouped / math.sqrt(dim)
    if q_len == 1:
        neighbor_mask = torch.zeros(q_len, kv_len)
        neighbor_mask[:, -window:] = 1
    else:
        neighbor_mask = torch.tril(torch.ones(q_len, kv_len))
        if q_len - window > 0:
            neighbor_mask[window:, :-window] -= torch.tril(torch.ones(q_len - window, kv_len - window))
    scores = torch.where(neighbor_mask.bool(), neighbor, grouped).masked_fill(causal_mask(q_len, kv_len), -math.inf)
    return softmax_attention(scores, v)


def self_extend_flash_decode(q, k, v, group: int, window: int):
    """`flash_self_extend_forward`'s q_len == 1 branch: q (B, H, 1, D), k, v (B, H, Tk, D) -> (B, H, 1, D)."""
    q, k, v = q.double(), k.double(), v.double()
    kv_len, dim = k.shape[2], q.shape[-1]
    key_position = torch.arange(kv_len)
    last = kv_len - 1
    neighbor_key_position = last - key_position
    shift = 0 if last < window else window
    group_key_position = last // group - key_position // group + (shift - shift // group)  # floor
    decode_key_position = torch.cat((group_key_position[:-window], neighbor_key_position[-window:]))
    keys = llama_rotate(k, -decode_key_position)  # cos and -sin: rotated back; the query stays at position 0
    return softmax_attention(q @ keys.transpose(2, 3) / math.sqrt(dim), v)


# ---- ReRoPE and leaky ReRoPE, ported


def query_log_scale(q, positions, training_length: int):
    return q * (torch.log(positions.double() + 1) / math.log(training_length)).clip(min=1)[:, None]


def rerope_prefill(q, k, v, window: int, leak: int | None, training_length: int):
    """`forward_with_rerope` / `forward_with_leaky_rerope`, q_len > 1: q, k, v (B, H, T, D) -> (B, H, T, D)."""
    q, k, v = q.double(), k.double(), v.double()
    length, dim = q.shape[2], q.shape[-1]
    position = torch.arange(length)
    q = query_log_scale(q, position, training_length)
    near = llama_rotate(q, position) @ llama_rotate(k, position).transpose(2, 3)
    if leak is None:
        far = llama_rotate(q, position * 0 + window) @ k.transpose(2, 3)  # k as it is
    else:
        offset = window * (leak - 1)  # the second table is linearly scaled: position p is at p / leak
        far = llama_rotate(q, (position + offset) / leak) @ llama_rotate(k, position / leak).transpose(2, 3)
    rectified = (position[:, None] - position[None, :]).abs() < window
    scores = torch.where(rectified, near, far) / math.sqrt(dim)
    return softmax_attention(scores.masked_fill(causal_mask(length, length), -math.inf), v)


def rerope_decode(q, k, v, window: int, leak: int | None, training_length: int):
    """The q_len == 1 branch: the query unrotated, each key rotated back by its (rectified) distance."""
    q, k, v = q.double(), k.double(), v.double()
    kv_len, dim = k.shape[2], q.shape[-1]
    distance = kv_len - 1 - torch.arange(kv_len)
    q = query_log_scale(q, torch.tensor([kv_len - 1]), training_length)
    if leak is None:
        angle_position = distance.clip(max=window)
    else:  # cos[:window] spliced with cos2[window + offset:]: distance d ≥ w at (d + offset) / leak
        offset = window * (leak - 1)
        angle_position = torch.where(distance < window, distance.double(), (distance + offset) / leak)
    keys = llama_rotate(k, -angle_position)
    return softmax_attention(q @ keys.transpose(2, 3) / math.sqrt(dim), v)


# ---- the model's logits with the project's kernels and with each port in their place


def logits_with(monkeypatch, model, tokens, reference=None):
    with torch.no_grad():
        if reference is not None:
            monkeypatch.setattr(model_module, "causal_attention", lambda q, k, v, *_: reference(q, k, v).to(q.dtype))
        return model(tokens)


def agree(ours, theirs) -> bool:
    assert theirs.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    return torch.allclose(ours, theirs, atol=1e-4, rtol=0)


SELF_EXTEND_CASES = [(8, 2), (8, 4), (5, 3), (12, 5), (7, 11)]  # (w, G): G dividing w, and not


@pytest.mark.parametrize("window,group", SELF_EXTEND_CASES)
def test_self_extend_default_gives_the_logits_of_the_reference_decoding(monkeypatch, window, group):
    """The floor shift w - ⌊w/G⌋: the flash decoding branch, each row from the cache."""
    model = with_encoding(tiny_model(), "self-extend", window=window, group=group)
    tokens = torch.randint(0, 64, (2, 48))
    ours = logits_with(monkeypatch, model, tokens)
    decode = row_by_row(self_extend_flash_decode)
    assert agree(ours, logits_with(monkeypatch, model, tokens, lambda q, k, v: decode(q, k, v, group, window)))


@pytest.mark.parametrize("window,group", SELF_EXTEND_CASES)
@pytest.mark.parametrize("shift,fixed", [("floor", True), ("exact", False)])
def test_self_extend_gives_the_logits_of_the_reference_plain_path(monkeypatch, window, group, shift, fixed):
    """The default (floor) equals Llama_4_40.py's plain path, `shift_rule=exact` Llama.py's: prefill and each row
    decoded alike."""
    options = {} if shift == "floor" else {"shift_rule": shift}
    model = with_encoding(tiny_model(), "self-extend", window=window, group=group, **options)
    tokens = torch.randint(0, 64, (2, 48))
    ours = logits_with(monkeypatch, model, tokens)
    plain = lambda q, k, v: self_extend_plain(q, k, v, group, window, fixed)  # noqa: E731
    prefill = logits_with(monkeypatch, model, tokens, plain)
    decode = row_by_row(lambda q, k, v: self_extend_plain(q, k, v, group, window, fixed))
    decoded = logits_with(monkeypatch, model, tokens, decode)
    assert agree(ours, prefill) and agree(ours, decoded)


@pytest.mark.parametrize("window,group", SELF_EXTEND_CASES)
def test_the_two_self_extend_shifts_differ_exactly_where_the_group_does_not_divide_the_window(
    monkeypatch, window, group
):
    """What the tests above pin: the floor and the true division part where G ∤ w, and only there."""
    model = with_encoding(tiny_model(), "self-extend", window=window, group=group)
    tokens = torch.randint(0, 64, (2, 48))
    floor = logits_with(monkeypatch, model, tokens)
    older = lambda q, k, v: self_extend_plain(q, k, v, group, window, fixed=False)  # noqa: E731
    assert agree(floor, logits_with(monkeypatch, model, tokens, older)) == (window % group == 0)


@pytest.mark.parametrize("window,leak", [(6, None), (12, None), (5, 4), (10, 16)])
def test_rerope_gives_the_logits_of_the_reference_prefill_and_decoding(monkeypatch, window, leak):
    options = {} if leak is None else {"leak": float(leak)}
    model = with_encoding(tiny_model(), "rerope", window=window, **options)
    tokens = torch.randint(0, 64, (2, 48))
    ours = logits_with(monkeypatch, model, tokens)
    no_log_scale = 64  # past every position: the reference's query scale is 1
    prefill = logits_with(
        monkeypatch, model, tokens, lambda q, k, v: rerope_prefill(q, k, v, window, leak, no_log_scale)
    )
    decode = row_by_row(rerope_decode)
    decoded = logits_with(monkeypatch, model, tokens, lambda q, k, v: decode(q, k, v, window, leak, no_log_scale))
    assert agree(ours, prefill) and agree(ours, decoded)


def test_rerope_ports_see_the_window():
    """The ports are not blind to what they pin: another window, or plain rather than leaky, moves the output."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 30, 8), torch.randn(1, 2, 30, 8), torch.randn(1, 2, 30, 8)
    base = rerope_prefill(q, k, v, 6, None, 64)
    assert not torch.allclose(base, rerope_prefill(q, k, v, 7, None, 64), atol=1e-4)
    assert not torch.allclose(base, rerope_prefill(q, k, v, 6, 4, 64), atol=1e-4)
    assert torch.allclose(base, row_by_row(rerope_decode)(q, k, v, 6, None, 64), atol=1e-10)
