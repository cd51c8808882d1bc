"""Training memory grows with the model and the batch's hidden states, not with batch × length × vocabulary:
the head and the loss run in chunks that are recomputed in the backward pass, with the same loss and gradients."""

import subprocess
import sys

import pytest
import torch

from extrapolate import model as model_module
from extrapolate.core.config import ModelConfig
from extrapolate.model import TransformerLM


def loss_and_gradients(model, tokens):
    model.zero_grad()
    nll = model.token_nll(tokens[:, :-1], tokens[:, 1:])  # (B, T)
    nll.mean().backward()
    return nll.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


def test_chunked_training_loss_equals_one_piece(monkeypatch):
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=300, d_model=32, n_layers=2, n_heads=2, max_len=64))
    tokens = torch.randint(0, 300, (4, 65))
    monkeypatch.setattr(model_module, "TRAIN_LOGITS", 1 << 30)
    whole, whole_grads = loss_and_gradients(model, tokens)
    monkeypatch.setattr(model_module, "TRAIN_LOGITS", 4 * 300 * 5)  # 5 positions a chunk, the last one 4
    chunked, chunked_grads = loss_and_gradients(model, tokens)
    assert torch.equal(chunked, whole)  # the same logits, position by position
    for name, grad in whole_grads.items():  # the head's gradient sums its chunks in another order: rounding only
        torch.testing.assert_close(chunked_grads[name], grad, rtol=1e-5, atol=1e-7)


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_a_long_training_step_does_not_hold_every_logit():
    """One training step of a small model at 16 × 4096 tokens and 2048 ids: the logits alone would be 512 MiB in
    float32 (and cross-entropy keeps as much again for its backward). Peak memory of fresh processes."""
    code = """
import sys, torch
from extrapolate import model as m
from extrapolate.bench.timing import peak_rss_mb
from extrapolate.core.config import ModelConfig
if sys.argv[1] == "whole":
    m.TRAIN_LOGITS = 1 << 40
torch.manual_seed(0)
net = m.TransformerLM(ModelConfig(vocab_size=2048, d_model=32, n_layers=1, n_heads=2, max_len=4096))
tokens = torch.randint(0, 2048, (16, 4097))
before = peak_rss_mb()
net.token_nll(tokens[:, :-1], tokens[:, 1:]).mean().backward()
print(int(peak_rss_mb() - before))
"""
    grown = {
        how: int(subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, check=True).stdout)
        for how in ("whole", "chunked")
    }
    logits_mib = 16 * 4096 * 2048 * 4 / 2**20  # 512
    # whole: the logits and cross-entropy's gradient of them (2 × 512 MiB) at once; chunked: neither is ever
    # whole, so at least most of both is saved (torch releases differ in what else the step keeps: 500 MiB
    # for the chunked step with torch 2.13, 621 MiB with the newest release on 2026-11-26)
    assert grown["whole"] > 2 * logits_mib and grown["chunked"] < grown["whole"] - 1.8 * logits_mib, grown


def test_compiled_training_is_its_own_model_and_compiles_only_the_training_forward(monkeypatch):
    """`--compile`: the training forward runs through torch.compile (evaluation and decoding stay eager), and
    the trained model's identity says so, while every model trained without it keeps its hash."""
    from extrapolate.core.config import TrainConfig, config_hash

    compiled_calls = []

    def fake_compile(fn):
        def wrapped(*args, **kwargs):
            compiled_calls.append(args[0].shape)
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(torch, "compile", fake_compile)
    torch.manual_seed(0)
    net = TransformerLM(ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=2, max_len=64))
    tokens = torch.randint(0, 50, (2, 17))
    eager = net.token_nll(tokens[:, :-1], tokens[:, 1:])
    net.compile_training()
    trained = net.token_nll(tokens[:, :-1], tokens[:, 1:])
    with torch.no_grad():
        net.token_nll(tokens[:, :-1], tokens[:, 1:])  # evaluation: eager
    assert compiled_calls == [torch.Size([2, 16])] and torch.equal(trained, eager)
    base = TrainConfig(model=net.config)
    assert '"compile"' not in __import__("extrapolate.core.config", fromlist=["canonical_json"]).canonical_json(base)
    assert config_hash(TrainConfig(model=net.config, compile=True)) != config_hash(base)


def test_a_batch_in_several_passes_steps_as_the_whole_batch(monkeypatch):
    """Rows in passes of PASS_TOKENS tokens, gradients added up: the same loss and the same step (to float
    summation order) as the whole batch at once, for both loss weightings."""

    from extrapolate.core.config import TrainConfig
    from extrapolate.data.batches import Batch
    from extrapolate.training import train as train_module
    from extrapolate.training.train import build_model, training_step

    torch.manual_seed(0)
    inputs, targets = torch.randint(0, 50, (2, 6, 16))
    mask = (torch.rand(6, 16) > 0.3).float()
    batch = Batch(inputs, targets, mask)
    for weighting in ("row", "token"):
        config = TrainConfig(
            model=ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=2, max_len=16),
            seq_len=16,
            batch_size=6,
            dtype="float32",
            loss_weighting=weighting,
        )
        results = []
        for tokens in (1 << 20, 32):  # one pass; passes of 2 rows
            monkeypatch.setattr(train_module, "PASS_TOKENS", tokens)
            model = build_model(config, torch.device("cpu"))
            plain = torch.optim.SGD(model.parameters(), lr=1.0)  # the step is the (clipped) gradient itself
            loss = training_step(model, plain, config, batch, torch.device("cpu"))
            results.append((loss.item(), {k: v.detach().clone() for k, v in model.state_dict().items()}))
        (whole, after_whole), (passes, after_passes) = results
        assert passes == __import__("pytest").approx(whole, rel=1e-6)
        for name, value in after_whole.items():
            torch.testing.assert_close(after_passes[name], value, rtol=1e-5, atol=1e-7)
