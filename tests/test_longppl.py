"""LongPPL against a port of the authors' find_key_token and compute_longppl (PKU-ML/LongPPL at 1decd2a,
longppl/longppl.py), the model its own evaluator with one tokenizer: the same key tokens, the same LongPPL."""

import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import ModelConfig
from extrapolate.model import TransformerLM
from extrapolate.tasks import key_tokens, longppl

runner = CliRunner()


class Logits:
    """The evaluator as the authors call it: model(input_ids).logits."""

    def __init__(self, model):
        self.model = model

    def __call__(self, input_ids):
        return type("Output", (), {"logits": self.model(input_ids)})()


def authors_key_tokens(evaluator_model, input_ids, trunc_len, sliding_window, alpha, beta) -> list[int]:
    """find_key_token's loop, ported: the key tokens' indices in input_ids (1, N) by `evaluator_model`, called
    as the authors call it (model(input_ids).logits)."""
    output_full = evaluator_model(input_ids)
    loss_f = torch.nn.CrossEntropyLoss(reduction="none")
    _, max_len = input_ids.shape
    key_tokens = []
    for start_token in range(0, max_len - trunc_len, sliding_window):
        if start_token + trunc_len + sliding_window > max_len:
            sliding_window = max_len - start_token - trunc_len
        input_ids_short = input_ids[:, start_token : start_token + trunc_len + sliding_window]
        output_short = evaluator_model(input_ids_short)
        loss_full = loss_f(
            output_full.logits[0, start_token + trunc_len - 1 : start_token + trunc_len + sliding_window - 1, :],
            input_ids[0, start_token + trunc_len : start_token + trunc_len + sliding_window],
        )
        loss_short = loss_f(
            output_short.logits[0, trunc_len - 1 : trunc_len + sliding_window - 1, :],
            input_ids_short[0, trunc_len : trunc_len + sliding_window],
        )
        # the authors' .squeeze() leaves a 0-d tensor, which cannot be iterated, where the last piece holds one
        # target (97 tokens, 16 + 8 each); reshape(-1) keeps their meaning there too
        loss_discrepancy = torch.logical_and((loss_short - loss_full) > alpha, loss_full < (beta * -1)).reshape(-1)
        for i, is_key in enumerate(loss_discrepancy):
            if is_key:
                key_tokens.append(start_token + trunc_len + i)
    return key_tokens


def authors_longppl(model, input_ids, trunc_len, sliding_window, alpha, beta):
    """find_key_token's loop and compute_longppl's selection, ported (one tokenizer: a key token's text span is
    its own, so cal_overlap maps key token t to loss index t - 1)."""
    key_tokens = authors_key_tokens(Logits(model), input_ids, trunc_len, sliding_window, alpha, beta)
    loss_f = torch.nn.CrossEntropyLoss(reduction="none")
    loss_overall = loss_f(model(input_ids)[0, :-1, :], input_ids[0, 1:]).to(torch.float).numpy()
    if not key_tokens:
        return None, 0
    loss_key = loss_overall[[t - 1 for t in key_tokens]]
    return float(np.exp(loss_key.mean())), len(key_tokens)


@pytest.fixture(scope="module")
def model():
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, encoding="rope", max_len=64)
    torch.manual_seed(0)
    built = TransformerLM(config).eval()
    for p in built.parameters():  # sharp enough that the context moves the losses by nats
        torch.nn.init.normal_(p, std=0.4)
    return built


@pytest.mark.parametrize(("short", "window", "alpha", "beta"), [(16, 8, 0.3, -6.0), (10, 7, 0.5, -5.0), (16, 8, 2, -2)])
def test_key_tokens_and_longppl_are_the_authors(model, monkeypatch, short, window, alpha, beta):
    monkeypatch.setattr(key_tokens, "ALPHA", alpha)
    monkeypatch.setattr(key_tokens, "BETA", beta)
    generator = torch.Generator().manual_seed(1)
    docs = [torch.randint(0, 64, (97,), generator=generator) for _ in range(3)]
    with torch.no_grad():
        ours = longppl.evaluate_longppl(model, docs, 96, budget=96, short=short, window=window, device="cpu")
        theirs = [authors_longppl(model, doc[None], short, window, alpha, beta) for doc in docs]
    assert ours.key_tokens == [count for _, count in theirs]
    for (value, count), total, keys in zip(theirs, ours.key_nll, ours.key_tokens):
        if count:
            assert math.isclose(math.exp(total / keys), value, rel_tol=1e-4)
    if alpha < 1:
        assert sum(ours.key_tokens) > 10  # the comparison has key tokens to compare
    assert ours.candidates == [96 + 1 - short] * 3  # every target past the short context was a candidate


