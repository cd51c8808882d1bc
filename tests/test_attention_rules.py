"""Stick-breaking attention and CoPE equal their authors' computations, ported here from their code, at sizes
where the part that makes each method acts (sticks spent over many keys, gates counted past whole positions);
a mutation of that part moves the output by far more than the tolerance, and their blocked kernels keep no
n × n tensor.

- Stick-breaking: shawntan/stickbreaking-attention at 3147a3841b025a31d271fc8f873120ff6fa0461b,
  `stickbreaking_attention/sb_ref.py` (`stickbreaking`) as `tests/test_attn.py` calls it (`ref_fwd`: the
  mask `triu(0)` unless the current token is attended, the cumulative weights `tril(-1)`, then
  o + rem·v), the remainder added as IBM/dolomite-engine's `SBAttention` does (`sb_remainder`).
- CoPE: facebookresearch/RAM at e6f051fbcfaef4cab69bf2ea1b25f500f94c0c64, `projects/cope/src/cope/
  context_position.py` (`ContextPosSelfAttn.forward`, its default path: gates from the attention's own q and
  k, the logits divided after the table logit is added) with the causal mask of `models/transformer.py`.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import extrapolate.model as model_module
from extrapolate.core.config import ModelConfig
from extrapolate.kernels import contextual, stick_breaking
from extrapolate.kernels.attention import attention_plan, causal_attention
from extrapolate.model import TransformerLM

# ---- stick-breaking, ported


def stickbreaking(q, k, v, mask, cum_weight):
    """sb_ref.py: q, k, v (B, H, T, D); mask (T, T) bool, True where no key; cum_weight (T, T)."""
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    original_dtype = logits.dtype
    logits = logits.float()
    log_z = F.logsigmoid(logits).masked_fill(mask, -1e5).to(original_dtype)
    log_beta = F.logsigmoid(-logits).masked_fill(mask, 0).to(original_dtype)
    re_cum_log_beta = torch.einsum("bhij,jk->bhik", log_beta, cum_weight.to(log_beta))
    log_att = log_z + re_cum_log_beta
    att = log_att.exp()
    return att @ v, 1 - att.sum(dim=-1)


def stick_breaking_reference(q, k, v, attend_current=False, remainder=True, cum_diagonal=-1):
    """test_attn.py's ref_fwd, and the layer's remainder; the keyword arguments are the mutations."""
    length = q.shape[2]
    cm = torch.ones(length, length).tril(cum_diagonal).to(q)
    mask = torch.ones(length, length).triu(1 if attend_current else 0).bool()
    o, rem = stickbreaking(q, k, v, mask, cm)
    return o + rem[..., None] * v if remainder else o


# ---- CoPE, ported


def cope_reference(q, k, v, pos_emb, gate_scale=True, divide_after=True, inclusive=True):
    """ContextPosSelfAttn.forward's default path on q, k, v (B, H, T, D) and pos_emb (D, P), the causal mask
    of transformer.py; the keyword arguments are the mutations."""
    head_dim, npos = q.shape[-1], pos_emb.shape[-1]
    length = q.shape[2]
    attn_mask = torch.ones(length, length).tril()
    gate_logits = q @ k.transpose(-1, -2)
    gates = torch.sigmoid(gate_logits / math.sqrt(head_dim) if gate_scale else gate_logits)
    gates = gates * attn_mask
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1)
    if not inclusive:
        positions = positions - gates
    positions = positions.clamp(max=npos - 1)
    pos_logits_fixed = q @ pos_emb
    positions_ceil = positions.ceil().long()
    positions_floor = positions.floor().long()
    pos_logits_ceil = pos_logits_fixed.gather(-1, positions_ceil)
    pos_logits_floor = pos_logits_fixed.gather(-1, positions_floor)
    pos_ceil_weight = positions - positions_floor
    pos_logits = pos_logits_ceil * pos_ceil_weight + pos_logits_floor * (1 - pos_ceil_weight)
    attn_logits = gate_logits
    if divide_after:
        attn_logits = (attn_logits + pos_logits) / math.sqrt(head_dim)
    else:
        attn_logits = attn_logits / math.sqrt(head_dim) + pos_logits
    attn_logits = attn_logits + attn_mask.log()
    return torch.softmax(attn_logits, dim=-1) @ v


# ---- inputs at which each method's own part acts


def inputs(length=300, heads=2, dim=16, seed=0, spread=1.0):
    """q, k, v (2, H, T, D) float64-accurate float32: logits of a few units, so sticks are spent over tens of
    keys and gates sum to fractional positions."""
    torch.manual_seed(seed)
    q, k, v = (torch.randn(2, heads, length, dim) * spread for _ in range(3))
    return q, k, v


def table(dim=16, rows=257, seed=1):
    torch.manual_seed(seed)
    return torch.randn(dim, rows)


def close(a, b, tolerance=1e-5):
    return torch.allclose(a, b, atol=tolerance, rtol=0)


@pytest.mark.parametrize("block_elements", [None, 2 * 16 * 16, 2 * 2 * 40 * 40, 1 << 23])
def test_stick_breaking_kernel_equals_the_reference(block_elements):
    q, k, v = inputs()
    ours = stick_breaking.attention(q, k, v, block_elements)
    assert close(ours, stick_breaking_reference(q, k, v))


def test_each_stick_breaking_mutation_is_far_from_the_kernel():
    q, k, v = inputs()
    ours = stick_breaking.attention(q, k, v, 2 * 2 * 40 * 40)
    for mutation in ({"attend_current": True}, {"remainder": False}, {"cum_diagonal": 0}):
        assert not close(ours, stick_breaking_reference(q, k, v, **mutation), 1e-2), mutation


def test_stick_breaking_stops_only_where_nothing_is_left_to_take():
    """Large logits spend every stick within a few keys: the walk stops early and the output is unchanged."""
    q, k, v = inputs(length=700, spread=3.0)
    assert close(stick_breaking.attention(q, k, v, 2 * 2 * 32 * 32), stick_breaking_reference(q, k, v), 1e-4)


@pytest.mark.parametrize("block_elements", [None, 2 * 16 * 16, 2 * 2 * 40 * 40, 1 << 23])
@pytest.mark.parametrize("flash", [True, False])
def test_cope_kernel_equals_the_reference(monkeypatch, block_elements, flash):
    """Past the keys whose count reaches the table's last row, the rest is plain attention: the CPU flash op,
    or (on other devices) blocks of it."""
    if not flash:
        monkeypatch.setattr(contextual, "flash_usable", lambda query: False)
    plain, calls = contextual._plain, []
    monkeypatch.setattr(contextual, "_plain", lambda *args: calls.append(1) or plain(*args))
    q, k, v = inputs()
    pos_emb = table(rows=40)  # positions past the last row: the clamp acts
    assert close(contextual.attention(q, k, v, pos_emb, block_elements), cope_reference(q, k, v, pos_emb))
    # in blocks of keys, the later rows count past 39 before the first key; in one block nothing is left
    assert bool(calls) == (block_elements is not None)


def test_each_cope_mutation_is_far_from_the_kernel():
    q, k, v = inputs()
    pos_emb = table()
    ours = contextual.attention(q, k, v, pos_emb, 2 * 2 * 40 * 40)
    for mutation in ({"gate_scale": False}, {"divide_after": False}, {"inclusive": False}):
        assert not close(ours, cope_reference(q, k, v, pos_emb, **mutation), 1e-2), mutation
    assert not close(ours, cope_reference(q, k, v, table(rows=40)), 1e-2)  # the clamp


@pytest.mark.parametrize("kernel", ["stick-breaking", "contextual"])
def test_queries_continuing_a_cache_and_grouped_heads_equal_the_full_pass(kernel):
    q, k, v = inputs(heads=4)
    k, v = k[:, :2], v[:, :2]  # two key heads, each serving two query heads
    attend = stick_breaking.attention if kernel == "stick-breaking" else contextual.attention
    extra = () if kernel == "stick-breaking" else (table(),)
    full = attend(q, k, v, *extra, None)
    for tail in (1, 37):
        # float32 sums of 300 gates in another order: 1e-4 of outputs of about 1
        assert close(attend(q[:, :, -tail:], k, v, *extra, 2 * 4 * 32 * 32), full[:, :, -tail:], 1e-4)


@pytest.mark.parametrize("kernel", ["stick-breaking", "contextual"])
def test_gradients_of_the_blocked_kernels_equal_the_references(kernel):
    q, k, v = (t.double().requires_grad_() for t in inputs(length=90))
    if kernel == "stick-breaking":
        ours = stick_breaking.attention(q, k, v, 2 * 2 * 16 * 16)
        theirs = stick_breaking_reference(q, k, v)
        wrt = (q, k, v)
    else:
        pos_emb = table(rows=40).double().requires_grad_()
        ours = contextual.attention(q, k, v, pos_emb, 2 * 2 * 16 * 16)
        theirs = cope_reference(q, k, v, pos_emb)
        wrt = (q, k, v, pos_emb)
    weights = torch.randn_like(ours)
    ours_grads, theirs_grads = (torch.autograd.grad((out * weights).sum(), wrt) for out in (ours, theirs))
    for a, b in zip(ours_grads, theirs_grads):
        assert torch.allclose(a, b, atol=1e-6)  # the stick-breaking reference takes log σ in float32 always


@pytest.mark.parametrize("kernel", ["stick-breaking", "contextual"])
@pytest.mark.parametrize("block_elements", [None, 2 * 2 * 40 * 40])
def test_under_bf16_autocast_the_kernels_are_as_close_as_the_references(kernel, block_elements):
    """Training on a CPU runs under bf16 autocast, which leaves a matmul's output in bf16: CoPE's gates summed
    there are whole numbers past 128 (its interpolation between rows lost), stick-breaking's log σ keeps two
    digits. The references take the logits to float32 (CoPE's by its float32 mask, stick-breaking's by
    `.float()`); the kernels must be about as close to the exact output as they are (largest error at n = 300,
    measured on one CPU: CoPE 0.036 against the reference's 0.046, 0.59 with the gates summed in bf16;
    stick-breaking 0.015 against 0.026, 0.035 with log σ in bf16)."""
    q, k, v = inputs(length=300)
    extra = (table(rows=257),) if kernel == "contextual" else ()
    attend = contextual.attention if kernel == "contextual" else stick_breaking.attention
    reference = cope_reference if kernel == "contextual" else stick_breaking_reference
    exact = reference(*(t.double() for t in (q, k, v, *extra)))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = attend(q, k, v, *extra, block_elements).double()
        theirs = reference(q, k, v, *extra).double()
    assert (ours - exact).abs().max() <= 1.2 * (theirs - exact).abs().max()


class LargestTensor(TorchDispatchMode):
    """The most elements any tensor an operation returns holds."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("name", ["stick-breaking", "cope"])
