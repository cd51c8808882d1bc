"""A length curriculum: a model trained at a long L first reads shorter rows (as many tokens a step), then rows of
L. The short steps change the batches they cover and nothing else; L below CURRICULUM_FROM trains as before (the
same batches, the same model identity); a fine-tune reads rows of L' from its first step."""

import dataclasses

import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import (
    PRESETS,
    ModelConfig,
    TrainConfig,
    canonical_json,
    config_hash,
    train_config_from_dict,
)
from extrapolate.core.defaults import CURRICULUM_FROM, DEFAULT_STEPS
from extrapolate.core.errors import UserError
from extrapolate.data.batches import BatchSource, Curriculum
from extrapolate.run.curriculum import curriculum_stages, default_stages
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import resolve_request
from extrapolate.training.finetune import finetune_config
from extrapolate.training.train import curriculum_of

TINY = ModelConfig(encoding="rope", vocab_size=256, max_len=4096, **PRESETS["tiny"])
STREAM = torch.arange(50_000) % 251


def resolved(**fields) -> RunRequest:
    fields.setdefault("train_len", 256)
    return resolve_request(RunRequest(model="tiny", eval_lens=(fields["train_len"],), **fields))


def test_each_stage_reads_its_rows_of_the_same_tokens_and_after_them_the_batches_of_no_curriculum():
    plain = BatchSource(STREAM, 1024, 8, seed=3)
    taught = BatchSource(STREAM, 1024, 8, seed=3, curriculum=Curriculum(((256, 3), (512, 2))))
    for step, (rows, length) in enumerate([(32, 256)] * 3 + [(16, 512)] * 2):
        batch = taught.batch(step)
        assert batch.inputs.shape == (rows, length) == batch.mask.shape
        assert torch.equal(batch.targets[:, :-1], batch.inputs[:, 1:])  # rows of the stream, shifted by one
    for step in range(5, 9):  # past the stages: exactly the batches of a source without them
        assert torch.equal(taught.batch(step).inputs, plain.batch(step).inputs)
    assert taught.tokens(9) == sum(taught.batch(s).inputs.numel() for s in range(9)) == 9 * 8 * 1024
    assert taught.tokens(4) == 3 * 32 * 256 + 16 * 512 and plain.tokens(4) == 4 * 8 * 1024


def test_short_rows_that_do_not_divide_the_budget_round_down_and_keep_one_row():
    source = BatchSource(STREAM, 1024, 8, seed=0, curriculum=Curriculum(((300, 2),)))
    assert source.shape(0) == (27, 300)  # 8192 // 300
    assert source.tokens(3) == 2 * 27 * 300 + 8 * 1024
    assert BatchSource(STREAM, 8192, 1, seed=0, curriculum=Curriculum(((8000, 1),))).shape(0) == (1, 8000)


@pytest.mark.parametrize(
    "length,steps,expected",
    [
        (256, 1200, ()),
        (1024, 1200, ()),
        (CURRICULUM_FROM, 1200, ((256, 750), (512, 150), (1024, 150))),
        (4096, 1200, ((256, 600), (512, 150), (1024, 150), (2048, 150))),
        (3000, 1200, ((256, 600), (512, 150), (1024, 150), (2048, 150))),
        (32768, 1200, ((256, 605), *((256 * 2**k, 85) for k in range(1, 7)))),  # at most half in the doublings
        (4096, 20, ((256, 12), (512, 2), (1024, 2), (2048, 2))),
        (4096, 7, ()),  # too few steps for a stage each
    ],
)
def test_the_default_curriculum_doubles_from_the_default_length(length, steps, expected):
    assert default_stages(length, steps) == expected
    if expected:
        assert sum(s for _, s in expected) < steps and expected[0][0] * 2 ** (len(expected) - 1) < length


def test_the_default_curriculum_resolves_to_its_stages_and_again_to_the_same():
    request = resolved(train_len=4096)
    assert DEFAULT_STEPS == 1200 and request.curriculum == "256:600,512:150,1024:150,2048:150"
    assert resolve_request(request) == request
    assert (
        resolved(train_len=256).curriculum == "none" and resolve_request(resolved(train_len=256)).curriculum == "none"
    )
    assert curriculum_stages(request.curriculum) == default_stages(4096, 1200) and curriculum_stages("none") is None


def test_the_curriculum_is_a_knob_and_none_turns_it_off():
    assert resolved(train_len=4096, curriculum="512:100, 1024:50").curriculum == "512:100,1024:50"
    assert resolved(train_len=4096, curriculum="None").curriculum == "none"
    assert resolved(train_len=1024, curriculum="128:900").curriculum == "128:900"  # asked for below the default L