def test_dropping_the_well_predicted_condition_fails_the_port(model, monkeypatch):
    monkeypatch.setattr(key_tokens, "ALPHA", 0.0)
    monkeypatch.setattr(key_tokens, "BETA", -6.0)
    monkeypatch.setattr(key_tokens, "key_mask", lambda full, short: (short - full) > key_tokens.ALPHA)
    doc = torch.randint(0, 64, (97,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = longppl.evaluate_longppl(model, [doc], 96, budget=96, short=16, window=8, device="cpu")
        _, count = authors_longppl(model, doc[None], 16, 8, 0.0, -6.0)
    assert ours.key_tokens != [count]


def test_a_short_context_as_long_as_the_length_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    model = ["--model", "tiny", "--steps", "4", "--batch-size", "4", "--train-len", "32"]
    result = runner.invoke(app, ["run", "--encoding", "rope", *model, "--tasks", "longppl", "--eval-lens", "64,128"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--longppl-short 4096 must be below the longest evaluation length 128" in lines[0]


def test_a_run_records_longppl_its_share_and_each_documents_sums(monkeypatch, tmp_path):
    import pandas as pd

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(key_tokens, "BETA", -8.0)  # an untrained model predicts nothing below 2 nats
    monkeypatch.setattr(key_tokens, "ALPHA", 0.0)
    out = tmp_path / "out"
    model = ["--model", "tiny", "--steps", "4", "--batch-size", "4", "--train-len", "32", "--eval-tokens", "256"]
    args = ["--tasks", "longppl", "--eval-lens", "16,64", "--longppl-short", "16", "--longppl-window", "16"]
    result = runner.invoke(app, ["run", "--encoding", "rope", *model, *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    inside = table[table.eval_len == 16]  # no target past the short context: neither a LongPPL nor a share
    assert set(inside.metric) == {"longppl", "key_share"} and (inside.status == "unsupported").all()
    assert inside.reason.str.contains("short context of 16 tokens").all()
    rows = table[table.eval_len == 64].set_index("metric")
    assert 0 < rows.loc["key_share", "value"] < 1 and rows.loc["longppl", "value"] > 1
    assert rows.loc["longppl", "protocol"] == "longppl-short-16-window-16"
    (samples,) = (out / "samples").glob("*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sum(r["key_tokens"] for r in records) == rows.loc["longppl", "n_tokens"]
    summary = (out / "summary.md").read_text()
    assert "## LongPPL" in summary and "### longppl-short-16-window-16" in summary


def test_longppls_sample_lines_are_neither_prompts_nor_perplexity_documents(tmp_path):
    """A folder's samples hold LongPPL's per-document sums beside prompts' answers and perplexity's documents;
    the report's per-prompt and per-document readers each take only their own (a scaled method's paired
    comparison with its base reads prompts, which LongPPL's lines are not)."""
    from extrapolate.report.samples import load_documents, load_samples, write_samples

    cell = {"task": "longppl", "protocol": "longppl-short-16-window-16", "eval_len": 64}
    records = [
        {**cell, "index": 0, "key_nll_sum": 3.0, "key_tokens": 2, "candidates": 40},
        {**cell, "task": "perplexity", "protocol": "full", "index": 0, "nll_sum": 9.0, "tokens": 64},
        {**cell, "task": "passkey-word", "protocol": "passkey-word", "depth": 0.5, "index": 0, "score": 1.0},
    ]
    write_samples(tmp_path, "abc", records)
    assert load_samples(tmp_path)["task"].tolist() == ["passkey-word"]
    assert load_documents(tmp_path)["task"].tolist() == ["perplexity"]
