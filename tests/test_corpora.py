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
