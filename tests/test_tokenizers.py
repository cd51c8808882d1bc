"""The BPE tokenizer of models trained here: deterministic, lossless on any text, digits one token each,
cached on disk, identified by its exact definition; `--tokenizer` specs validated in one line."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from extrapolate.core.errors import UserError
from extrapolate.data import tokenizers
from extrapolate.data.corpora import Corpus
from extrapolate.data.tokenizers import BPETokenizer, ByteTokenizer, load_tokenizer, parse_spec

from .helpers import WORDS, make_corpus, tiny_options


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def small_corpus(seed: int = 0) -> Corpus:
    rng = random.Random(seed)
    docs = tuple(" ".join(rng.choice(WORDS) for _ in range(400)) + f" page {i * 37}." for i in range(6))
    return Corpus("test", docs[:5], docs[5:], ("doc5",))


def random_text(rng: random.Random) -> str:
    """A mix of ASCII, control characters, digits, CJK, emoji and any other code point (surrogates excluded:
    they are not encodable text)."""

    def char() -> str:
        r = rng.random()
        if r < 0.3:
            return chr(rng.randint(0x20, 0x7E))
        if r < 0.4:
            return chr(rng.randint(0x00, 0x1F))
        if r < 0.5:
            return rng.choice("0123456789")
        if r < 0.6:
            return chr(rng.randint(0x4E00, 0x9FFF))
        if r < 0.7:
            return chr(rng.randint(0x1F300, 0x1FAFF))
        code = rng.randint(0x80, 0x10FFFF)
        return chr(code) if not 0xD800 <= code <= 0xDFFF else "\u00e9"

    return "".join(char() for _ in range(rng.randint(0, 40)))


def test_training_is_deterministic_across_processes(tmp_path):
    """Byte-identical JSON from a fresh process (a new hash seed, the library's threads) and from this one."""
    corpus = small_corpus()
    here = tokenizers.train_bpe(corpus.train, 400)
    script = (
        "import sys; from tests.test_tokenizers import small_corpus; "
        "from extrapolate.data.tokenizers import train_bpe; "
        "sys.stdout.write(train_bpe(small_corpus().train, 400))"
    )
    there = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    assert here == there == tokenizers.train_bpe(corpus.train, 400)
    assert BPETokenizer(here, 400).identity == BPETokenizer(there, 400).identity


def test_round_trip_on_arbitrary_text():
    tokenizer = load_tokenizer("bpe:400", small_corpus())
    rng = random.Random(0)
    for _ in range(300):
        text = random_text(rng)
        ids = tokenizer.encode(text)
        assert all(0 <= i < tokenizer.vocab_size for i in ids)
        assert tokenizer.decode(ids) == text, repr(text)
    assert tokenizer.encode_tensor("the sky").tolist() == tokenizer.encode("the sky")


def test_digits_are_single_tokens_and_words_are_merged():
    tokenizer = load_tokenizer("bpe:400", small_corpus())  # the corpus has "page 37", "page 74", …
    for number in ("12345", "0", "98765432"):
        ids = tokenizer.encode(number)
        assert len(ids) == len(number) and [tokenizer.decode([i]) for i in ids] == list(number)
    assert len(tokenizer.encode(" harbour")) < len(" harbour")  # BPE learned something


def test_a_small_corpus_saturates_the_vocabulary_gracefully():
    tokenizer = load_tokenizer("bpe", small_corpus())  # 2048 asked, far fewer distinct merges exist
    assert 256 < tokenizer.vocab_size < 2048
    assert tokenizer.name == "bpe2048" and tokenizer.identity.startswith("bpe2048-")


def test_second_load_comes_from_the_cache(monkeypatch, tmp_path):
    corpus = small_corpus()
    first = load_tokenizer("bpe:300", corpus)
    files = list((tmp_path / "cache" / "tokenizers").iterdir())
    assert len(files) == 1

    def no_training(*_):
        raise AssertionError("trained again instead of loading the cached tokenizer")

    monkeypatch.setattr(tokenizers, "train_bpe", no_training)
    second = load_tokenizer("bpe:300", corpus)
    assert second.identity == first.identity and second.json == first.json
    with pytest.raises(AssertionError):  # other training texts are another tokenizer
        load_tokenizer("bpe:300", small_corpus(seed=1))


def test_a_damaged_cache_file_is_retrained():
    corpus = small_corpus()
    first = load_tokenizer("bpe:300", corpus)
    path = tokenizers.cache_path(corpus.train, 300)
    path.write_text("{not json")
    assert load_tokenizer("bpe:300", corpus).identity == first.identity


def test_identity_follows_the_vocabulary_size_and_the_training_split_only():
    corpus = small_corpus()
    a, b = load_tokenizer("bpe:300", corpus), load_tokenizer("bpe:330", corpus)
    assert a.identity != b.identity and a.vocab_size == 300 and b.vocab_size == 330
    other_heldout = Corpus("test", corpus.train, ("something else entirely",), ("x",))
    assert load_tokenizer("bpe:300", other_heldout).identity == a.identity


def test_bytes_spec():
    tokenizer = load_tokenizer("bytes", small_corpus())
    assert isinstance(tokenizer, ByteTokenizer) and tokenizer.identity == "bytes" and tokenizer.vocab_size == 256


@pytest.mark.parametrize("spec", ["bpe:259", "bpe:65537", "bpe:", "bpe:x", "bpe:-300", "wordpiece", "bpe:1e3", ""])
def test_bad_spec_is_one_line_user_error(spec):
    with pytest.raises(UserError) as error:
        parse_spec(spec)
    assert "\n" not in str(error.value) and "tokenizer" in str(error.value)


def test_spec_sizes():
    assert parse_spec("bpe") == 2048 and parse_spec("BPE:260") == 260 and parse_spec("bpe:65536") == 65536
    assert parse_spec("bytes") is None


def test_model_folder_tokenizer_and_transformers_export(tmp_path):
    transformers = pytest.importorskip("transformers")
    tokenizer = load_tokenizer("bpe:300", small_corpus())
    tokenizers.keep_with_model(tokenizer, tmp_path)
    assert tokenizers.tokenizer_of_model(tmp_path, tokenizer.identity).json == tokenizer.json
    with pytest.raises(UserError):
        tokenizers.tokenizer_of_model(tmp_path, "bpe300-0000000000")
    tokenizer.to_transformers().save_pretrained(tmp_path / "hf")
    loaded = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = "the sky is blue 4711 ✓"
    ids = loaded.encode(text, add_special_tokens=False)
    assert ids == tokenizer.encode(text) and loaded.decode(ids) == text


# ---- through the command line


def tiny_run(corpus, out, *extra):
    return [
        "run",
        *tiny_options(steps=3, batch_size=2, eval_len=64, eval_tokens=128),
        "--tasks",  # the default's retrieval would be left out with a warning: no prompt fits in 32 tokens
        "perplexity",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        *extra,
    ]


def test_bytes_option_trains_a_256_id_model(tmp_path):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    corpus = make_corpus(tmp_path / "corpus")
    result = CliRunner().invoke(app, tiny_run(corpus, tmp_path / "out", "--tokenizer", "bytes"))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert set(table.tokenizer) == {"bytes"} and run["model_config"]["vocab_size"] == 256
    assert not list((tmp_path / "cache").glob("models/*/tokenizer.json"))


def test_bad_tokenizer_option_is_one_red_line(tmp_path):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    corpus = make_corpus(tmp_path / "corpus")
    result = CliRunner().invoke(app, tiny_run(corpus, tmp_path / "out", "--tokenizer", "bpe:100"))
    assert result.exit_code == 2
    assert [line for line in result.output.splitlines() if line.strip()] == [
        "error: --tokenizer bpe:N needs N from 260 to 65536, got 100"
    ]
    assert not (tmp_path / "out").exists()


def test_exported_bpe_model_loads_with_its_tokenizer_in_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    corpus = make_corpus(tmp_path / "corpus")
    cli = CliRunner()
    assert cli.invoke(app, tiny_run(corpus, tmp_path / "out", "--encoding", "rope")).exit_code == 0
    result = cli.invoke(app, ["export", str(tmp_path / "out"), "--out", str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    ids = tokenizer("the sky is blue 42", return_tensors="pt").input_ids  # (1, tokens)
    assert tokenizer.decode(ids[0]) == "the sky is blue 42"
    assert model(ids).logits.shape[-1] == len(tokenizer) == model.config.vocab_size


def test_results_table_from_before_the_tokenizer_column_reads_with_it_empty(tmp_path):
    from extrapolate.report.table import COLUMNS, append_results, load_results

    old = [c for c in COLUMNS if c != "tokenizer"]
    pd.DataFrame([{c: 1 for c in old} | {"run_id": "old", "encoding": "rope"}], columns=old).to_csv(
        tmp_path / "results.csv", index=False
    )
    table = load_results(tmp_path)
    assert list(table.columns) == COLUMNS and table.tokenizer.isna().all()
    merged = append_results(tmp_path, [{c: 2 for c in COLUMNS} | {"run_id": "new", "tokenizer": "bytes"}])
    assert list(merged.columns) == COLUMNS and list(merged.tokenizer.fillna("")) == ["", "bytes"]


def test_a_tokenized_text_is_kept_by_tokenizer_and_text_and_survives_a_damaged_file(tmp_path, monkeypatch):
    """prepare's texts are tokenized once per machine: the cached ids equal the tokenizer's, another
    tokenizer or text is another entry, a damaged entry is tokenized again, a slow tokenizer is not cached."""
    import torch

    from extrapolate.data.tokenizers import TOKENS_FOLDER, ByteTokenizer, encode_cached

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path))
    bpe, text = load_tokenizer("bpe:300", small_corpus()), "the grass is green " * 50
    first = encode_cached(bpe, text)
    assert torch.equal(first, bpe.encode_tensor(text))
    files = sorted((tmp_path / TOKENS_FOLDER).glob("*.pt"))
    assert len(files) == 1
    assert torch.equal(encode_cached(bpe, text), first)  # read back
    encode_cached(ByteTokenizer(), text)
    encode_cached(bpe, text + ".")
    assert len(list((tmp_path / TOKENS_FOLDER).glob("*.pt"))) == 3
    files[0].write_bytes(b"not a tensor")
    assert torch.equal(encode_cached(bpe, text), first)  # tokenized again and the entry replaced
    assert torch.equal(torch.load(files[0], weights_only=True), first)

    class Slow:
        identity = "hf300-slow"

        def encode_tensor(self, text):
            return torch.tensor([len(text)])

    encode_cached(Slow(), "abc")
    assert len(list((tmp_path / TOKENS_FOLDER).glob("*.pt"))) == 3
