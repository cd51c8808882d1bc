"""Each rule of extrapolate/core/identity.py on its own: what enters a model's hash, a run's id, a task file's
identity and a cache folder's name. Each test compares with the identity the same thing has without the
rule's option (the hash of a config that lacks the field, or a value written down here), so a rule dropped or
changed fails here, with its name, before it moves a committed run id or cache folder
(tests/test_identities.py pins whole cells)."""

import dataclasses
import fnmatch
import hashlib
import json

import pytest

from extrapolate.core.config import (
    PRESETS,
    LongCEConfig,
    ModelConfig,
    TrainConfig,
    canonical_json,
    config_hash,
    to_dict,
)
from extrapolate.core.defaults import DEFAULT_STEPS, SINUSOIDAL_STEPS
from extrapolate.core.identity import CHANGED_DEFAULTS, UNSET_MEANS, finetune_folder_name, pretrained_identity, stored
from extrapolate.encodings import encoding_for
from extrapolate.run import resolution as request_module
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import architecture_for, resolve_request
from extrapolate.run.resolved import run_id
from extrapolate.tasks.files import load_task
from extrapolate.training.finetune import finetune_config, finetune_folder
from extrapolate.training.train import model_folder


def hash_without_optional_fields(config) -> str:
    """The hash of `config` as a config without the optional fields hashes: their keys are not in its JSON."""
    data = {k: v for k, v in to_dict(config).items() if k not in UNSET_MEANS}
    if "model" in data:
        data["model"] = {k: v for k, v in data["model"].items() if k not in UNSET_MEANS}
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def test_the_optional_fields_and_what_unset_means():
    assert UNSET_MEANS == {
        "embed_std": 0.02,
        "position_std": 0.02,
        "position_lr_scale": 1.0,
        "qkv_bias": False,
        "head_size": None,
        "qk_norm": False,
        "sliding_window": None,
        "layer_types": None,
        "sliding_rope_base": None,
        "embed_multiplier": 1.0,
        "norm_unit_offset": False,
        "post_norms": False,
        "attention_scalar": None,
        "logit_softcap": None,
        "attention_softcap": None,
        "rotary_dim": None,
        "compile": False,
        "processes": 1,
        "adapter": None,
        "curriculum": None,
        "longce": None,
        "pose_len": None,
    }


def test_a_model_trained_without_a_curriculum_hashes_as_before_curricula_existed():
    """Below CURRICULUM_FROM (every committed model trained here) a request resolves to no curriculum, stored as
    None, which the canonical form leaves out; one with stages is another model."""
    config = TrainConfig(model=ModelConfig(**PRESETS["tiny"]), seq_len=256)
    assert config.curriculum is None and config_hash(config) == hash_without_optional_fields(config)
    assert config_hash(dataclasses.replace(config, curriculum=((128, 10),))) != config_hash(config)


def test_a_cross_entropy_fine_tune_hashes_as_before_longce_existed():
    """A fine-tune without LongCE stores `longce` as None, which its canonical form leaves out (every committed
    fine-tune's hash stays); LongCE's weights make another model, each setting its own."""
    base = TrainConfig(model=ModelConfig(**PRESETS["tiny"]), seq_len=32)
    plain = finetune_config(base, "yarn", 4.0, 128, 10)
    assert plain.phase.longce is None and '"longce"' not in canonical_json(plain)
    weighted = finetune_config(base, "yarn", 4.0, 128, 10, longce=LongCEConfig(32, 8))
    other = finetune_config(base, "yarn", 4.0, 128, 10, longce=LongCEConfig(32, 8, 2.0))
    assert len({config_hash(plain), config_hash(weighted), config_hash(other)}) == 3


def test_a_fine_tune_of_contiguous_rows_hashes_as_before_pose_existed():
    """A fine-tune that reads rows of L' stores `pose_len` as None, which its canonical form leaves out: its hash
    is that of the config's JSON without the key (every committed fine-tune's)."""
    base = TrainConfig(model=ModelConfig(**PRESETS["tiny"]), seq_len=32)
    plain = finetune_config(base, "yarn", 4.0, 128, 10)
    as_before = {k: v for k, v in dataclasses.asdict(plain).items() if k != "pose_len"}
    assert config_hash(plain) == config_hash(as_before)
    posed = finetune_config(base, "yarn", 4.0, 128, 10, pose=True)
    assert config_hash(posed) != config_hash(plain) and posed.length == plain.length == 128
    assert posed.phase.seq_len == 32 and posed.phase.batch_size == base.batch_size


def test_a_full_fine_tune_hashes_as_before_adapters_existed():
    """A fine-tune without adapters stores `adapter` as None, which its canonical form leaves out."""
    import json

    from extrapolate.core.config import canonical_json

    assert "adapter" not in json.loads(canonical_json(TrainConfig(model=ModelConfig())))


