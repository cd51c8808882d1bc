"""Token-exact retrieval prompts: [task sentence] filler · key line(s) · filler · question, then the answer.

Pieces are tokenized separately and their ids concatenated, so a prompt has exactly the requested number of
tokens with any tokenizer; the filler is cut at token level and the queried key line moves with the depth.
Other key lines (RULER-style variants) sit at seeded random places in the filler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from extrapolate.core.errors import UserError
from extrapolate.tasks.files import PasskeyTask

# Numeric keys are scored by the first integer of the continuation, so decoding leaves room for a short
# restatement before it: SmolLM2 answers a key at depth 0 with " the pass key. 49581" (4 tokens, then the key).
PREAMBLE_TOKENS = 4


@dataclass(frozen=True)
class Needle:
    name: str  # "" for tasks without names
    key: int | str


@dataclass(frozen=True)
class Prompt:
    ids: list[int]  # exactly `length` tokens, ending with the question
    answer: list[int]  # the answer tokens (" K.")
    key: int | str  # the first key of the answer
    key_start: int  # token index where the queried key line begins
    depth: float
    answer_keys: tuple = ()  # every key of the answer, in order
    needles: tuple[Needle, ...] = ()  # every key line of the prompt, in order of appearance


def prompt_ids(prompts: list[Prompt], device=None) -> torch.Tensor:
    """The prompts' token ids as one (len(prompts), n) int64 tensor (all of one length n); built through numpy,
    several times faster than `torch.tensor` on nested lists at 32k-token prompts."""
    return torch.from_numpy(np.array([p.ids for p in prompts], dtype=np.int64)).to(device)


def random_key(gen: torch.Generator, digits: int) -> int:
    low = 10 ** (digits - 1)
    return int(torch.randint(low, 10 * low, (1,), generator=gen))


def trial_generator(task: PasskeyTask, length: int, depth: float, trial: int) -> torch.Generator:
    """Every trial is seeded from (task seed, length, depth, trial): the same file gives the same prompts."""
    return torch.Generator().manual_seed(hash_ints(task.seed, length, round(depth * 1000), trial))


def hash_ints(*values: int) -> int:
    h = 1469598103934665603
    for v in values:
        h = ((h ^ (v & 0xFFFFFFFFFFFF)) * 1099511628211) % (1 << 63)
    return h


def answer_words(text: str) -> list[str]:
    """The words (runs of letters and digits) of a decoded answer: "  4821, 77." → ["4821", "77"]."""
    return re.findall(r"\w+", text)


class PromptBuilder:
    def __init__(
        self, task: PasskeyTask, tokenizer, bos: int | None = None, chat: tuple[list[int], list[int]] | None = None
    ):
        """`bos`: a token every prompt starts with (the tokenizer's BOS), or None. `chat`: the tokens of a chat
        template before and after a user turn (the assistant's turn opened after it), which then holds the whole
        prompt, the question last, so the answer is the assistant's; None: the prompt as plain text."""
        self.task, self.tokenizer, self.bos, self.chat = task, tokenizer, bos, chat
        head, self.suffix = chat if chat is not None else ([], [])
        self.prefix = [bos] if bos is not None and head[:1] != [bos] else []  # a template may open with it
        self.prefix += head
        self.prefix += tokenizer.encode(task.task_sentence + " ") if task.variant == "classic" else []
        self.filler_unit = tokenizer.encode(task.filler + " ")
        self.single = task.needles == 1 and task.queries == 1
        if self.single:  # the classic form: the question has no name in it
            self.question = tokenizer.encode(" " + task.question) + self.suffix

    # --- keys -------------------------------------------------------------------------------------------
    def random_key(self, gen: torch.Generator) -> int | str:
        if self.task.keys:
            return self.task.keys[int(torch.randint(len(self.task.keys), (1,), generator=gen))]
        return random_key(gen, self.task.key_digits)

    def key_number(self, key: int | str) -> int:
        """An integer standing for a key, to seed from."""
        return key if isinstance(key, int) else self.task.keys.index(key)

    def distinct_keys(self, gen: torch.Generator, count: int, avoid=()) -> list:
        keys: list = []
        while len(keys) < count:
            key = self.random_key(gen)
            if key not in keys and key not in avoid:
                keys.append(key)
        return keys

    @cached_property
    def key_tokens(self) -> dict:
        """Tokens each word key takes as it appears in an answer (with its leading space)."""
        return {k: len(self.tokenizer.encode(" " + k)) for k in self.task.keys}

    # --- pieces -----------------------------------------------------------------------------------------
    def filler(self, count: int) -> list[int]:
        repeats = count // len(self.filler_unit) + 1
        return (self.filler_unit * repeats)[:count]

    def key_line(self, key, name: str = "") -> list[int]:
        return self.tokenizer.encode(" " + self.task.key_line.format(key=key, name=name) + " ")

    def question_for(self, names: list[str]) -> list[int]:
        if self.single:
            return self.question
        return self.tokenizer.encode(" " + self.task.question.format(name=" and ".join(names))) + self.suffix

    def answer(self, key, *more) -> list[int]:
        return self.tokenizer.encode(
            self.task.answer.format(key=self.task.answer_join.join(str(k) for k in (key, *more)))
        )

    @cached_property
    def widest_key(self):
        return (
            max(self.task.keys, key=lambda k: len(self.key_line(k)))
            if self.task.keys
            else 10 ** (self.task.key_digits - 1)
        )

    def fixed_tokens(self, key_digits: int | None = None) -> int:
        """Tokens a prompt needs before any filler (with the widest key, names as long as the longest)."""
        key = 10 ** (key_digits - 1) if key_digits else self.widest_key
        if self.single:
            return len(self.prefix) + len(self.key_line(key)) + len(self.question)
        name = max(self.task.names, key=lambda n: len(self.tokenizer.encode(n)))
        question = self.question_for([name] * self.task.queries)
        return len(self.prefix) + self.task.needles * (len(self.key_line(key, name)) + 2) + len(question)

    def decode_tokens(self) -> int:
        """Tokens greedy decoding produces: the answer's bound and one more; for numeric keys, whose first
        integer is scored, room for a short restatement before it (PREAMBLE_TOKENS)."""
        return self.answer_tokens() + 1 + (0 if self.task.keys else PREAMBLE_TOKENS)

    def answer_tokens(self) -> int:
        """An upper bound of the answer's tokens, to size greedy decoding."""
        if not self.task.keys and self.single:
            return len(self.answer(10**self.task.key_digits - 1))
        # word keys: BPE may merge across a join, so leave a token per key of slack
        return len(self.answer(*[self.widest_key] * self.task.answer_keys)) + self.task.answer_keys

    # --- prompts ----------------------------------------------------------------------------------------
    def build(self, length: int, depth: float, key) -> Prompt:
        """The one-needle prompt: the key line at `depth` of the filler."""
        return self.assemble(length, [(depth, Needle("", key))], [Needle("", key)], [])

    def assemble(
        self, length: int, placed: list[tuple[float, Needle]], answer: list[Needle], asked: list[str]
    ) -> Prompt:
        """Key lines at their depths of the filler (the first one is the queried one), then the question."""
        lines = [self.key_line(n.key, n.name) for _, n in placed]
        question = self.question_for(asked)
        filler_total = length - len(self.prefix) - sum(map(len, lines)) - len(question)
        if filler_total < 0:
            raise UserError(
                f"{self.task.name} prompt ({self.task.variant}) needs at least {length - filler_total} "
                f"tokens; {length} asked (use a longer length or the compact variant)"
            )
        filler = self.filler(filler_total)
        offsets = [round(d * filler_total) for d, _ in placed]
        order = sorted(range(len(placed)), key=lambda i: (offsets[i], i))
        ids, cursor, key_start = list(self.prefix), 0, 0
        for i in order:
            ids += filler[cursor : offsets[i]]
            cursor = offsets[i]
            if i == 0:
                key_start = len(ids)
            ids += lines[i]
        ids += filler[cursor:] + question
        assert len(ids) == length
        keys = tuple(n.key for n in answer)
        return Prompt(
            ids, self.answer(*keys), keys[0], key_start, placed[0][0], keys, tuple(placed[i][1] for i in order)
        )

    def sample(self, gen: torch.Generator, depth: float) -> tuple[list[tuple[float, Needle]], list[Needle], list[str]]:
        """Needles (the queried first, at `depth`), the answer's needles in order, the names asked."""
        task = self.task
        keys = self.distinct_keys(gen, task.needles)
        pool = list(task.names)
        picks = torch.randperm(len(pool), generator=gen).tolist()
        names = [pool[picks[0]]] * task.needles if task.same_name else [pool[p] for p in picks[: task.needles]]
        needles = [Needle(n, k) for n, k in zip(names, keys)]
        depths = [depth] + torch.rand(task.needles - 1, generator=gen).tolist()
        placed = list(zip(depths, needles))
        if task.same_name:  # every value of the one name, in order of appearance
            answer = [n for _, n in sorted(placed, key=lambda p: p[0])]
            return placed, answer, [names[0]]
        answer = needles[: task.queries]
        return placed, answer, [n.name for n in answer]

    def trial(self, length: int, depth: float, trial: int) -> Prompt:
        gen = trial_generator(self.task, length, depth, trial)
        if self.single:
            return self.build(length, depth, self.random_key(gen))
        return self.assemble(length, *self.sample(gen, depth))

    def is_correct(self, decoded: str, prompt: Prompt) -> bool:
        """Greedy exact match. Numeric keys: the first integers of the continuation are the keys, in order
        (the classic protocol: take the first integer). Word keys: the first words of the continuation are the
        answer's words (its keys, in order, with the words that join them)."""
        if not self.task.keys:
            return re.findall(r"\d+", decoded)[: len(prompt.answer_keys)] == [str(k) for k in prompt.answer_keys]
        joined = self.task.answer_join.join(str(k) for k in prompt.answer_keys)
        want = answer_words(self.task.answer.format(key=joined))
        return answer_words(decoded)[: len(want)] == want

    def distractors(self, prompt: Prompt, trial: int) -> list[int | str]:
        """`distractors` other keys, fixed per trial (one-key answers)."""
        gen = torch.Generator().manual_seed(hash_ints(self.task.seed, self.key_number(prompt.key), trial, 7))
        others = [n.key for n in prompt.needles if n.key not in prompt.answer_keys]  # hard negatives first
        return (others + self.distinct_keys(gen, self.task.distractors, avoid=set(others) | {prompt.key}))[
            : self.task.distractors
        ]

    def candidate_answers(self, prompt: Prompt, trial: int) -> list[list[int]]:
        """The true answer first, then the distractor answers: for a one-key answer other keys; for several
        keys, the true answer with one key (in turn) replaced by another."""
        keys = list(prompt.answer_keys)
        others = self.distractors(prompt, trial)
        if len(keys) == 1:
            return [self.answer(k) for k in [keys[0]] + others]
        wrong = []
        for i, other in enumerate(others):
            changed = list(keys)
            changed[i % len(keys)] = other
            wrong.append(self.answer(*changed))
        return [self.answer(*keys)] + wrong

    def training_row(
        self, gen: torch.Generator, length: int, answer_only: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (length + 1,), loss mask (length,)): a prompt plus its answer filling a training row, the
        loss on the answer only (or on every token with `answer_only=False`; measured: it learns retrieval
        more slowly, the filler's easy targets dominate the gradient)."""
        if self.single:
            key = self.random_key(gen)
            answer = self.answer(key)
            depth = float(torch.rand(1, generator=gen))
            prompt = self.build(length + 1 - len(answer), depth, key)
        else:
            placed, answer_needles, asked = self.sample(gen, float(torch.rand(1, generator=gen)))
            answer = self.answer(*[n.key for n in answer_needles])
            prompt = self.assemble(length + 1 - len(answer), placed, answer_needles, asked)
        tokens = torch.tensor(prompt.ids + answer, dtype=torch.int64)
        mask = torch.zeros(length) if answer_only else torch.ones(length)
        mask[len(prompt.ids) - 1 :] = 1.0  # targets at these indices are the answer tokens
        return tokens, mask