def test_no_n_by_n_tensor_at_evaluation(name):
    """At n = 4096 keys the largest tensor the kernels make holds one block of scores, a sixteenth of n × n."""
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=2, encoding=name, max_len=64)
    model = TransformerLM(config).eval()
    q, k, v = (torch.randn(1, 2, 4096, 16) for _ in range(3))
    with torch.no_grad(), LargestTensor() as watch:
        causal_attention(q, k, v, model.layer_encodings()[0])
    assert watch.largest <= 2 * 4096 * 4096 // 16  # (B·H) · n² / 16


# ---- the methods inside a model


def tiny_model(name):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding=name, max_len=16)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so the methods' parts matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


def ported_attention(name, model):
    """The project's attention call replaced by the port: the layer's table found by the encoding it passes."""

    def attend(q, k, v, encoding, *_):
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))  # repeat_kv
        if name == "stick-breaking":
            return stick_breaking_reference(q, k, v).to(q.dtype)
        return cope_reference(q, k, v, encoding.table).to(q.dtype)

    return attend


@pytest.mark.parametrize("name", ["stick-breaking", "cope"])
def test_the_model_gives_the_logits_of_the_reference(monkeypatch, name):
    model = tiny_model(name)
    tokens = torch.randint(0, 64, (2, 48))  # past L = 16: CoPE's positions reach its last row
    with torch.no_grad():
        ours = model(tokens)
        cache = model.new_cache()
        model.hidden_states(tokens[:, :40], cache=cache)
        continued = model.lm_head(model.hidden_states(tokens[:, 40:], cache=cache))
        monkeypatch.setattr(model_module, "causal_attention", ported_attention(name, model))
        theirs = model(tokens)
    assert theirs.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)
    assert torch.allclose(continued, theirs[:, 40:], atol=1e-4, rtol=0)


def test_cope_starts_as_nope_and_each_layer_learns_its_own_table():
    model = tiny_model("cope")
    for layer in model.encoding.layers:
        torch.nn.init.zeros_(layer.table)
    nope = tiny_model("nope")
    tokens = torch.randint(0, 64, (2, 24))
    with torch.no_grad():
        assert torch.allclose(model(tokens), nope(tokens), atol=1e-5)
    model.train()
    F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten()).backward()
    grads = [layer.table.grad for layer in model.encoding.layers]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    assert model.encoding.layers[0].table.data_ptr() != model.encoding.layers[1].table.data_ptr()
    assert model.encoding.layers[0].table.shape == (8, 17)  # (head dim, L + 1)


@pytest.mark.parametrize("name,plan", [("stick-breaking", "stick-breaking"), ("cope", "contextual")])
def test_every_device_and_direction_plans_the_methods_own_kernel(name, plan):
    encoding = tiny_model(name).layer_encodings()[0]
    for device in ("cpu", "cuda", "mps"):
        for backward in (False, True):
            for queries in (1, 512):
                assert attention_plan(encoding, "auto", device, torch.float32, queries, 512, backward).name == plan
    assert attention_plan(encoding, "reference", "cpu", torch.float32, 8, 8).name == "reference"