@pytest.mark.parametrize(
    "config",
    [ModelConfig(), ModelConfig(**PRESETS["tiny"], encoding="learned", max_len=32), TrainConfig(model=ModelConfig())],
    ids=["model", "learned", "training"],
)
def test_an_unset_optional_field_is_left_out_of_the_hash(config):
    assert config_hash(config) == hash_without_optional_fields(config)


def test_a_pretrained_architecture_field_enters_the_hash_only_when_set():
    """A head size or query/key norms set (Qwen3) make another model; unset, the hash is the one without them."""
    plain = ModelConfig()
    assert config_hash(dataclasses.replace(plain, head_size=None, qk_norm=None)) == config_hash(plain)
    assert config_hash(dataclasses.replace(plain, qk_norm=True)) != config_hash(plain)
    assert config_hash(dataclasses.replace(plain, head_size=64)) != config_hash(plain)


def in_training(field: str, value):
    """A training config with `field` (of the training, of its model or of a fine-tune's) set to `value`."""
    from extrapolate.training.finetune import FinetuneConfig

    if field in {f.name for f in dataclasses.fields(FinetuneConfig)}:
        plain = finetune_config(TrainConfig(model=ModelConfig()), "yarn", 4.0, 4096, 10)
        return dataclasses.replace(plain, **{field: value})
    if field in {f.name for f in dataclasses.fields(TrainConfig)}:
        return TrainConfig(model=ModelConfig(), **{field: value})
    return TrainConfig(model=ModelConfig(**{field: value}))


@pytest.mark.parametrize("field", sorted(UNSET_MEANS))
def test_an_optional_field_at_what_unset_means_is_stored_unset(field):
    """Asked for explicitly, the value unset means is the model asked for without it; any other is another."""
    unset = config_hash(in_training(field, None))
    assert stored(field, UNSET_MEANS[field]) is None
    assert config_hash(in_training(field, stored(field, UNSET_MEANS[field]))) == unset
    other = True if isinstance(UNSET_MEANS[field], bool) else 0.5
    assert config_hash(in_training(field, stored(field, other))) != unset


def test_a_model_asked_for_with_gpt2s_recipe_is_the_preset_model():
    asked = RunRequest(
        encoding="learned", model="small", train_len=256, embed_std=0.02, position_std=0.02, position_lr_scale=1.0
    )
    preset = ModelConfig(**PRESETS["small"], encoding="learned", max_len=256)
    assert config_hash(architecture_for(asked, "learned")) == config_hash(preset)


def test_an_unset_learned_table_recipe_is_built_as_gpt2s():
    config = ModelConfig(**PRESETS["tiny"], encoding="learned", max_len=32)
    assert (encoding_for(config).std, encoding_for(config).lr_scale) == (0.02, 1.0)
    recipe = encoding_for(dataclasses.replace(config, position_std=0.0, position_lr_scale=0.1))
    assert (recipe.std, recipe.lr_scale) == (0.0, 0.1)


def test_a_rope_scaling_trains_with_ropes_budget(monkeypatch):
    """The default budget is that of the encoding the model trains with: every RoPE scaling asks for RoPE's,
    and so for the one RoPE model (a budget of RoPE's own stands in for the shared default here)."""
    real = request_module.get_spec

    def with_rope_budget(name):
        spec = real(name)
        return dataclasses.replace(spec, default_steps=777) if spec.name == "rope" else spec

    monkeypatch.setattr(request_module, "get_spec", with_rope_budget)
    for encoding in ("rope", "pi", "ntk", "yarn"):
        assert resolve_request(RunRequest(encoding=encoding, model="small")).steps == 777
    assert resolve_request(RunRequest(encoding="sinusoidal", model="small")).steps == SINUSOIDAL_STEPS
    assert resolve_request(RunRequest(encoding="alibi", model="small")).steps == DEFAULT_STEPS


def test_a_pretrained_models_hash_is_that_of_its_name():
    assert config_hash(pretrained_identity("meta-llama/Llama-2-7b-hf")) == "1660b1ac5f8e"


MODEL = "c5db78c5929f"
# a resolved perplexity run with full windows; every field a run id may hold is given, so a changed default of
# RunRequest changes nothing here
PERPLEXITY = RunRequest(
    encoding="rope",
    train_len=256,
    protocol="full",
    stride=256,
    dtype="float32",
    eval_tokens=8192,
    learned_policy="error",
    tasks=("perplexity",),
    passkey_task="passkey-word",
    encoding_options=(),
)


def measured_fields(**changes) -> dict:
    """The fields a perplexity run id hashes, spelled out: the PERPLEXITY request's, with `changes`."""
    fields = {
        "model": MODEL,
        "encoding": "rope",
        "factor": 1.0,
        "protocol": "full",
        "stride": None,
        "dtype": "float32",
        "eval_tokens": 8192,
        "learned_policy": "error",
        "passkey_task": None,
    }
    return {**fields, **changes}


def test_a_run_id_is_the_hash_of_its_model_and_what_changes_a_measurement():
    assert run_id(PERPLEXITY, MODEL, 1.0) == config_hash(measured_fields(), 10) == "5ed2056568"


