"""A checkpoint is refused for its vocabulary only when an id the run feeds is past its embedding, as transformers
computes any text whose ids have rows: a tokenizer class that adds a default special token (Qwen2's
`<|endoftext|>`, giving a 300-id tokenizer 301) runs; a text reaching past the rows is one line naming the id."""

import json

import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from typer.testing import CliRunner  # noqa: E402

from extrapolate.cli.app import app  # noqa: E402
from extrapolate.core.errors import UserError  # noqa: E402
from extrapolate.data.pretrained import HFTokenizer  # noqa: E402
from tests.helpers import make_corpus  # noqa: E402


def qwen2_folder(folder, rows: int):
    """A tiny random Qwen2 checkpoint with `rows` embedding rows, beside a 300-id tokenizer saved as Qwen2's
    class, which transformers loads with its default special token added: 301 ids."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    config = transformers.Qwen2Config(
        vocab_size=rows,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(config).eval().save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    settings = folder / "tokenizer_config.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "tokenizer_class": "Qwen2Tokenizer"}))
    assert len(transformers.AutoTokenizer.from_pretrained(folder)) == 301  # the class's <|endoftext|> added
    return folder


def run(folder, corpus, out, *extra):
    args = ["run", "--model", str(folder), "--corpus", str(corpus), "--tasks", "perplexity"]
    args += ["--eval-lens", "32,64", "--eval-tokens", "128", "--out", str(out), *extra]
    return CliRunner().invoke(app, args)


def test_a_tokenizer_with_an_unused_extra_token_runs_and_gives_transformers_perplexity(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    folder, corpus = qwen2_folder(tmp_path / "qwen2", 300), make_corpus(tmp_path / "corpus")
    native = run(folder, corpus, tmp_path / "native")
    assert native.exit_code == 0, native.output
    theirs = run(folder, corpus, tmp_path / "theirs", "--backend", "transformers")
    assert theirs.exit_code == 0, theirs.output
    ours, reference = (pd.read_csv(tmp_path / name / "results.csv") for name in ("native", "theirs"))
    ours, reference = (t[t.task == "perplexity"].set_index(["eval_len", "metric"])["value"] for t in (ours, reference))
    assert len(ours) == 4 and ((ours - reference).abs() / reference).max() < 1e-4


def test_a_text_fed_past_the_embedding_is_one_line_naming_the_id(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    folder, corpus = qwen2_folder(tmp_path / "qwen2", 200), make_corpus(tmp_path / "corpus")
    result = run(folder, corpus, tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "its tokenizer gives id" in result.output and "past the 200 rows of its embedding" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out" / "results.csv").exists()


def test_the_check_reads_the_ids_fed_whole_or_cached():
    """A list as `encode` gives it, a tensor as the token cache gives it back: the first id past the rows named."""
    fake = type("Tokenizer", (), {"convert_ids_to_tokens": lambda self, i: f"<{i}>"})()
    checked = HFTokenizer.__new__(HFTokenizer)
    checked.tokenizer, checked.name, checked.rows = fake, "m", 10
    assert checked.fed([1, 9, 0]) == [1, 9, 0] and torch.equal(checked.fed(torch.tensor([3, 4])), torch.tensor([3, 4]))
    for ids in ([1, 12, 10], torch.tensor([1, 12, 10])):
        with pytest.raises(UserError, match=r"gives id 12 \('<12>'\), past the 10 rows"):
            checked.fed(ids)
