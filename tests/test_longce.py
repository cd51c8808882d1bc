"""LongCE against a port of the authors' `loss_weight` and loss (PKU-ML/LongPPL at 1decd2a,
finetune/finetune.py): the same weights, the same loss and the same gradient through the project's training
step; and the flags that ask for it."""

import dataclasses

import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import LongCEConfig, ModelConfig, TrainConfig
from extrapolate.data.batches import Batch
from extrapolate.model import TransformerLM
from extrapolate.training.longce import longce_config, longce_weights
from extrapolate.training.train import training_step

runner = CliRunner()


def authors_loss_weight(model, input_ids, trunc_len, internal, thre):
    """`loss_weight`, ported: model(input_ids) is the logits (B, T, V)."""
    loss_f = torch.nn.CrossEntropyLoss(reduction="none")
    _, max_len = input_ids.shape
    output_full = model(input_ids)
    loss = loss_f(output_full[0, :-1, :], input_ids[0, 1:])
    loss_discrepancy = torch.ones(input_ids.shape[-1])
    with torch.no_grad():
        for start_token in range(0, max_len - trunc_len, internal):
            if start_token + trunc_len + internal > max_len:
                internal = max_len - start_token - trunc_len
            input_ids_short = input_ids[:, start_token : start_token + trunc_len + internal]
            output_short = model(input_ids_short)
            loss_full = loss[start_token + trunc_len - 1 : start_token + trunc_len + internal - 1]
            loss_short = loss_f(
                output_short[0, trunc_len - 1 : trunc_len + internal - 1, :],
                input_ids_short[0, trunc_len : trunc_len + internal],
            )
            loss_discrepancy[start_token + trunc_len : start_token + trunc_len + internal] = torch.exp(
                loss_short - loss_full
            ).squeeze()
    weight = torch.clamp(loss_discrepancy[1:], max=thre)
    return weight, loss


def sharp_model():
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, encoding="rope", max_len=128)
    torch.manual_seed(0)
    model = TransformerLM(config)
    for p in model.parameters():  # sharp enough that the context moves the losses by nats
        torch.nn.init.normal_(p, std=0.4)
    return model


def text(length=97, seed=1):
    return torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("short", "window", "cap"), [(16, 8, 5.0), (10, 7, 5.0), (24, 40, 2.0), (16, 8, 0.5)])
def test_weights_are_the_authors(short, window, cap):
    model, ids = sharp_model(), text()
    expected, _ = authors_loss_weight(model, ids, short, window, cap)
    with torch.no_grad():
        full = model.token_nll(ids[:, :-1], ids[:, 1:])
    config = LongCEConfig(short, window, cap)
    weights = longce_weights(model, ids[:, :-1], ids[:, 1:], full, config, torch.device("cpu"), "float32")[0]
    torch.testing.assert_close(weights, expected, atol=1e-4, rtol=1e-4)
    assert (weights[: short - 1] == min(1.0, cap)).all()  # targets without a shorter context
    assert (weights != min(1.0, cap)).any()  # the test reads the weights, not only their default


def test_a_window_off_by_one_is_not_the_authors():
    """The mutation the port catches: short contexts one token longer give other weights."""
    model, ids = sharp_model(), text()
    expected, _ = authors_loss_weight(model, ids, 16, 8, 5.0)
    with torch.no_grad():
        full = model.token_nll(ids[:, :-1], ids[:, 1:])
    config = LongCEConfig(17, 8, 5.0)
    weights = longce_weights(model, ids[:, :-1], ids[:, 1:], full, config, torch.device("cpu"), "float32")[0]
    assert not torch.allclose(weights, expected, atol=1e-3)


def test_training_step_takes_the_authors_loss_and_gradient():
    """The authors' loss is mean(loss · weight), the weights without gradient: the project's step (per-token
    weighting, float32) returns that loss and leaves that gradient."""
    model, ids = sharp_model(), text(65, seed=3)
    config = TrainConfig(
        model=model.config, seq_len=64, batch_size=1, dtype="float32", loss_weighting="token", grad_clip=1e9
    )
    config = dataclasses.replace(config, longce=LongCEConfig(16, 8, 5.0))
    weight, loss = authors_loss_weight(model, ids, 16, 8, 5.0)
    expected = torch.mean(loss * weight)
    expected.backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    batch = Batch(ids[:, :-1], ids[:, 1:], torch.ones(1, 64))
    got = training_step(model, optimizer, config, batch, torch.device("cpu"))
    torch.testing.assert_close(got, expected.detach(), atol=1e-5, rtol=1e-5)
    for p, g in zip(model.parameters(), expected_grads):
        torch.testing.assert_close(p.grad, g, atol=1e-5, rtol=1e-4)
    plain = training_step(model, optimizer, dataclasses.replace(config, longce=None), batch, torch.device("cpu"))
    assert abs(float(plain) - float(loss.mean().detach())) < 1e-5 and abs(float(plain) - float(got)) > 1e-3


def test_defaults_are_the_authors_ratios():
    """Unset: the short context L and a quarter of it for the window (the authors' 4096 and 1024 on Llama 2)."""
    assert longce_config("longce", None, None, 5.0, 4096, 32768) == LongCEConfig(4096, 1024, 5.0)
    assert longce_config("longce", None, None, 5.0, 256, 1024) == LongCEConfig(256, 64, 5.0)
    assert longce_config("ce", 16, 8, 5.0, 256, 1024) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--finetune-loss", "focal", "--finetune-steps", "2"], "--finetune-loss"),
        (["--finetune-loss", "longce"], "give --finetune-steps"),
        (["--finetune-loss", "longce", "--finetune-steps", "2", "--longce-short", "1024"], "yarn: LongCE's short"),
        (["--finetune-loss", "longce", "--finetune-steps", "2", "--longce-max-weight", "0"], "--longce-max-weight"),
        (["--finetune-loss", "longce", "--finetune-steps", "2", "--finetune-positions", "pose"], "PoSE"),
        (["--finetune-loss", "longce", "--finetune-steps", "2", "--finetune-adapter", "longlora"], "groups would cut"),
    ],
)
def test_bad_longce_requests_are_one_line_errors(tmp_path, args, message):
    base = ["run", "--encoding", "yarn", "--model", "tiny", "--eval-lens", "256,1024", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, base + args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_a_sweeps_longce_error_names_the_encoding_whose_fine_tune_it_is(tmp_path):
    """DroPE recalibrates at L itself: LongCE's default short context (L) is not below its L', and the sweep says
    it is DroPE's fine-tune, not YaRN's, that cannot take it."""
    args = ["sweep", "--encodings", "yarn,drope", "--model", "tiny", "--train-len", "64", "--eval-lens", "64,256"]
    args += ["--finetune-loss", "longce", "--finetune-steps", "2", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "drope: LongCE's short context (64) must be below the fine-tune length L' = 64" in result.output
