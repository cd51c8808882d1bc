"""The token-embedding scale of a model trained here: sinusoidal models start at tensor2tensor's D^-1/2 (the
table at 0.7 of the tokens), every other encoding at GPT-2's 0.02; the field leaves the hash of every model
made before it unchanged."""

import dataclasses
import hashlib
import json

import pytest
import torch

from extrapolate.config import ModelConfig, config_hash, model_config_from_dict, to_dict
from extrapolate.model import TransformerLM
from extrapolate.run import RunRequest
from extrapolate.run.request import model_config


def legacy_hash(config: ModelConfig) -> str:
    """The hash as computed before the field existed: the canonical JSON of every other field."""
    data = {k: v for k, v in to_dict(config).items() if k != "embed_std"}
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


@pytest.mark.parametrize("encoding", ["rope", "alibi", "learned", "t5", "nope"])
def test_other_encodings_keep_gpt2_scale_and_their_hash(encoding):
    config = model_config(RunRequest(encoding=encoding, train_len=256), encoding)
    assert config.embed_std is None
    assert config_hash(config) == legacy_hash(config)
    std = TransformerLM(config).embed.weight.std().item()
    assert std == pytest.approx(0.02, rel=0.05)


@pytest.mark.parametrize("width", [64, 128, 256])
def test_sinusoidal_starts_at_tensor2tensor_scale(width):
    config = model_config(RunRequest(encoding="sinusoidal", train_len=256, width=width), "sinusoidal")
    assert config.embed_std == pytest.approx(width**-0.5)
    assert config_hash(config) != legacy_hash(config)  # a new recipe is a new model, never a cached old one
    torch.manual_seed(0)
    model = TransformerLM(config)
    assert model.embed.weight.std().item() == pytest.approx(width**-0.5, rel=0.05)
    assert model.lm_head.weight is model.embed.weight  # the tied head shares the scale
    # every other weight keeps its init: the blocks start as in a model at the old scale
    assert model.blocks[0].attn.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_explicit_embed_std_wins_and_gpt2_value_is_the_old_model():
    old = model_config(RunRequest(encoding="sinusoidal", train_len=256, embed_std=0.02), "sinusoidal")
    assert old.embed_std is None and config_hash(old) == legacy_hash(old)
    wide = model_config(RunRequest(encoding="rope", train_len=256, embed_std=0.05), "rope")
    assert wide.embed_std == 0.05 and config_hash(wide) != legacy_hash(wide)


def test_config_round_trips_with_and_without_the_field():
    config = model_config(RunRequest(encoding="sinusoidal", train_len=256), "sinusoidal")
    assert model_config_from_dict(to_dict(config)) == config
    old_file = {k: v for k, v in to_dict(config).items() if k != "embed_std"}  # a config.json written before it
    assert model_config_from_dict(old_file) == dataclasses.replace(config, embed_std=None)
