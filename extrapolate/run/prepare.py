"""The data every cell of a job shares, prepared once: corpus, tokenizer, held-out documents, the training
stream, the device, the evaluation lengths and the retrieval prompts (run and sweep alike)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import torch

from extrapolate.core.defaults import DEFAULT_PASSKEY_FRACTION
from extrapolate.core.device import resolve_device
from extrapolate.core.errors import UserError
from extrapolate.data.corpora import Corpus, load_corpus
from extrapolate.data.tokenizers import encode_cached, load_tokenizer
from extrapolate.run.curriculum import curriculum_stages
from extrapolate.run.resolution import ResolvedRequest
from extrapolate.tasks.files import load_task
from extrapolate.tasks.kinds import asked_kinds, file_kind


@dataclass(frozen=True)
class Prepared:
    corpus: Corpus
    tokenizer: object  # ByteTokenizer, BPETokenizer or a pretrained model's own
    heldout: list[torch.Tensor]
    stream: torch.Tensor  # (N,) int64 training tokens
    device: torch.device
    lengths: tuple[int, ...]
    passkey_fraction: float  # share of training rows that are retrieval prompts
    passkey_identity: str  # the task identity those rows come from ("" when there are none)
    passkey_builder: object | None  # the task file's prompt builder, when the job trains or evaluates on its prompts
    checkpoint: object | None  # the loaded PretrainedModel of a pretrained model, else None
    # what the retrieval share of the training rows is drawn from (`training_row`): the task file's builder, or
    # the --train-tasks builders, one drawn per row; None when no training row holds a prompt
    training_rows: object | None = None
    # what an optional kind that cannot be measured was left out for ({kind: the reason}); see RunRequest
    left_out: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # warnings for the user: held-out documents too short for the longest length


@dataclass(frozen=True)
class MixedRows:
    """Training rows from several tasks' prompt builders: each row draws which task it holds, then its prompt."""

    builders: tuple

    def training_row(self, gen: torch.Generator, length: int, answer_only: bool = True):
        pick = int(torch.randint(len(self.builders), (1,), generator=gen))
        return self.builders[pick].training_row(gen, length, answer_only)


SAY_AFTER = 2.0  # seconds of preparing after which the user is told what is being built


