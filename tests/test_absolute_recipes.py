"""The absolute encodings' training recipes: the learned table's (init std, learning-rate multiplier), its
default, what the optimizer does with it, that GPT-2's recipe keeps the identity older models had; sinusoidal's
token embeddings at D^-1/2; and the per-encoding default budget (sinusoidal trains longer)."""

import dataclasses

import pytest
import torch

from extrapolate.core.config import PRESETS, ModelConfig, TrainConfig, config_hash
from extrapolate.core.defaults import DEFAULT_STEPS, LEARNED_TABLE_LR_SCALE, LEARNED_TABLE_STD, SINUSOIDAL_STEPS
from extrapolate.core.errors import UserError
from extrapolate.data.batches import BatchSource
from extrapolate.model import TransformerLM
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import architecture_for, resolve_request
from extrapolate.training.train import build_model, learning_rate, make_optimizer, train

from .helpers import six_steps


def tiny(**table) -> ModelConfig:
    return ModelConfig(**PRESETS["tiny"], encoding="learned", max_len=32, **table)


def test_the_default_learned_recipe_is_a_zero_table_at_a_tenth_of_the_rate():
    config = architecture_for(RunRequest(encoding="learned", train_len=256), "learned")
    assert (config.position_std, config.position_lr_scale) == (LEARNED_TABLE_STD, LEARNED_TABLE_LR_SCALE) == (0.0, 0.1)
    model = TransformerLM(config)
    assert torch.count_nonzero(model.encoding.table.weight) == 0
    # the other encodings carry no table recipe: their configs (and cached models) are what they were
    assert architecture_for(RunRequest(encoding="rope", train_len=256), "rope").position_std is None


def test_gpt2_recipe_keeps_the_identity_models_had_before_the_recipe_was_a_field():
    gpt2 = architecture_for(
        RunRequest(encoding="learned", train_len=256, position_std=0.02, position_lr_scale=1.0), "learned"
    )
    assert (gpt2.position_std, gpt2.position_lr_scale) == (None, None)
    legacy = ModelConfig(**PRESETS["small"], encoding="learned", max_len=256)
    assert config_hash(gpt2) == config_hash(legacy)
    default = architecture_for(RunRequest(encoding="learned", train_len=256), "learned")
    assert config_hash(default) != config_hash(legacy)
    torch.manual_seed(0)
    table = TransformerLM(tiny()).encoding.table.weight
    assert abs(float(table.detach().std()) - 0.02) < 0.002  # unset: GPT-2's std


def test_the_table_moves_at_its_share_of_the_rate(tmp_path):
    """Adam's first step moves every coordinate with a gradient by the rate itself (m̂/√v̂ = ±1): from a zero
    table, by exactly lr_scale × the scheduled rate, while the other matrices move by the full rate. One step
    of the training loop itself, so both the optimizer's groups and the loop's per-group rate are pinned."""
    config = TrainConfig(
        model=tiny(position_std=0.0, position_lr_scale=0.1),
        corpus="test",
        seq_len=32,
        batch_size=4,
        steps=1,
        warmup_steps=1,
        lr=1e-2,
    )
    assert [g.get("lr_scale", 1.0) for g in make_optimizer(TransformerLM(config.model), config).param_groups] == [
        1.0,
        1.0,
        0.1,
    ]
    before = build_model(config, torch.device("cpu")).blocks[0].attn.q_proj.weight.detach()  # the loop's start
    torch.manual_seed(0)
    source = BatchSource(torch.randint(0, 256, (5000,)), config.seq_len, config.batch_size, config.seed)
    model = train(config, source, torch.device("cpu"), folder=tmp_path / "m").model
    assert learning_rate(config, 0) == 1e-2
    table = model.encoding.table.weight.detach()  # (32, D)
    # (a coordinate whose gradient is near Adam's eps moves a little less: the median is the rate itself)
    assert torch.count_nonzero(table) > 0.9 * table.numel() and float(table.abs().max()) <= 1e-3 * (1 + 1e-5)
    assert float(table.abs().median()) == pytest.approx(1e-3, rel=1e-4)
    step = (model.blocks[0].attn.q_proj.weight.detach() - before).abs()  # the full rate (decay: lr·wd·w < 1e-5)
    assert float(step.median()) == pytest.approx(1e-2, rel=1e-3)


