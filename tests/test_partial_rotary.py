"""A partial rotation (transformers' partial_rotary_factor < 1, Phi-4-mini's 0.75 on the phi3 family): RoPE
rotates the first int(head_dim · factor) features of each head with frequencies computed for that many, and the
rest pass through. A tiny random Phi-3 checkpoint with heads 16 wide, built by transformers itself, gives
transformers' logits past its original context as released and with every scaling applied; the wrapper rotates
what the inner encoding rotates and leaves the rest alone; what has no partial form is refused by name."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from extrapolate.core.config import ModelConfig  # noqa: E402
from extrapolate.core.errors import UserError  # noqa: E402
from extrapolate.data.families import config_from_hf  # noqa: E402
from extrapolate.data.pretrained import from_hf_model  # noqa: E402
from extrapolate.data.rope_config import hf_rope_parameters, released_rope, replace_rope  # noqa: E402
from extrapolate.encodings import Rotary, encoding_for  # noqa: E402
from extrapolate.encodings.partial import PartialRotary  # noqa: E402
from tests.test_released_checkpoints import logits  # noqa: E402

ORIGINAL = 32  # the original (pretraining) context L
VOCAB = 320
HEAD_DIM = 16  # a width of 64 in 4 heads
FRACTIONS = {0.5: 8, 0.75: 12}  # partial_rotary_factor: the features of each head it rotates


def longrope(rotary_dim: int) -> dict:
    """Phi-3's long-context RoPE for `rotary_dim` rotated features: one factor per rotated pair."""
    pairs = rotary_dim // 2
    return {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.05 * i for i in range(pairs)],
        "long_factor": [1.0 + 1.5 * i for i in range(pairs)],
    }


def phi3(fraction: float, rope: dict, released: int = 4 * ORIGINAL, seed: int = 0):
    """A random Phi-3 checkpoint (Phi-4-mini's shape in small: L = original_max_position_embeddings outside the
    RoPE, released for `released` tokens) rotating `fraction` of each head with RoPE `rope`, weights large enough
    that positions matter in the logits."""
    config = transformers.Phi3Config(
        vocab_size=VOCAB,
        hidden_size=4 * HEAD_DIM,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=released,
        original_max_position_embeddings=ORIGINAL,
        rms_norm_eps=1e-6,
        partial_rotary_factor=fraction,
        rope_parameters={"rope_theta": 500.0, **rope},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = transformers.Phi3ForCausalLM(config)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3) if p.dim() > 1 else torch.nn.init.normal_(p, mean=1.0, std=0.2)
    return model.eval()


def replaced(model, params: dict, released: int):
    """transformers' Phi-3 `model` with `params` as its replaced rope_parameters, its partial rotation kept.
    Phi-3's config accepts the default and longrope types only, so the other types are set on a built config,
    from which its RoPE computes them as any model's (every RoPE function reads partial_rotary_factor)."""
    config = copy.deepcopy(model.config)
    config.rope_parameters = {**params, "partial_rotary_factor": config.rope_parameters["partial_rotary_factor"]}
    config.max_position_embeddings = released
    reference = transformers.Phi3ForCausalLM(config).eval()
    reference.load_state_dict(model.state_dict())
    return reference


ROPES = {"default": lambda rotary_dim: {"rope_type": "default"}, "longrope": longrope}


@pytest.mark.parametrize("fraction", FRACTIONS, ids=[f"rotary-{n}" for n in FRACTIONS.values()])
@pytest.mark.parametrize("rope", ROPES, ids=list(ROPES))
def test_a_partial_rotation_computes_what_transformers_computes_past_its_context(fraction, rope):
    rotary_dim = FRACTIONS[fraction]
    theirs = phi3(fraction, ROPES[rope](rotary_dim))
    ours = from_hf_model(theirs)
    assert ours.config.rotary_dim == rotary_dim and ours.config.head_dim == HEAD_DIM
    assert released_rope(theirs.config).encoding == ("rope" if rope == "default" else "longrope")
    tokens = torch.randint(0, VOCAB, (2, 5 * ORIGINAL))  # past L and past the released context
    expected = logits(theirs, tokens)
    assert expected.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    assert torch.allclose(logits(ours, tokens), expected, atol=1e-4, rtol=0)


SCALINGS = [
    ("rope", 1.0),
    ("pi", 4.0),
    ("dynamic-ntk", 4.0),
    ("ntk", 4.0),
    ("yarn", 4.0),
    ("llama3", 8.0),
    ("longrope", 4.0),
]


