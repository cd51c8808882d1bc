"""Tokenizers of the models trained here.

`bpe` (the default): a byte-level BPE learned from the corpus's training split with the `tokenizers` library,
cached on disk, deterministic (the same corpus and settings give a byte-identical tokenizer JSON). `bytes`: 256
ids, no files, the same everywhere. Every tokenizer has an `identity` that is part of the model's identity.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import torch

from extrapolate.core.atomic import atomic_path, write_text
from extrapolate.core.config import config_hash
from extrapolate.core.defaults import DEFAULT_BPE_VOCAB
from extrapolate.core.errors import UserError
from extrapolate.core.paths import cache_dir

# 256 byte ids plus a few merges at least; 65536 keeps ids in 16 bits
MIN_BPE_VOCAB, MAX_BPE_VOCAB = 260, 65536
SPEC_HELP = f"bytes, bpe or bpe:N (N from {MIN_BPE_VOCAB} to {MAX_BPE_VOCAB})"
# everything besides the texts and the vocabulary size that shapes a trained BPE: part of its cache key, so a
# change here never loads a tokenizer trained under other settings
BPE_SETTINGS = {
    "model": "bpe",
    "pre_tokenizer": ["digits(individual)", "byte-level(no prefix space, regex)"],
    "decoder": "byte-level",
    "alphabet": "all 256 bytes",
    "special_tokens": [],
    "min_frequency": 0,
}
MODEL_TOKENIZER_FILE = "tokenizer.json"  # the BPE a model was trained with, kept next to its weights
MODEL_HF_TOKENIZER = "hf-tokenizer"  # the transformers tokenizer of a fine-tuned pretrained model (a folder)


class ByteTokenizer:
    name = "bytes"
    vocab_size = 256
    bos_id, adds_bos = None, False  # no special tokens

    def chat_parts(self) -> None:
        return None  # no chat template

    @property
    def identity(self) -> str:
        return "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_tensor(self, text: str) -> torch.Tensor:
        return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).to(torch.int64)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


class BPETokenizer:
    """A `tokenizers.Tokenizer` behind the project's tokenizer interface; `json` is its exact definition."""

    bos_id, adds_bos = None, False  # trained without special tokens

    def chat_parts(self) -> None:
        return None  # no chat template

    def __init__(self, json_text: str, requested_vocab: int):
        from tokenizers import Tokenizer

        self.json = json_text
        self.tokenizer = Tokenizer.from_str(json_text)
        self.name = f"bpe{requested_vocab}"
        # the real size: a corpus too small for the requested vocabulary stops the trainer early
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.identity = f"{self.name}-{hashlib.sha256(json_text.encode()).hexdigest()[:10]}"

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_tensor(self, text: str) -> torch.Tensor:
        return torch.tensor(self.encode(text), dtype=torch.int64)  # (tokens,)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def to_transformers(self):
        """This tokenizer as a transformers fast tokenizer (`save_pretrained` writes it, `AutoTokenizer` loads it)."""
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(self.json))


def parse_spec(spec: str) -> int | None:
    """The BPE vocabulary size a `--tokenizer` value asks for; None for bytes."""
    text = spec.strip().lower()
    if text == "bytes":
        return None
    if text == "bpe":
        return DEFAULT_BPE_VOCAB
    kind, _, size = text.partition(":")
    if kind != "bpe" or not size.strip().isdigit():
        raise UserError(f"--tokenizer must be {SPEC_HELP}, got {spec!r}")
    vocab = int(size)
    if not MIN_BPE_VOCAB <= vocab <= MAX_BPE_VOCAB:
        raise UserError(f"--tokenizer bpe:N needs N from {MIN_BPE_VOCAB} to {MAX_BPE_VOCAB}, got {vocab}")
    return vocab


def load_tokenizer(spec: str, corpus) -> ByteTokenizer | BPETokenizer:
    """`bytes`, or a BPE trained on `corpus.train` (never the held-out split); from the cache if trained before."""
    vocab = parse_spec(spec)
    if vocab is None:
        return ByteTokenizer()
    return BPETokenizer(cached_bpe_json(corpus.train, vocab), vocab)


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 over every document's own SHA-256, so document boundaries count as well as the text."""
    h = hashlib.sha256()
    for text in texts:
        h.update(hashlib.sha256(text.encode("utf-8")).digest())
    return h.hexdigest()


def library_version() -> str:
    import tokenizers

    return ".".join(tokenizers.__version__.split(".")[:2])


def cache_path(texts: tuple[str, ...], vocab: int) -> Path:
    key = config_hash(
        {"texts": texts_digest(texts), "vocab_size": vocab, "settings": BPE_SETTINGS, "tokenizers": library_version()},
        16,
    )
    return cache_dir() / "tokenizers" / f"bpe{vocab}-{key}.json"


