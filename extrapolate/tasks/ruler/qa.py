"""RULER's QA tasks read a local SQuAD or HotpotQA file (none is packaged): `datasets` reads it, in the
original JSON of either dataset or in the flat form of their dataset cards (one question a row)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from extrapolate.core.errors import UserError

LOADERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


@dataclass(frozen=True)
class Question:
    query: str
    answers: tuple[str, ...]
    documents: tuple[int, ...]  # its own documents (indices into the document list)
    related: tuple[int, ...] = ()  # SQuAD: the other paragraphs of its article, the first distractors


def load_qa(task) -> tuple[list[Question], list[str]]:
    path = task.data_path
    if path is None:
        raise UserError(
            f"{task.name} reads a local {task.arg('dataset')} file: set args.data in a copy of the task file "
            f"(a path relative to that file) and pass that file to --tasks"
        )
    return read_qa(str(path.resolve()), task.arg("dataset"), os.path.getmtime(path) if path.exists() else 0.0)


@cache
def read_qa(path: str, dataset: str, _mtime: float) -> tuple[list[Question], list[str]]:
    if not Path(path).is_file():
        raise UserError(f"QA file {path} does not exist")
    loader = LOADERS.get(Path(path).suffix)
    if loader is None:
        raise UserError(f"QA file {path}: expected one of {', '.join(LOADERS)}")
    import datasets

    try:
        rows = datasets.load_dataset(loader, data_files=path, split="train")
    except Exception as exc:  # datasets raises many kinds for a malformed file
        raise UserError(f"QA file {path} cannot be read: {' '.join(str(exc).split())[:200]}") from None
    try:
        questions, documents = (squad if dataset == "squad" else hotpotqa)(rows)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise UserError(f"QA file {path} is not in a {dataset} format (missing {exc})") from None
    if not questions:
        raise UserError(f"QA file {path} holds no answerable question")
    return questions, documents


def squad(rows) -> tuple[list[Question], list[str]]:
    """SQuAD v1/v2: the original nested JSON ({"data": [{"paragraphs": [...]}]}) or flat rows (context,
    question, answers); unanswerable questions are left out, as RULER leaves them out."""
    articles = []  # per article: [(context, [(question, answers)])]
    if "data" in rows.column_names:
        for data in rows["data"]:
            for article in data:
                articles.append(
                    [
                        (p["context"], [(q["question"], q["answers"]) for q in p["qas"] if not q.get("is_impossible")])
                        for p in article["paragraphs"]
                    ]
                )
    else:
        by_title: dict[str, dict[str, list]] = {}
        for row in rows:
            answers = row["answers"]
            texts = answers["text"] if isinstance(answers, dict) else [a["text"] for a in answers]
            paragraph = by_title.setdefault(row.get("title") or "", {}).setdefault(row["context"], [])
            if texts:
                paragraph.append((row["question"], [{"text": t} for t in texts]))
        articles = [list(paragraphs.items()) for paragraphs in by_title.values()]
    documents = sorted({context for article in articles for context, _ in article})
    index = {d: i for i, d in enumerate(documents)}
    questions = []
    for article in articles:
        own_article = [index[c] for c, _ in article]
        for context, qas in article:
            for query, answers in qas:
                texts = tuple(dict.fromkeys(a["text"] for a in answers))
                if texts:
                    related = tuple(i for i in own_article if i != index[context])
                    questions.append(Question(query, texts, (index[context],), related))
    return questions, documents


def hotpotqa(rows) -> tuple[list[Question], list[str]]:
    """HotpotQA: the original JSON (context as [title, sentences] pairs) or flat rows (context as
    {"title": [...], "sentences": [[...]]}); every paragraph of a question is its own document."""

    def paragraphs(context) -> list[str]:
        if isinstance(context, dict):
            pairs = zip(context["title"], context["sentences"])
        else:
            pairs = [(t, s) for t, s in context]
        return [f"{title}\n{''.join(sentences)}" for title, sentences in pairs]

    listed = [(row["question"], row["answer"], paragraphs(row["context"])) for row in rows]
    documents = sorted({d for _, _, docs in listed for d in docs})
    index = {d: i for i, d in enumerate(documents)}
    questions = [Question(q, (a,), tuple(index[d] for d in docs)) for q, a, docs in listed if a]
    return questions, documents