@pytest.mark.parametrize("fraction", FRACTIONS, ids=[f"rotary-{n}" for n in FRACTIONS.values()])
@pytest.mark.parametrize("encoding,factor", SCALINGS, ids=[name for name, _ in SCALINGS])
def test_a_scaling_applied_to_a_partial_rotation_replaces_the_released_one(fraction, encoding, factor):
    """The scaling's frequencies are those of the rotated features (`head_dim` = rotary_dim), as every
    transformers RoPE function computes them for a partial rotation."""
    rotary_dim = FRACTIONS[fraction]
    theirs = phi3(fraction, longrope(rotary_dim))
    ours = from_hf_model(theirs)
    ours.set_encoding(encoding_for(ours.config, encoding, factor=factor, original_len=ORIGINAL))
    params = hf_rope_parameters(encoding, ours.config.rope_base, factor, ORIGINAL, head_dim=rotary_dim)
    # transformers' dynamic NTK counts from max_position_embeddings, the other types from the L they are given
    reference = replaced(theirs, params, released=ORIGINAL if encoding == "dynamic-ntk" else 4 * ORIGINAL)
    tokens = torch.randint(0, VOCAB, (1, 3 * ORIGINAL))
    expected = logits(reference, tokens)
    assert expected.abs().max() > 1
    assert torch.allclose(logits(ours, tokens), expected, atol=1e-4, rtol=0)


def test_a_phi4_mini_config_reads_its_rotated_features():
    """Phi-4-mini's config.json form: partial_rotary_factor and `rope_scaling` at the top level, heads 128 wide."""
    config = transformers.Phi3Config.from_dict(
        {
            "model_type": "phi3",
            "hidden_size": 3072,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "intermediate_size": 8192,
            "num_hidden_layers": 2,
            "vocab_size": 200064,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "partial_rotary_factor": 0.75,
            "rope_theta": 10000.0,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48},
            "pad_token_id": 199999,
            "bos_token_id": 199999,
            "eos_token_id": 199999,
        }
    )
    assert config_from_hf(config).rotary_dim == 96
    released = released_rope(config)
    assert (released.encoding, released.factor, released.original_len) == ("longrope", 32.0, 4096)


def test_a_replaced_rope_keeps_the_partial_rotation():
    """An export with a scaling applied: the checkpoint's heads still rotate their first features only."""
    config = phi3(0.75, longrope(12)).config
    replace_rope(config, hf_rope_parameters("yarn", 500.0, 4.0, ORIGINAL, head_dim=12))
    assert config.rope_parameters["rope_type"] == "yarn" and config.rope_parameters["partial_rotary_factor"] == 0.75
    assert config_from_hf(config).rotary_dim == 12


def test_the_whole_head_rotating_leaves_the_config_as_it_was():
    assert config_from_hf(phi3(1.0, {"rope_type": "default"}).config).rotary_dim is None


def rotated(encoding, q, k):
    return encoding.rotate(q, k, torch.arange(q.shape[2]), seq_len=4 * ORIGINAL)


@pytest.mark.parametrize("scaling", ["rope", "yarn", "dynamic-ntk"])
def test_the_partial_rotation_rotates_the_first_features_alone(scaling):
    inner = Rotary(12, scaling, base=500.0, factor=4.0, original_len=ORIGINAL)
    q, k = torch.randn(2, 4, 40, HEAD_DIM), torch.randn(2, 2, 40, HEAD_DIM)  # (B, H, T, Dh), (B, Hkv, T, Dh)
    q_out, k_out = rotated(PartialRotary(inner, 12), q, k)
    q_inner, k_inner = rotated(inner, q[..., :12], k[..., :12])
    assert torch.equal(q_out[..., 12:], q[..., 12:]) and torch.equal(k_out[..., 12:], k[..., 12:])
    assert torch.equal(q_out[..., :12], q_inner) and torch.equal(k_out[..., :12], k_inner)
    assert not torch.allclose(q_out[..., :12], q[..., :12])  # the first features do rotate


def test_a_config_with_a_partial_rotation_builds_every_scaling_for_the_rotated_features():
    config = ModelConfig(d_model=4 * HEAD_DIM, n_heads=4, rotary_dim=12, max_len=ORIGINAL)
    encoding = encoding_for(config, "yarn", factor=4.0)
    assert isinstance(encoding, PartialRotary) and encoding.inner.head_dim == 12
    assert encoding.describe()["rotary_dim"] == 12 and encoding.name == "yarn"
    assert "rotary_dim" not in encoding_for(ModelConfig(d_model=4 * HEAD_DIM, n_heads=4), "yarn").describe()


@pytest.mark.parametrize("name", ["alibi", "nope", "self-extend", "rerope"])
def test_an_encoding_without_a_partial_form_is_refused(name):
    config = ModelConfig(d_model=4 * HEAD_DIM, n_heads=4, rotary_dim=12, max_len=ORIGINAL)
    with pytest.raises(UserError, match=f"{name} does not rotate queries and keys alone"):
        encoding_for(config, name, factor=4.0)


def test_a_partial_rotation_transformers_would_not_compute_is_refused_by_name():
    odd = phi3(0.3125, {"rope_type": "default"})  # 5 of 16 features: RoPE rotates pairs
    with pytest.raises(UserError, match="rotates 5 features of each head"):
        from_hf_model(odd)
    llama = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, rope_parameters={"rope_type": "default", "rope_theta": 500.0}
    )
    llama.rope_parameters["partial_rotary_factor"] = 0.5  # transformers' Llama rotates whole heads
    with pytest.raises(UserError, match="partial_rotary_factor 0.5, which transformers' llama attention"):
        config_from_hf(llama)