@contextlib.contextmanager
def preparing(resolved: ResolvedRequest, note):
    """Around `prepare`: on a fresh cache it trains a tokenizer and encodes the corpus (tens of seconds), so
    after SAY_AFTER seconds `note` is given what is being built; a quick one (or one refused at once) says
    nothing, and a mistake stays one line."""
    request = resolved.request
    tokenizer = "the checkpoint's tokenizer" if resolved.checkpoint else f"tokenizer {request.tokenizer}"
    timer = threading.Timer(
        SAY_AFTER, note, (f"preparing corpus {request.corpus} and {tokenizer} (built once, then read from the cache)",)
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def prepare(resolved: ResolvedRequest) -> Prepared:
    """The job's data, read and checked against the resolved request (`resolve`)."""
    request, lengths = resolved.request, resolved.lengths
    device = resolve_device(request.device)
    corpus = load_corpus(request.corpus)
    checkpoint = resolved.checkpoint
    tokenizer = checkpoint.tokenizer if checkpoint else load_tokenizer(request.tokenizer, corpus)
    heldout, notes = heldout_documents(corpus, tokenizer, max(lengths), request.eval_docs)
    if max(lengths) < request.train_len:  # legal (a check at short lengths), but not what the tool answers
        notes = (*notes, below_training_length(lengths, request.train_len))
    # a pretrained model is trained here only when fine-tuned: otherwise its training stream is never needed
    stream = (
        encode_cached(tokenizer, "\n\n".join(corpus.train))
        if checkpoint is None or request.extended
        else torch.zeros(request.train_len + 2, dtype=torch.int64)
    )
    if stream.numel() < request.train_len + 2:
        raise UserError(
            f"corpus {corpus.name} has {stream.numel()} training tokens, too few for --train-len {request.train_len}"
        )
    if request.finetune_steps > 0 and stream.numel() < resolved.tuned_len + 2:  # refused now, not after training
        raise UserError(
            f"corpus {corpus.name} has {stream.numel()} training tokens, too few for the fine-tune "
            f"length L' = {resolved.tuned_len}"
        )
    bos = tokenizer.bos_id if request.bos == "always" else None
    if bos is not None and hasattr(tokenizer, "fed"):  # a BOS the run puts first is fed like any other id
        tokenizer.fed([bos])
    chat = tokenizer.chat_parts() if request.chat_template == "template" else None
    builder = file_kind(resolved.task).prompt_builder(resolved.task, tokenizer, bos, chat, heldout)
    need = builder.fixed_tokens() + 32  # room for some filler
    fraction = request.passkey_fraction if checkpoint is None else 0.0
    if fraction is None:  # the rows hold --train-tasks' prompts where given (each checked against L below)
        fraction = DEFAULT_PASSKEY_FRACTION if request.train_tasks or request.train_len >= need else 0.0
    own_rows = fraction > 0 and not request.train_tasks  # training rows of the measured task's prompts
    kinds, left_out = asked_kinds(request.tasks), {}
    for kind in kinds:
        if kind.name in request.optional_tasks:
            try:
                kind.check_lengths(builder, lengths)
            except UserError as exc:
                left_out[kind.name] = str(exc)
    kinds = [kind for kind in kinds if kind.name not in left_out]
    stages = curriculum_stages(request.curriculum) or ()
    asked_retrieval = any(kind.reads_task_file for kind in kinds)
    used = fraction > 0 or asked_retrieval
    if used:
        if own_rows and request.train_len < need:
            raise UserError(
                f"--train-len {request.train_len} leaves no room for passkey training prompts "
                f"(≥ {need} tokens); use --passkey-fraction 0 or a longer length"
            )
        shortest = min((length for length, _ in stages), default=None)
        if own_rows and shortest is not None and shortest < need:
            raise UserError(
                f"--curriculum's rows of {shortest} tokens leave no room for passkey training prompts "
                f"(≥ {need} tokens); give longer stages, or --curriculum none"
            )
        for kind in kinds:  # a kind whose prompts would not fit the shortest length is refused before training
            kind.check_lengths(builder, lengths)
    rows, identity = (builder if fraction > 0 else None), (builder.task.identity if fraction > 0 else "")
    if request.train_tasks and fraction > 0:
        builders = tuple(
            training_builder(name, tokenizer, bos, chat, heldout, request.train_len) for name in request.train_tasks
        )
        rows = builders[0] if len(builders) == 1 else MixedRows(builders)
        identity = "+".join(b.task.identity for b in builders)
    if fraction > 0:
        row_len = min([request.train_len, *(length for length, _ in stages)])
        notes = (*notes, *training_fit_notes(getattr(rows, "builders", (rows,)), row_len, row_len < request.train_len))
    elif request.passkey_fraction is None and checkpoint is None and asked_retrieval:  # (no --train-tasks)
        notes = (*notes, untrained_retrieval(builder.task.name, need, request.train_len))
    return Prepared(
        corpus,
        tokenizer,
        heldout,
        stream,
        device,
        lengths,
        fraction,
        identity,
        builder if used else None,
        checkpoint,
        rows,
        left_out,
        notes,
    )


def below_training_length(lengths, train_len: int) -> str:
    shown = ", ".join(str(n) for n in lengths)
    return (
        f"every evaluation length ({shown}) is below L = {train_len}: nothing past the training length is "
        "measured; give --eval-lens past L to see extrapolation"
    )


LONG_CORPUS_HINT = (
    "give a corpus of longer documents: --corpus shakespeare-joined (the held-out plays as one document), "
    "a folder or .jsonl/.parquet file of long texts, or a hub dataset such as PG-19 (docs/measured.md)"
)


def heldout_documents(corpus: Corpus, tokenizer, longest: int, limit: int) -> tuple[list[torch.Tensor], tuple]:
    """The held-out documents every length scores (the first `limit` of those longer than `longest` tokens,
    so that each length scores the same text) and a warning naming the ones left out as too short; refused in
    one line when none is long enough, naming the longest and how to give longer ones."""
    encoded = [encode_cached(tokenizer, d) for d in corpus.heldout]
    kept = [t for t in encoded if t.numel() > longest]
    if not kept:
        most = max((t.numel() for t in encoded), default=0)
        raise UserError(
            f"corpus {corpus.name} has no held-out document longer than {longest} tokens (the longest has "
            f"{most:,}); {LONG_CORPUS_HINT}"
        )
    notes = ()
    if len(kept) < len(encoded):
        short = len(encoded) - len(kept)
        notes = (
            f"{short} of {len(encoded)} held-out documents of {corpus.name} are not longer than {longest} tokens "
            f"and are left out: every length scores the other {len(kept)} (fewer with --eval-docs)",
        )
    return kept[:limit], notes


def training_fit_notes(builders, row_len: int, staged: bool) -> tuple[str, ...]:
    """Refuse (one line) a training task none of whose stories fits a training row of `row_len` tokens (the
    curriculum's first stage where `staged`); say which ones only some of whose stories fit: their rows hold
    the shorter stories (a story too long is drawn again)."""
    notes = []
    row = f"a training row of {row_len} tokens" + (" (the --curriculum's first stage)" if staged else "")
    longer = "a longer first --curriculum stage, or --curriculum none" if staged else "a longer --train-len"
    for builder in builders:
        fit = getattr(builder, "training_fit", None)  # contexts of varying length (RULER's, BABILong's)
        share = 1.0 if fit is None else fit(row_len)
        name = builder.task.name
        if share == 0:
            raise UserError(f"{name}: no prompt of it fits {row}; give {longer}{builder.shorter}")
        if share < 1:
            notes.append(
                f"{name}: about {share:.0%} of its prompts fit {row}; its training rows hold those (a longer one "
                "is drawn again), so they lean to the shorter contexts"
            )
    return tuple(notes)


def untrained_retrieval(name: str, need: int, train_len: int) -> str:
    return (
        f"no {name} prompts in the training rows: they need at least {need} tokens, and L is {train_len}; the "
        "retrieval is measured on a model that never saw one (give a longer --train-len, or --passkey-fraction 0 "
        "to say so)"
    )


def training_builder(name: str, tokenizer, bos, chat, heldout, train_len: int):
    """The prompt builder of one --train-tasks task file, refused where its prompt and answer cannot fit in L."""
    task = load_task(name)
    builder = file_kind(task).prompt_builder(task, tokenizer, bos, chat, heldout)
    need = builder.fixed_tokens() + builder.decode_tokens() + 16
    if train_len < need:
        raise UserError(f"--train-tasks {name}: its prompts need at least {need} tokens; --train-len is {train_len}")
    return builder