def test_the_stride_counts_only_under_the_sliding_protocol():
    assert run_id(dataclasses.replace(PERPLEXITY, stride=64), MODEL, 1.0) == "5ed2056568"
    sliding = dataclasses.replace(PERPLEXITY, protocol="sliding", stride=128)
    assert run_id(sliding, MODEL, 1.0) == "d24cd57eab" != run_id(dataclasses.replace(sliding, stride=64), MODEL, 1.0)


def test_the_retrieval_task_counts_only_when_retrieval_is_scored():
    assert run_id(dataclasses.replace(PERPLEXITY, passkey_task="passkey"), MODEL, 1.0) == "5ed2056568"
    scored = dataclasses.replace(PERPLEXITY, tasks=("perplexity", "needle"))  # as a resolved request names kinds
    assert run_id(scored, MODEL, 1.0) == "9d1a3e8c04"
    assert run_id(dataclasses.replace(scored, passkey_task="passkey"), MODEL, 1.0) != "9d1a3e8c04"


def test_longppls_settings_count_only_when_longppl_is_measured():
    """LongPPL's short context, window and evaluator change no perplexity or retrieval row: a run that does not
    measure LongPPL keeps its id whatever they are; one that does has an id for each setting (the authors'
    4096/1024 without an evaluator giving none of its own)."""
    given = dataclasses.replace(PERPLEXITY, longppl_short=256, longppl_window=64, evaluator="smollm2-135m")
    assert run_id(given, MODEL, 1.0) == "5ed2056568"
    measured = dataclasses.replace(PERPLEXITY, tasks=("perplexity", "longppl"))
    ids = {
        run_id(dataclasses.replace(measured, **change), MODEL, 1.0)
        for change in ({}, {"longppl_short": 256}, {"longppl_short": 256, "evaluator": "smollm2-135m"})
    }
    assert len(ids) == 3 and run_id(measured, MODEL, 1.0) == config_hash(measured_fields(), 10)


def test_encoding_options_count_only_when_given():
    extended = dataclasses.replace(PERPLEXITY, encoding="self-extend")
    given = dataclasses.replace(extended, encoding_options=(("group", 2), ("window", 8)))
    assert run_id(given, MODEL, 2.0) == "1deaf32ac0"
    fields = measured_fields(encoding="self-extend", factor=2.0)
    assert run_id(extended, MODEL, 2.0) == config_hash(fields, 10)


def test_a_changed_default_keeps_the_earlier_rows_ids_and_gives_the_new_default_its_own():
    """STRING's attention factor: rows measured before it (factor 1) keep their ids, given as 1 or not given
    before; a run at the new default (0.1·ln 2 + 1) is another cell, holding the factor it measures at."""
    from extrapolate.encodings.string import ATTENTION_FACTOR

    assert CHANGED_DEFAULTS[("string", "attention_factor")] == (1.0, ATTENTION_FACTOR)
    string = dataclasses.replace(PERPLEXITY, encoding="string")
    earlier = config_hash(measured_fields(encoding="string", factor=2.0), 10)
    off = dataclasses.replace(string, encoding_options=(("attention_factor", 1.0),))
    assert run_id(off, MODEL, 2.0) == earlier
    now = config_hash(
        measured_fields(encoding="string", factor=2.0, options={"attention_factor": ATTENTION_FACTOR}), 10
    )
    assert run_id(string, MODEL, 2.0) == now != earlier
    given = dataclasses.replace(string, encoding_options=(("attention_factor", ATTENTION_FACTOR),))
    assert run_id(given, MODEL, 2.0) == now


def test_optional_task_fields_at_their_defaults_are_left_out_of_its_identity():
    task = load_task("passkey-word")  # word keys: names, needles, queries, same_name, … at their defaults
    defaults = {"names", "needles", "queries", "same_name", "answer_join", "depth_floor"}
    # key_digits has no declared default: always kept (0 with word keys)
    fields = {k: v for k, v in task.__dict__.items() if k not in defaults}
    assert fields["key_digits"] == 0
    assert task.identity == f"passkey-word-v2-compact-{config_hash(fields, 8)}" == "passkey-word-v2-compact-4e10e294"
    assert dataclasses.replace(task, depth_floor=0.5).identity != task.identity


def test_cache_folders_are_named_by_encoding_length_and_hash(tmp_path):
    config = TrainConfig(model=ModelConfig(encoding="alibi", max_len=32), seq_len=32)
    assert model_folder(config, tmp_path).name == f"alibi-L32-{config_hash(config)}"
    tuned = finetune_config(config, "alibi", 1.0, 64, 25)
    assert finetune_folder(tuned, tmp_path).name == f"alibi-L32-ft64x25-{config_hash(tuned)}"
    # the pattern a fine-tune looks for shorter finished ones of its kind with
    assert fnmatch.fnmatch(finetune_folder(tuned).name, finetune_folder_name("alibi", 32, 64, "*", "*"))
