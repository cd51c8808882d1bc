"""Exactness against an independent implementation: a small random Llama saved locally (no hub), loaded
into the project's model, gives the logits of transformers' own model under every matching RoPE type."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from extrapolate.encodings import build_encoding  # noqa: E402
from extrapolate.export import export_hf  # noqa: E402
from extrapolate.pretrained import from_hf_model, hf_rope_parameters  # noqa: E402

ORIGINAL = 32


def llama_config(rope_parameters, max_positions=ORIGINAL):
    return transformers.LlamaConfig(
        vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=max_positions, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters=rope_parameters, attn_implementation="eager",
    )


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config({"rope_type": "default", "rope_theta": 500.0}))
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else None
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder)
    return folder


def random_longrope_factors(seed=0, pairs=8):
    generator = torch.Generator().manual_seed(seed)
    return {"short_factor": (1 + 0.5 * torch.rand(pairs, generator=generator)).tolist(),
            "long_factor": (1 + 7 * torch.rand(pairs, generator=generator)).tolist()}


@pytest.mark.parametrize("encoding,factor,options,length", [
    ("rope", 1.0, {}, 3 * ORIGINAL), ("pi", 4.0, {}, 3 * ORIGINAL), ("dynamic-ntk", 4.0, {}, 3 * ORIGINAL),
    ("yarn", 4.0, {}, 3 * ORIGINAL), ("llama3", 4.0, {}, 3 * ORIGINAL),
    ("longrope", 4.0, {}, 3 * ORIGINAL),  # the default factor lists
    ("longrope", 4.0, random_longrope_factors(), 3 * ORIGINAL),  # long factors past L
    ("longrope", 4.0, random_longrope_factors(), ORIGINAL),  # short factors up to L; the attention factor still
])
def test_logits_equal_transformers_past_the_original_context(saved_llama, encoding, factor, options, length):
    reference = transformers.LlamaForCausalLM.from_pretrained(saved_llama, torch_dtype=torch.float32)
    ours = from_hf_model(reference)
    config = ours.config
    ours.set_encoding(build_encoding(encoding, d_model=config.d_model, n_heads=config.n_heads, head_dim=config.head_dim,
                                     max_len=ORIGINAL, base=config.rope_base, factor=factor, original_len=ORIGINAL,
                                     options=options))
    rope = hf_rope_parameters(encoding, config.rope_base, factor, ORIGINAL, options, head_dim=config.head_dim)
    theirs = transformers.LlamaForCausalLM(llama_config(rope)).eval()
    theirs.load_state_dict(reference.state_dict())
    tokens = torch.randint(0, 97, (2, length))
    with torch.no_grad():
        expected = theirs(tokens).logits
        got = ours(tokens)
    assert torch.allclose(got, expected, atol=1e-4, rtol=0), (got - expected).abs().max()


def test_export_round_trip(tmp_path):
    from extrapolate.config import ModelConfig
    from extrapolate.model import TransformerLM

    torch.manual_seed(1)
    model = TransformerLM(ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=16)).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    export_hf(model, tmp_path / "hf")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    tokens = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        assert torch.allclose(loaded(tokens).logits, model(tokens), atol=1e-4, rtol=0)
