"""RoPE/NoPE hybrids (`rope-nope`): a model trained with it is transformers' SmolLM3 with the same weights and
`no_rope_layers` (its rule, a NoPE layer where (i + 1) is a multiple of the interval, is Llama 4's too): equal
logits to 1e-4 past the training length; every k-th layer attends with no positions at all."""

import dataclasses

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.encodings import build_encoding
from extrapolate.encodings.absolute import NoPE
from extrapolate.encodings.hybrid import nope_layers
from extrapolate.model import TransformerLM

transformers = pytest.importorskip("transformers")

from extrapolate.data.weight_names import to_hf_names  # noqa: E402


def hybrid_model(every: int, layers: int = 4) -> TransformerLM:
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=layers, n_heads=4, n_kv_heads=2, max_len=16)
    config = dataclasses.replace(config, encoding="rope-nope")
    options = {"nope_every": every}
    encoding = build_encoding("rope-nope", d_model=32, n_heads=4, head_dim=config.head_dim, max_len=16, options=options)
    model = TransformerLM(config, encoding).eval()
    torch.manual_seed(0)
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


@pytest.mark.parametrize("every,layers", [(4, 4), (2, 4), (1, 3)])
def test_the_hybrid_is_transformers_smollm3_with_the_same_no_rope_layers(every, layers):
    ours = hybrid_model(every, layers)
    c = ours.config
    no_rope = [int((i + 1) % every != 0) for i in range(layers)]  # SmolLM3's rule: 1 where the layer rotates
    assert [i for i, rotates in enumerate(no_rope) if not rotates] == nope_layers(layers, every)
    config = transformers.SmolLM3Config(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        intermediate_size=c.ff_dim,
        num_hidden_layers=layers,
        num_attention_heads=c.n_heads,
        num_key_value_heads=c.kv_heads,
        max_position_embeddings=c.max_len,
        rms_norm_eps=c.norm_eps,
        tie_word_embeddings=c.tie_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
        no_rope_layers=no_rope,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    theirs = transformers.SmolLM3ForCausalLM(config).eval()
    missing, unexpected = theirs.load_state_dict(to_hf_names(ours.state_dict()), strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # the tied head is the embedding table
    tokens = torch.randint(0, 64, (2, 5 * c.max_len))  # past the training length
    with torch.no_grad():
        expected = theirs(tokens).logits
        assert expected.abs().max() > 1
        assert torch.allclose(ours(tokens), expected, atol=1e-4, rtol=0)


def test_a_nope_layer_sees_no_position_and_the_others_rotate():
    model = hybrid_model(4)
    kinds = [type(e) for e in model.layer_encodings()]
    assert kinds[3] is NoPE and all(k is not NoPE for k in kinds[:3])
    assert model.encoding.describe() == {"base": 10000.0, "nope_every": 4}
    # one layer, a NoPE one: the last position attends to the set of earlier tokens, in any order
    model = hybrid_model(1, 1)
    tokens = torch.randint(0, 64, (1, 12))
    shuffled = torch.cat([tokens[:, :-1].flip(1), tokens[:, -1:]], dim=1)
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, -1], model(shuffled)[:, -1], atol=1e-5)


def windowed_hybrid(window: int, layers: int = 4) -> TransformerLM:
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=layers, n_heads=4, n_kv_heads=2, max_len=16)
    model = TransformerLM(dataclasses.replace(config, encoding="swa-rope-nope")).eval()
    torch.manual_seed(0)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    if window != 8:
        c = model.config
        options = {"window": window}
        model.set_encoding(
            build_encoding("swa-rope-nope", d_model=32, n_heads=4, head_dim=c.head_dim, max_len=16, options=options)
        )
    return model


@pytest.mark.parametrize("window", [8, 5])
def test_the_windowed_hybrid_is_smollm3_with_sliding_rope_layers_and_full_nope_layers(window):
    """RNoPE-SWA's layout in transformers' SmolLM3: `layer_types` sliding where the layer rotates, full where it
    does not (Cohere2's rule, three sliding layers then a full one); the default window is L/2 = 8."""
    ours = windowed_hybrid(window)
    c = ours.config
    no_rope = [int((i + 1) % 4 != 0) for i in range(4)]
    config = transformers.SmolLM3Config(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        intermediate_size=c.ff_dim,
        num_hidden_layers=4,
        num_attention_heads=c.n_heads,
        num_key_value_heads=c.kv_heads,
        max_position_embeddings=c.max_len,
        rms_norm_eps=c.norm_eps,
        tie_word_embeddings=c.tie_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
        no_rope_layers=no_rope,
        use_sliding_window=True,
        sliding_window=window,
        layer_types=["sliding_attention" if rotates else "full_attention" for rotates in no_rope],
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    theirs = transformers.SmolLM3ForCausalLM(config).eval()
    theirs.load_state_dict(to_hf_names(ours.state_dict()), strict=False)
    tokens = torch.randint(0, 64, (2, 5 * c.max_len))
    with torch.no_grad():
        expected = theirs(tokens).logits
        assert torch.allclose(ours(tokens), expected, atol=1e-4, rtol=0)
        plain = hybrid_model(4)  # the same weights without the window: far from it
        plain.load_state_dict(ours.state_dict())
        assert not torch.allclose(plain(tokens), expected, atol=1e-2)
    assert [getattr(e, "horizon", None) for e in ours.layer_encodings()] == [window, window, window, None]
    assert ours.encoding.describe() == {"base": 10000.0, "nope_every": 4, "window": window}