def cached_bpe_json(texts: tuple[str, ...], vocab: int) -> str:
    path = cache_path(texts, vocab)
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if is_valid_json_tokenizer(text):
            return text
        # a damaged cache file is not an error: train again and replace it
    text = train_bpe(texts, vocab)
    write_text(path, text)
    return text


def is_valid_json_tokenizer(text: str) -> bool:
    from tokenizers import Tokenizer

    try:
        Tokenizer.from_str(text)
    except Exception:  # the library raises a bare Exception for malformed JSON
        return False
    return True


def train_bpe(texts: Iterable[str], vocab: int) -> str:
    """Train a byte-level BPE; its JSON. Digits are split before BPE sees them, so every digit is one token
    (numbers — passkeys — are never merged into arbitrary chunks). Measured deterministic: the same texts give
    the same JSON across processes, with and without the library's parallelism."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    # the full byte alphabet up front: any text, even with characters never seen in training, is encodable
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        min_frequency=0,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer.to_str()


def tokenizer_of_model(folder: Path, identity: str):
    """The tokenizer a model trained here was trained with: bytes, the BPE kept in its folder, or (a fine-tuned
    pretrained model) the transformers tokenizer kept there."""
    if identity == ByteTokenizer().identity:
        return ByteTokenizer()
    if identity.startswith("hf"):
        return hf_tokenizer_of_model(folder, identity)
    path = folder / MODEL_TOKENIZER_FILE
    if not path.exists():
        raise UserError(
            f"{folder} has no {MODEL_TOKENIZER_FILE} for its tokenizer {identity}; run the model once more to write it"
        )
    name = identity.split("-")[0]
    tokenizer = BPETokenizer(path.read_text(encoding="utf-8"), int(name.removeprefix("bpe")))
    if tokenizer.identity != identity:
        raise UserError(f"{path} is tokenizer {tokenizer.identity}, but the model was trained with {identity}")
    return tokenizer


def hf_tokenizer_of_model(folder: Path, identity: str):
    from extrapolate.core.readers import reading
    from extrapolate.data.hf_extra import require_transformers
    from extrapolate.data.pretrained import HFTokenizer

    path = folder / MODEL_HF_TOKENIZER
    if not path.is_dir():
        raise UserError(
            f"{folder} has no {MODEL_HF_TOKENIZER}/ for its tokenizer {identity}; "
            f"run the fine-tune once more to write it"
        )
    with reading(path, "tokenizer", "run the fine-tune once more to write it"):
        tokenizer = HFTokenizer(require_transformers().AutoTokenizer.from_pretrained(str(path)), folder.name)
    if tokenizer.identity != identity:
        raise UserError(f"{path} is tokenizer {tokenizer.identity}, but the model was trained with {identity}")
    return tokenizer


def keep_with_model(tokenizer, folder: Path) -> None:
    """Write a model's tokenizer next to its weights (a BPE as one file, a pretrained model's transformers
    tokenizer as a folder), so the checkpoint folder is complete on its own."""
    if not folder.exists():
        return
    if isinstance(tokenizer, BPETokenizer) and not (folder / MODEL_TOKENIZER_FILE).exists():
        write_text(folder / MODEL_TOKENIZER_FILE, tokenizer.json)
    elif hasattr(tokenizer, "to_transformers") and not isinstance(tokenizer, BPETokenizer):
        target = folder / MODEL_HF_TOKENIZER
        if not target.exists():
            staging = folder / f".{MODEL_HF_TOKENIZER}-{os.getpid()}"
            tokenizer.to_transformers().save_pretrained(str(staging))
            staging.rename(target)  # whole or absent: a kill never leaves half a tokenizer


TOKENS_FOLDER = "tokens"  # under the cache: texts already tokenized, by tokenizer identity and text


def encode_cached(tokenizer, text: str) -> torch.Tensor:
    """`tokenizer.encode_tensor(text)`, kept in the cache by the tokenizer's identity and the text's hash, so a
    corpus is tokenized once per machine rather than once per run (about 3 s of every run on the built-in
    corpus). A tokenizer whose identity does not pin its vocabulary (a slow transformers tokenizer) is not
    cached; an unreadable cache file is tokenized again and replaced."""
    identity = str(getattr(tokenizer, "identity", ""))
    if not identity or identity.endswith("-slow"):
        return tokenizer.encode_tensor(text)
    key = hashlib.sha256(f"{identity}\0{text}".encode()).hexdigest()[:32]
    path = cache_dir() / TOKENS_FOLDER / f"{key}.pt"
    if path.exists():
        try:
            ids = torch.load(path, weights_only=True)
            if isinstance(ids, torch.Tensor) and ids.dtype == torch.int64 and ids.dim() == 1:
                fed = getattr(tokenizer, "fed", None)  # a checkpoint's tokenizer checks the ids against its embedding
                return ids if fed is None else fed(ids)
        except Exception:  # a file cut short or written by something else: tokenize again
            pass
    ids = tokenizer.encode_tensor(text)
    with atomic_path(path) as tmp:
        torch.save(ids, tmp)
    return ids