def test_training_with_the_recipe_resumes_bit_for_bit(tmp_path):
    config = six_steps(tiny(position_std=0.0, position_lr_scale=0.1))
    torch.manual_seed(0)
    source = BatchSource(torch.randint(0, 256, (5000,)), config.seq_len, config.batch_size, config.seed)
    full = train(config, source, torch.device("cpu"), folder=tmp_path / "a")
    train(config, source, torch.device("cpu"), folder=tmp_path / "b", stop_after=3)
    resumed = train(config, source, torch.device("cpu"), folder=tmp_path / "b")
    assert full.summary["losses"] == resumed.summary["losses"]
    assert torch.equal(full.model.encoding.table.weight, resumed.model.encoding.table.weight)


@pytest.mark.parametrize(
    "table",
    [
        dict(position_std=-1.0),
        dict(position_std=float("nan")),
        dict(position_lr_scale=0.0),
        dict(position_lr_scale=float("inf")),
    ],
)
def test_a_recipe_outside_its_domain_is_refused(table):
    with pytest.raises(UserError, match="--position"):
        tiny(**table).validate()


def test_the_reference_suite_pins_gpt2s_recipe_so_its_committed_learned_model_is_unchanged():
    from extrapolate.reproduce import load_suite

    request = dataclasses.replace(load_suite("reference").request, encoding="learned")
    config = architecture_for(request, "learned")
    assert (config.position_std, config.position_lr_scale) == (None, None)
    assert config_hash(config) == config_hash(ModelConfig(**PRESETS["tiny"], encoding="learned", max_len=128))


@pytest.mark.parametrize(
    "encoding,steps",
    [
        ("sinusoidal", SINUSOIDAL_STEPS),
        ("learned", DEFAULT_STEPS),
        ("rope", DEFAULT_STEPS),
        ("yarn", DEFAULT_STEPS),
        ("alibi", DEFAULT_STEPS),
    ],
)
def test_each_encoding_trains_its_own_default_budget_unless_steps_is_given(encoding, steps):
    assert (SINUSOIDAL_STEPS, DEFAULT_STEPS) == (2400, 1200)
    assert resolve_request(RunRequest(encoding=encoding)).steps == steps  # a scaling: the RoPE model's budget
    assert resolve_request(RunRequest(encoding=encoding, steps=7)).steps == 7


@pytest.mark.parametrize("width", [None, 64, 200])
def test_sinusoidal_token_embeddings_start_at_the_inverse_square_root_of_the_width(width):
    config = architecture_for(RunRequest(encoding="sinusoidal", train_len=256, width=width, heads=4), "sinusoidal")
    assert config.embed_std == config.d_model**-0.5 == (width or PRESETS["small"]["d_model"]) ** -0.5
    torch.manual_seed(0)
    model = TransformerLM(config)
    assert float(model.embed.weight.detach().std()) == pytest.approx(config.d_model**-0.5, rel=0.05)
    # the table then starts at 0.7 of the tokens (RMS D^-1/2 · 0.707 against D^-1/2), not three times them
    table = model.encoding.embed(torch.zeros(1, 512, config.d_model), torch.arange(512))  # (1, 512, D)
    assert float(table.pow(2).mean().sqrt() / model.embed.weight.detach().pow(2).mean().sqrt()) == pytest.approx(
        0.5**0.5, rel=0.06
    )
    # an explicit --embed-std wins; GPT-2's 0.02 is the sinusoidal model every earlier release trained
    legacy = ModelConfig(
        **{**PRESETS["small"], **({"d_model": width, "n_heads": 4} if width else {"n_heads": 4})},
        encoding="sinusoidal",
        max_len=256,
    )
    gpt2 = architecture_for(
        RunRequest(encoding="sinusoidal", train_len=256, width=width, heads=4, embed_std=0.02), "sinusoidal"
    )
    assert gpt2.embed_std is None and config_hash(gpt2) == config_hash(legacy) != config_hash(config)


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "learned", "nope", "sinusoidal-randomized", "yarn"])
def test_only_sinusoidal_changes_the_token_embeddings_default(encoding):
    from extrapolate.encodings import get_spec

    assert (
        architecture_for(RunRequest(encoding=encoding, train_len=256), get_spec(encoding).base_encoding).embed_std
        is None
    )


def test_the_reference_suite_keeps_its_sinusoidal_model():
    from extrapolate.reproduce import load_suite

    request = dataclasses.replace(load_suite("reference").request, encoding="sinusoidal")
    config = architecture_for(request, "sinusoidal")
    assert config.embed_std is None
    assert config_hash(config) == config_hash(ModelConfig(**PRESETS["tiny"], encoding="sinusoidal", max_len=128))
