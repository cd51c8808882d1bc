"""Exactness against an independent implementation: a small random Llama saved locally (no hub), loaded
into the project's model, gives the logits of transformers' own model under every matching RoPE type."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from extrapolate.data.pretrained import from_hf_model  # noqa: E402
from extrapolate.data.rope_config import hf_rope_parameters  # noqa: E402
from extrapolate.encodings import build_encoding  # noqa: E402
from extrapolate.run.export import export_hf  # noqa: E402

ORIGINAL = 32


def small_config(family: str = "Llama", **options):
    """A two-layer config of a transformers family (grouped queries, untied), computed eagerly."""
    defaults = dict(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=ORIGINAL,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return getattr(transformers, f"{family}Config")(**{**defaults, **options})


def llama_config(rope_parameters, max_positions=ORIGINAL):
    return small_config(max_position_embeddings=max_positions, rms_norm_eps=1e-6, rope_parameters=rope_parameters)


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
    return {
        "short_factor": (1 + 0.5 * torch.rand(pairs, generator=generator)).tolist(),
        "long_factor": (1 + 7 * torch.rand(pairs, generator=generator)).tolist(),
    }


@pytest.mark.parametrize(
    "encoding,factor,options,length",
    [
        ("rope", 1.0, {}, 3 * ORIGINAL),
        ("pi", 4.0, {}, 3 * ORIGINAL),
        ("dynamic-ntk", 4.0, {}, 3 * ORIGINAL),
        ("yarn", 4.0, {}, 3 * ORIGINAL),
        ("llama3", 4.0, {}, 3 * ORIGINAL),
        ("longrope", 4.0, {}, 3 * ORIGINAL),  # the default factor lists
        ("longrope", 4.0, random_longrope_factors(), 3 * ORIGINAL),  # long factors past L
        ("longrope", 4.0, random_longrope_factors(), ORIGINAL),  # short factors up to L; the attention factor still
    ],
)
def test_logits_equal_transformers_past_the_original_context(saved_llama, encoding, factor, options, length):
    reference = transformers.LlamaForCausalLM.from_pretrained(saved_llama, torch_dtype=torch.float32)
    ours = from_hf_model(reference)
    config = ours.config
    ours.set_encoding(
        build_encoding(
            encoding,
            d_model=config.d_model,
            n_heads=config.n_heads,
            head_dim=config.head_dim,
            max_len=ORIGINAL,
            base=config.rope_base,
            factor=factor,
            original_len=ORIGINAL,
            options=options,
        )
    )
    rope = hf_rope_parameters(encoding, config.rope_base, factor, ORIGINAL, options, head_dim=config.head_dim)
    theirs = transformers.LlamaForCausalLM(llama_config(rope)).eval()
    theirs.load_state_dict(reference.state_dict())
    tokens = torch.randint(0, 97, (2, length))
    with torch.no_grad():
        expected = theirs(tokens).logits
        got = ours(tokens)
    assert torch.allclose(got, expected, atol=1e-4, rtol=0), (got - expected).abs().max()


def test_export_round_trip(tmp_path):
    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM

    torch.manual_seed(1)
    model = TransformerLM(
        ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=16)
    ).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    export_hf(model, tmp_path / "hf")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    tokens = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        assert torch.allclose(loaded(tokens).logits, model(tokens), atol=1e-4, rtol=0)


@pytest.mark.parametrize("encoding", ["pi", "ntk", "dynamic-ntk", "yarn", "llama3", "longrope"])
def test_an_exported_training_free_scaling_computes_what_the_run_evaluated(tmp_path, encoding):
    """A run that evaluated a RoPE model with a scaling and no training (its record's `encoding`) exports with
    that scaling: transformers' logits past L equal the scaled model's here."""
    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM

    torch.manual_seed(1)
    model = TransformerLM(
        ModelConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=ORIGINAL, rope_base=500.0)
    ).eval()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    config = model.config
    model.set_encoding(
        build_encoding(
            encoding,
            d_model=64,
            n_heads=4,
            head_dim=config.head_dim,
            max_len=ORIGINAL,
            base=500.0,
            factor=4.0,
            original_len=ORIGINAL,
        )
    )
    record = {"name": encoding, **model.encoding.describe()}  # as a run record keeps it
    export_hf(model, tmp_path / "hf", scaling=record)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    tokens = torch.randint(0, 256, (1, 3 * ORIGINAL))
    with torch.no_grad():
        assert torch.allclose(loaded(tokens).logits, model(tokens), atol=1e-4, rtol=0)


def randomized(model):
    torch.manual_seed(0)
    for p in model.parameters():  # biases too: a dropped bias must change the logits
        torch.nn.init.normal_(p, std=0.2)
    return model.eval()


def test_a_qwen2_checkpoint_keeps_its_query_key_value_biases():
    config = small_config("Qwen2")
    theirs = randomized(transformers.Qwen2ForCausalLM(config))
    assert any(name.endswith("q_proj.bias") for name in theirs.state_dict())
    ours = from_hf_model(theirs)
    tokens = torch.randint(0, 97, (1, 2 * ORIGINAL))
    with torch.no_grad():
        assert torch.allclose(ours(tokens), theirs(tokens).logits, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "model_class,extra,message",
    [
        ("LlamaForCausalLM", {"attention_bias": True}, "attention_bias"),
        ("LlamaForCausalLM", {"mlp_bias": True}, "mlp_bias"),
    ],
)
def test_a_checkpoint_the_model_would_compute_differently_is_refused(model_class, extra, message):
    """Biases with no place: evaluated here they would be another model (each differs from transformers' logits
    by 0.03 to 0.8 on these small models), so they are refused by name."""
    from extrapolate.core.errors import UserError

    family = model_class.removesuffix("ForCausalLM")
    options = dict(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=1,
        num_attention_heads=4,
        max_position_embeddings=2 * ORIGINAL,
        attn_implementation="eager",
    )
    theirs = getattr(transformers, model_class)(getattr(transformers, f"{family}Config")(**options, **extra))
    with pytest.raises(UserError, match=message):
        from_hf_model(theirs)


def test_a_mistral_checkpoint_without_a_window_loads_exactly():
    config = small_config("Mistral", sliding_window=None)
    theirs = randomized(transformers.MistralForCausalLM(config))
    tokens = torch.randint(0, 97, (1, 2 * ORIGINAL))
    with torch.no_grad():
        assert torch.allclose(from_hf_model(theirs)(tokens), theirs(tokens).logits, atol=1e-4, rtol=0)
