"""log-n attention scaling (`--encoding-option logn=true` on any RoPE scaling): Qwen's `logn_attn`, queries at
position p scaled by log_L(p + 1) past L and by 1 within it, as its `logn_list` holds them
(Qwen/Qwen-7B modeling_qwen.py: `[math.log(i, seq_length) if i > seq_length else 1 for i in range(1, …)]`,
indexed by position); the whole query scaled, its unrotated features included; refused where transformers
would have to compute it."""

import math

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.data.rope_config import hf_rope_parameters
from extrapolate.encodings import build_encoding
from extrapolate.encodings.partial import partially_rotated
from extrapolate.model import TransformerLM

L = 32


def qwen_logn_list(seq_length: int, n: int) -> list[float]:
    """Qwen's list, ported: entry p is the factor of the query at position p."""
    return [math.log(i, seq_length) if i > seq_length else 1 for i in range(1, n + 1)]


def make(name="yarn", logn=True, head_dim=16):
    options = {"logn": True} if logn else {}
    return build_encoding(name, d_model=64, n_heads=4, head_dim=head_dim, max_len=L, factor=4.0, options=options)


@pytest.mark.parametrize("name", ["pi", "ntk", "dynamic-ntk", "yarn", "llama3"])
def test_queries_are_scaled_as_qwens_list_says_and_keys_not_at_all(name):
    torch.manual_seed(0)
    q, k, pos = torch.randn(2, 4, 100, 16), torch.randn(2, 2, 100, 16), torch.arange(100)
    with_logn, plain = make(name).rotate(q, k, pos), make(name, logn=False).rotate(q, k, pos)
    expected = torch.tensor(qwen_logn_list(L, 100))[:, None]  # (T, 1)
    assert torch.allclose(with_logn[0], plain[0] * expected, atol=1e-6, rtol=1e-6)
    assert torch.equal(with_logn[1], plain[1])
    assert torch.equal(with_logn[0][:, :, :L], plain[0][:, :, :L])  # within L: RoPE's queries as they are


def test_the_logn_encoding_is_ropes_angles_with_qwens_query_scale():
    """`--encoding logn`: RoPE's own angles (whatever s the sweep passes), the queries scaled as Qwen's list."""
    torch.manual_seed(0)
    q, k, pos = torch.randn(1, 4, 100, 16), torch.randn(1, 2, 100, 16), torch.arange(100)
    logn = build_encoding("logn", d_model=64, n_heads=4, head_dim=16, max_len=L, factor=4.0)
    rope = build_encoding("rope", d_model=64, n_heads=4, head_dim=16, max_len=L)
    (q_logn, k_logn), (q_rope, k_rope) = logn.rotate(q, k, pos), rope.rotate(q, k, pos)
    assert torch.equal(k_logn, k_rope)
    expected = torch.tensor(qwen_logn_list(L, 100))[:, None]
    assert torch.allclose(q_logn, q_rope * expected, atol=1e-6, rtol=1e-6)
    assert logn.describe()["logn"] is True


def test_a_partial_rotation_scales_the_whole_query():
    torch.manual_seed(0)
    q, k, pos = torch.randn(1, 4, 80, 16), torch.randn(1, 2, 80, 16), torch.arange(80)
    rotated, _ = partially_rotated(make(head_dim=8), 8).rotate(q, k, pos)
    factor = torch.tensor(qwen_logn_list(L, 80))[:, None]
    assert torch.allclose(rotated[..., 8:], q[..., 8:] * factor, atol=1e-6)


def test_cached_decoding_equals_one_pass_and_logits_within_L_are_unchanged():
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=64, d_model=64, n_layers=2, n_heads=4, max_len=L)).eval()
    tokens = torch.randint(0, 64, (1, 3 * L))
    with torch.no_grad():
        model.set_encoding(make(logn=False))
        plain = model(tokens)
        model.set_encoding(make())
        full = model(tokens)
        cache = model.new_cache()
        head = model.lm_head(model.hidden_states(tokens[:, :50], cache=cache))
        tail = model.lm_head(model.hidden_states(tokens[:, 50:], cache=cache))
    assert torch.allclose(full[:, :L], plain[:, :L], atol=1e-6)
    assert not torch.allclose(full[:, L:], plain[:, L:], atol=1e-4)
    assert torch.allclose(torch.cat([head, tail], 1), full, atol=1e-5)


def test_transformers_has_no_equivalent_and_says_so():
    with pytest.raises(UserError, match="logn has no transformers equivalent"):
        hf_rope_parameters("yarn", 10000.0, 4.0, L, {"logn": True}, head_dim=16)
    assert make().describe()["logn"] is True and "logn" not in make(logn=False).describe()


def test_run_takes_it_on_a_scaling_and_refuses_it_on_the_trained_rope(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app
    from tests.helpers import make_corpus

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    base = ["run", "--model", "tiny", "--steps", "4", "--train-len", "32", "--eval-lens", "32,64"]
    base += ["--tasks", "perplexity", "--corpus", str(make_corpus(tmp_path / "corpus")), "--eval-tokens", "128"]
    refused = CliRunner().invoke(app, [*base, "--encoding", "rope", "--encoding-option", "logn=true"])
    assert refused.exit_code == 2 and "no encoding asked for (rope) has this option" in refused.output
    taken = CliRunner().invoke(
        app, [*base, "--encoding", "yarn", "--encoding-option", "logn=true", "--out", str(tmp_path)]
    )
    assert taken.exit_code == 0, taken.output
