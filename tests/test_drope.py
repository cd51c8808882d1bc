"""DroPE: the RoPE model with its rotation removed in every layer, recalibrated at L. Its model is the authors'
(SakanaAI/DroPE at 260a8bb, custom_models/attention.py: every Llama attention layer handed cos = 1 and
sin = 0, the weights kept), ported here onto transformers' Llama; its fine-tune trains at L itself."""

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import ModelConfig
from extrapolate.encodings import encoding_for, get_spec
from extrapolate.model import TransformerLM

from .helpers import make_corpus, tiny_options, transformers_llama

transformers = pytest.importorskip("transformers")


runner = CliRunner()


def rope_model() -> TransformerLM:
    config = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=16)
    torch.manual_seed(0)
    model = TransformerLM(config).eval()
    for p in model.parameters():  # larger than the default init, so positions matter in the logits
        torch.nn.init.normal_(p, std=0.3)
    return model


def authors_model(ours: TransformerLM, monkeypatch):
    """transformers' Llama with our weights, its rotary embedding nullified as DroPE's `nope` attention does."""
    rope = {"rope_type": "default", "rope_theta": ours.config.rope_base}
    theirs = transformers_llama(ours, rope)
    rotary = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding
    forward = rotary.forward

    def nope(self, x, position_ids):  # the authors' identity rotation
        cos, sin = forward(self, x, position_ids)
        return torch.ones_like(cos), torch.zeros_like(sin)

    monkeypatch.setattr(rotary, "forward", nope)
    return theirs


def test_drope_is_the_rope_model_with_the_authors_identity_rotation(monkeypatch):
    model = rope_model()
    tokens = torch.randint(0, 64, (2, 48))  # past L = 16
    with torch.no_grad():
        with_rope = model(tokens)
        model.set_encoding(encoding_for(model.config, "drope"))
        ours = model(tokens)
        theirs = authors_model(model, monkeypatch)(tokens).logits
    assert theirs.abs().max() > 1
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)
    assert not torch.allclose(ours, with_rope, atol=1e-2)  # the rotation is what it removes


def test_drope_removes_the_sliding_layers_local_rope_too():
    """A Gemma-3-like model (sliding layers with a local RoPE of their own): DroPE leaves no rotation in any
    layer, so it computes what the same weights compute with no local RoPE; a RoPE scaling keeps the local one."""

    def gemma_like(local_base):
        config = ModelConfig(
            vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, encoding="rope", max_len=16,
            layer_types=("sliding", "full"), sliding_window=8, sliding_rope_base=local_base,
        )  # fmt: skip
        model = TransformerLM(config).eval()
        model.load_state_dict(rope_model().state_dict())
        return model

    tokens = torch.randint(0, 64, (2, 40))  # past L = 16 and the window of 8
    with_local, without = gemma_like(100.0), gemma_like(None)
    with torch.no_grad():
        assert not torch.allclose(with_local(tokens), without(tokens), atol=1e-2)  # the local RoPE matters
        for model in (with_local, without):
            model.set_encoding(encoding_for(model.config, "drope"))
        torch.testing.assert_close(with_local(tokens), without(tokens), atol=1e-5, rtol=0)
        for model in (with_local, without):
            model.set_encoding(encoding_for(model.config, "yarn"))
        assert not torch.allclose(with_local(tokens), without(tokens), atol=1e-2)  # a scaling keeps it


@pytest.fixture()
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def test_the_recalibration_trains_at_l_on_the_rope_model(cache, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    args = ["run", "--encoding", "drope", *tiny_options(), "--tasks", "perplexity", "--corpus", str(corpus)]
    result = runner.invoke(app, [*args, "--finetune-steps", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "results.csv")
    L = int(rows.train_len.iloc[0])
    assert set(rows.base_encoding) == {"rope"} and set(rows.factor) == {1}
    assert set(rows.finetune_len) == {L} and set(rows.finetune_steps) == {3}


@pytest.mark.parametrize("extra", [["--finetune-len", "4096"], ["--finetune-len", "8"]])
def test_a_recalibration_at_another_length_is_one_line(extra, cache, tmp_path):
    result = runner.invoke(app, ["run", "--encoding", "drope", *tiny_options(), "--finetune-steps", "3", *extra])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "recalibrates at the training length" in lines[0], result.output


def test_the_catalogue_says_where_it_applies():
    result = runner.invoke(app, ["encodings"])
    line = next(line for line in result.stdout.splitlines() if line.startswith("drope"))
    assert "on the rope model" in line
    assert get_spec("drope").base_encoding == "rope" and get_spec("drope").recalibrates


def test_it_evaluates_without_the_rotation_at_zero_steps_and_from_the_cache(cache, tmp_path):
    """The zero-step point is the RoPE model without its rotation (not the RoPE model), and a recalibrated model
    read back from the cache, built as the RoPE model it started from, is evaluated without it too."""
    corpus = make_corpus(tmp_path / "corpus")
    args = [*tiny_options(), "--tasks", "perplexity", "--corpus", str(corpus)]

    def ppl(encoding: str, out: str, *extra: str) -> list[float]:
        result = runner.invoke(app, ["run", "--encoding", encoding, *args, *extra, "--out", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
        rows = pd.read_csv(tmp_path / out / "results.csv")
        return rows[rows.metric == "ppl"].sort_values("eval_len")["value"].tolist()

    assert ppl("drope", "zero") != ppl("rope", "rope")
    fresh = ppl("drope", "tuned", "--finetune-steps", "3")
    assert ppl("drope", "again", "--finetune-steps", "3") == fresh  # the second reads the fine-tune from the cache


def test_a_pretrained_rope_checkpoint_is_recalibrated_without_its_rotation(cache, tmp_path):
    """A released RoPE checkpoint takes DroPE (it removes the rotation the checkpoint was trained with): at zero
    steps its perplexity is no longer the checkpoint's as released, and `--finetune-steps` recalibrates it at
    the checkpoint's own context."""
    pytest.importorskip("transformers")
    from extrapolate.data.corpora import load_corpus
    from extrapolate.data.tokenizers import load_tokenizer
    from extrapolate.run.export import export_hf

    corpus = make_corpus(tmp_path / "corpus", documents=4, words=600)
    tokenizer = load_tokenizer("bpe:300", load_corpus(str(corpus)))
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=tokenizer.vocab_size, max_len=64)
    export_hf(TransformerLM(config), tmp_path / "llama", tokenizer)
    args = ["run", "--tasks", "perplexity", "--model", str(tmp_path / "llama"), "--eval-lens", "64,128"]
    args += ["--corpus", str(corpus), "--eval-tokens", "256"]
    values = {}
    for label, extra in {"released": [], "drope": ["--encoding", "drope", "--finetune-steps", "0"]}.items():
        result = runner.invoke(app, [*args, *extra, "--out", str(tmp_path / label)])
        assert result.exit_code == 0, result.output
        rows = pd.read_csv(tmp_path / label / "results.csv").query("metric == 'ppl'")
        values[label] = rows.sort_values("eval_len")["value"].tolist()
    assert values["drope"] != values["released"]  # the rotation is gone
    tuned = runner.invoke(app, [*args, "--encoding", "drope", "--finetune-steps", "2", "--out", str(tmp_path / "ft")])
    assert tuned.exit_code == 0, tuned.output
    assert set(pd.read_csv(tmp_path / "ft" / "results.csv")["finetune_len"]) == {64}  # at its own context L
