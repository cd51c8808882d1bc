"""`--embed-std`: the token-embedding init std of a model trained here. Unset (GPT-2's 0.02, every weight's
init) it leaves the hash of every model made before the option unchanged; set, it is a new model."""

import dataclasses
import hashlib
import json

import pytest
import torch

from extrapolate.core.config import ModelConfig, config_hash, model_config_from_dict, to_dict
from extrapolate.model import TransformerLM
from extrapolate.run import RunRequest
from extrapolate.run.resolution import architecture_for


def legacy_hash(config: ModelConfig) -> str:
    """The hash as computed before the field existed: the canonical JSON of every other field (the fields
    added after it, the learned table's recipe, query/key/value biases, a head size, query/key norms, a sliding
    window and Gemma's layers, are left out while unset, as the real hash does)."""
    later = {"position_std", "position_lr_scale", "qkv_bias", "head_size", "qk_norm", "sliding_window"}
    later |= {"layer_types", "sliding_rope_base", "embed_multiplier", "norm_unit_offset", "post_norms"}
    later |= {"attention_scalar", "logit_softcap", "attention_softcap", "rotary_dim"}
    data = {k: v for k, v in to_dict(config).items() if k != "embed_std" and not (k in later and v is None)}
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    "encoding,asked",
    [(e, a) for e in ["learned", "rope", "alibi", "t5", "nope", "sinusoidal-randomized"] for a in (None, 0.02)]
    + [("sinusoidal", 0.02)],
)  # sinusoidal's own default is D^-1/2 (test_absolute_recipes)
def test_default_scale_keeps_every_hash(encoding, asked):
    config = architecture_for(RunRequest(encoding=encoding, train_len=256, embed_std=asked), encoding)
    assert config.embed_std is None
    assert config_hash(config) == legacy_hash(config)
    torch.manual_seed(0)
    assert TransformerLM(config).embed.weight.std().item() == pytest.approx(0.02, rel=0.05)


@pytest.mark.parametrize("std", [0.005, 128**-0.5, 0.3])
def test_explicit_scale_sets_the_embeddings_only(std):
    config = architecture_for(RunRequest(encoding="sinusoidal", train_len=256, embed_std=std), "sinusoidal")
    assert config.embed_std == std
    assert config_hash(config) != legacy_hash(config)  # a new recipe is a new model, never a cached old one
    torch.manual_seed(0)
    model = TransformerLM(config)
    assert model.embed.weight.std().item() == pytest.approx(std, rel=0.05)
    assert model.lm_head.weight is model.embed.weight  # the tied head shares the scale
    # every other weight keeps its init
    assert model.blocks[0].attn.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_config_round_trips_with_and_without_the_field():
    config = architecture_for(RunRequest(encoding="rope", train_len=256, embed_std=0.05), "rope")
    assert model_config_from_dict(to_dict(config)) == config
    old_file = {k: v for k, v in to_dict(config).items() if k != "embed_std"}  # a config.json written before it
    assert model_config_from_dict(old_file) == dataclasses.replace(config, embed_std=None)
