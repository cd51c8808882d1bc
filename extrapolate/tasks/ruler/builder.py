"""A RULER task's prompts, exact in tokens: [BOS, chat opening] examples · template head · context ·
template tail [chat closing] · answer prefix, with `length - tokens_to_generate` tokens in all, so the prompt
and its generated answer fill exactly the length evaluated.

Pieces are tokenized separately and concatenated, as the passkey prompts are (tasks/prompt.py); a context
that leaves a few tokens of its budget unused (lists grow a line or a word at a time) is topped up with the
task's noise sentence cut at token level and closed by a newline, between the template's head and the context
(so that the fragment never runs into the context's first line)."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import torch

from extrapolate.core.errors import UserError
from extrapolate.tasks.prompt import hash_ints
from extrapolate.tasks.ruler.generators import GENERATORS, Draw
from extrapolate.tasks.ruler.haystack import Essay, filler
from extrapolate.tasks.ruler.score import METRIC_FUNCTIONS
from extrapolate.tasks.ruler.task import RulerTask

TRAINING_DRAWS = 64  # stories drawn for one training row before its length is called too short for the task

CONTEXT = "\x00CONTEXT\x00"  # stands for {context} while the rest of a template is filled


@dataclass(frozen=True)
class RulerPrompt:
    ids: list[int]  # length - tokens_to_generate tokens, ending with the answer prefix
    outputs: tuple[str, ...]  # the references the generated answer is scored on
    departs: int  # tokens before this index are text other prompts of the length may share
    index: int = 0  # which sample of the length it is
    question: str = ""  # the question asked, where the score reads it (BABILong's drops the labels it names)


class RulerBuilder:
    """`bos`: a token every prompt starts with, or None; `chat`: the chat template's tokens before and after a
    user turn (the answer prefix then opens the assistant's turn), or None; `heldout`: the held-out
    documents (token ids) the essay haystack is cut from."""

    generators = GENERATORS  # the task's `task` names one of these

    def __init__(self, task: RulerTask, tokenizer, bos: int | None = None, chat=None, heldout=()):
        self.task, self.tokenizer, self.bos, self.chat = task, tokenizer, bos, chat
        head, self.suffix = chat if chat is not None else ([], [])
        self.bos_prefix = [bos] if bos is not None and head[:1] != [bos] else []
        self.prefix = self.bos_prefix + list(head)
        self.essay = Essay(heldout, tokenizer)
        self.noise_unit = tokenizer.encode(task.noise + " ")
        self.newline = tokenizer.encode("\n")
        self.generator = self.generators[task.task](self)
        self._fitting: dict[tuple, list[int]] = {}  # (what, length, …) -> the seeds or samples that fit it

    # --- text -------------------------------------------------------------------------------------------
    def fill(self, template: str, draw: Draw, context: str = CONTEXT) -> str:
        """A template with the sample's fields (and `context`) in place, worded for the sample."""
        text = self.generator.rewrite(template, draw)
        return text.format(**draw.fields, context=context)

    # --- prompts ----------------------------------------------------------------------------------------
    def sample_rng(self, length: int, index: int) -> random.Random:
        """Every sample is seeded from (task seed, length, index): the same file gives the same prompts."""
        return random.Random(hash_ints(self.task.seed, length, index))

    def assemble(self, draw: Draw, size: int, example: bool = True, framed: bool = True, length: int = 0) -> list[int]:
        """The prompt of `draw` in exactly `size` tokens (its examples first when `example`, inside the BOS
        and chat template when `framed`)."""
        ids, _ = self._assemble(draw, size, example, framed, length or size)
        return ids

    def _assemble(self, draw: Draw, size: int, example: bool, framed: bool, length: int) -> tuple[list[int], int]:
        rng = random.Random(draw.seed ^ 0x5EED)
        shots = self.generator.example(rng, length) if example else []
        before, after = self.fill(self.task.template, draw).split(CONTEXT)
        if framed and self.chat is not None and self.generator.examples_as_turns:  # turns of their own first
            head = self.bos_prefix + shots + list(self.chat[0]) + self.tokenizer.encode(before)
        else:
            head = (self.prefix if framed else []) + shots + self.tokenizer.encode(before)
        tail = self.tokenizer.encode(after) + (self.suffix if framed else [])
        tail += self.tokenizer.encode(self.fill(self.task.answer_prefix, draw))
        budget = size - len(head) - len(tail)
        if budget < 1:
            raise UserError(f"{self.task.name} needs more than {size} tokens for its prompt (its template and answer)")
        context = self.generator.context(draw, budget, length)
        if len(context.tokens) > budget:
            raise UserError(f"{self.task.name} cannot fit its smallest context in {size} tokens")
        pad = self.pad(budget - len(context.tokens))
        return head + pad + context.tokens + tail, len(head) + len(pad) + context.departs

    def pad(self, count: int) -> list[int]:
        """`count` tokens of the noise sentence cut at token level, the last of them a newline."""
        if count <= 0:
            return []
        closing = self.newline[:count]
        return filler(self.noise_unit, count - len(closing)) + closing

    shorter = ""  # what else shortens a sample's context, in a hint (BABILong's: fewer facts)

    def fits(self, length: int, index: int) -> bool:
        """Whether sample `index`'s context fits a prompt of `length` tokens."""
        try:
            self.prompt(length, index)
        except UserError:
            return False
        return True

    def fitting_samples(self, length: int, count: int) -> list[int]:
        """The first `count` samples whose context fits `length` (the training probe's; the same every call)."""
        key = ("samples", length, count)
        if key not in self._fitting:
            fitting = (i for i in range(self.task.samples) if self.fits(length, i))
            self._fitting[key] = list(itertools.islice(fitting, count))
        return self._fitting[key]

    def prompt(self, length: int, index: int) -> RulerPrompt:
        """Sample `index` of the task at `length`."""
        draw = self.generator.draw_sample(self.sample_rng(length, index), length, index)
        ids, departs = self._assemble(draw, length - self.task.tokens_to_generate, True, True, length)
        return RulerPrompt(ids, tuple(draw.outputs), departs, index, str(draw.fields.get("question", "")))

    def score(self, prediction: str, prompt: RulerPrompt) -> float:
        """A generated answer's score (0–1) by the task's metric."""
        return METRIC_FUNCTIONS[self.task.metric](prediction, prompt.outputs)

    def decode_tokens(self) -> int:
        return self.task.tokens_to_generate

    def fixed_tokens(self, length: int = 1 << 12) -> int:
        """About the fewest tokens a prompt at `length` needs before its context holds anything (its examples
        depend on the length: common words shows a shorter one below 4096)."""
        draw = self.generator.draw(self.sample_rng(0, 0), length)
        head = len(self.prefix) + len(self.tokenizer.encode(self.fill(self.task.template, draw, "")))
        examples = len(self.generator.example(random.Random(0), length))
        return head + examples + len(self.suffix) + len(self.tokenizer.encode(self.fill(self.task.answer_prefix, draw)))

    # --- training ---------------------------------------------------------------------------------------
    def training_row(
        self, gen: torch.Generator, length: int, answer_only: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (length + 1,), loss mask (length,)): a prompt of this task and its answer filling a
        training row, the loss on the answer only (or on every token)."""
        for _ in range(TRAINING_DRAWS):  # a story too long for the row is drawn again: rows hold those that fit
            drawn = self.training_prompt(int(torch.randint(0, 2**62, (1,), generator=gen)), length)
            if drawn is not None:
                break
        else:  # rare stories fit: one of the fixed draws that do, so a long run never stops on bad luck
            seeds = self.fitting_seeds(length)
            if not seeds:
                raise UserError(
                    f"{self.task.name}: no story fits a training row of {length} tokens; give a longer --train-len "
                    f"(or --curriculum stage){self.shorter}"
                )
            drawn = self.training_prompt(seeds[int(torch.randint(len(seeds), (1,), generator=gen))], length)
        draw, prompt = drawn
        answer = self.tokenizer.encode(self.generator.answer(draw.outputs))
        tokens = (prompt + answer + self.newline + filler(self.noise_unit, length + 1))[: length + 1]
        mask = torch.zeros(length) if answer_only else torch.ones(length)
        mask[len(prompt) - 1 : len(prompt) - 1 + len(answer)] = 1.0  # targets at these indices are the answer
        return torch.tensor(tokens, dtype=torch.int64), mask

    def training_prompt(self, seed: int, length: int) -> tuple[Draw, list[int]] | None:
        """The draw of `seed` and its prompt for a training row of `length` tokens, leaving room for its answer;
        None where its context does not fit."""
        draw = self.generator.draw(random.Random(seed), length + 1)
        # the context decides some references (the common words): assemble first, then word the answer
        try:
            return draw, self.assemble(draw, length + 1 - self.answer_bound(draw), length=length + 1)
        except UserError:
            return None

    def fitting_seeds(self, length: int) -> list[int]:
        """Which of TRAINING_DRAWS fixed seeds (0, 1, …) draw a story whose prompt fits a training row of
        `length` tokens."""
        key = ("seeds", length)
        if key not in self._fitting:
            self._fitting[key] = [s for s in range(TRAINING_DRAWS) if self.training_prompt(s, length) is not None]
        return self._fitting[key]

    def training_fit(self, length: int) -> float:
        """The share of the fixed draws whose prompt fits a training row of `length` tokens: where it is below
        1, rows hold the shorter stories."""
        return len(self.fitting_seeds(length)) / TRAINING_DRAWS

    def answer_bound(self, draw: Draw) -> int:
        """Tokens reserved for a training row's answer: the task's generation length, as at evaluation."""
        return self.task.tokens_to_generate