@pytest.mark.parametrize(
    "curriculum,said",
    [
        ("256:100,256:100", "lengths must be positive and rise"),
        ("512:100,256:100", "lengths must be positive and rise"),
        ("0:100", "lengths must be positive and rise"),
        ("4096:100", "length 4096 is not shorter than L = 4096"),
        ("256:0", "every stage needs at least one step"),
        ("256:1200", "its 1200 steps leave none of the 1200 steps at L"),
        ("256", "'256' is not LENGTH:STEPS"),
        ("256:x", "'256:x' is not LENGTH:STEPS"),
        ("", "'' is not LENGTH:STEPS"),
    ],
)
def test_a_curriculum_mistake_is_refused(curriculum, said):
    with pytest.raises(UserError) as refused:
        resolved(train_len=4096, curriculum=curriculum)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_curriculum_mistake_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    args = ["run", "--dry-run", "--model", "tiny", "--train-len", "512", "--curriculum", "1k:10"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "length 1k" not in result.output and "'1k:10' is not LENGTH:STEPS" in result.output.strip().splitlines()[-1]


def test_short_rows_that_cannot_hold_a_training_prompt_are_refused_before_training(tmp_path):
    args = ["run", "--dry-run", "--model", "tiny", "--train-len", "2k", "--curriculum", "16:10"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--curriculum's rows of 16 tokens leave no room for passkey training prompts" in result.output


def test_a_model_without_a_curriculum_keeps_its_identity_and_one_with_it_is_another():
    plain = TrainConfig(model=TINY, seq_len=4096, batch_size=2)
    taught = dataclasses.replace(plain, curriculum=((256, 600), (512, 150)))
    assert "curriculum" not in canonical_json(plain) and '"curriculum":[[256,600],[512,150]]' in canonical_json(taught)
    assert config_hash(taught) != config_hash(plain)
    assert train_config_from_dict(dataclasses.asdict(taught) | {"curriculum": [[256, 600], [512, 150]]}) == taught
    assert curriculum_of(plain) is None and curriculum_of(taught).steps == 750


def test_a_fine_tune_reads_rows_of_its_own_length_from_the_first_step():
    base = TrainConfig(model=TINY, seq_len=4096, batch_size=2, curriculum=((256, 600),))
    tuned = finetune_config(base, "yarn", 2.0, 8192, 50)
    assert curriculum_of(tuned.phase) is None and tuned.phase.batch_size == 1


def test_training_through_a_curriculum_counts_its_tokens_and_resumes_to_the_same_weights(tmp_path):
    from extrapolate.training import checkpoint as ckpt
    from extrapolate.training.train import train

    model = ModelConfig(encoding="rope", vocab_size=256, max_len=64, **PRESETS["tiny"])
    config = TrainConfig(
        model=model, seq_len=64, batch_size=2, steps=6, warmup_steps=1, checkpoint_every=2, dtype="float32",
        curriculum=((16, 3),),
    )  # fmt: skip
    source = BatchSource(STREAM, 64, 2, config.seed, curriculum=curriculum_of(config))
    full = train(config, source, torch.device("cpu"), folder=tmp_path / "a")
    assert full.summary["tokens"] == 3 * 8 * 16 + 3 * 2 * 64 == source.tokens(6)
    train(config, source, torch.device("cpu"), folder=tmp_path / "b", stop_after=2)  # killed inside the short steps
    resumed = train(config, source, torch.device("cpu"), folder=tmp_path / "b")
    assert resumed.summary["losses"] == full.summary["losses"]
    for name, weight in ckpt.weights_dict(full.model).items():
        assert torch.equal(weight, ckpt.weights_dict(resumed.model)[name]), name


def test_the_dry_run_times_each_stage_and_the_plan_trains_through_them(tmp_path):
    args = ["run", "--dry-run", "--model", "tiny", "--train-len", "2k", "--eval-len", "2k", "--steps", "40"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    timed = [line for line in result.output.splitlines() if line.startswith("timing 3 training steps")]
    assert [line.split(" of ")[1].split(" tokens")[0] for line in timed] == [
        "2 × 2048", "16 × 256", "8 × 512", "4 × 1024"
    ]  # fmt: skip
    assert "rows of the curriculum 256:25,512:5,1024:5 (length:steps), then of L" in result.output
    assert "timed a training probe in" in result.output and ": 4 of them, about" in result.output  # every 10th step
