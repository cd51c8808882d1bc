"""Token-exact passkey prompts: [task sentence] filler · key line · filler · question, then the answer.

Pieces are tokenized separately and their ids concatenated, so a prompt has exactly the requested number of
tokens with any tokenizer; the filler is cut at token level and the key line moves with the depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UserError
from ..taskfiles import PasskeyTask


@dataclass(frozen=True)
class Prompt:
    ids: list[int]  # exactly `length` tokens, ending with the question
    answer: list[int]  # the answer tokens (" K.")
    key: int
    key_start: int  # token index where the key line begins
    depth: float


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


class PromptBuilder:
    def __init__(self, task: PasskeyTask, tokenizer):
        self.task, self.tokenizer = task, tokenizer
        self.prefix = tokenizer.encode(task.task_sentence + " ") if task.variant == "classic" else []
        self.question = tokenizer.encode(" " + task.question)
        unit = tokenizer.encode(task.filler + " ")
        self.filler_unit = unit

    def filler(self, count: int) -> list[int]:
        repeats = count // len(self.filler_unit) + 1
        return (self.filler_unit * repeats)[:count]

    def key_line(self, key: int) -> list[int]:
        return self.tokenizer.encode(" " + self.task.key_line.format(key=key) + " ")

    def answer(self, key: int) -> list[int]:
        return self.tokenizer.encode(self.task.answer.format(key=key))

    def fixed_tokens(self, key_digits: int | None = None) -> int:
        """Tokens a prompt needs before any filler (with a key of the task's width)."""
        key = 10 ** ((key_digits or self.task.key_digits) - 1)
        return len(self.prefix) + len(self.key_line(key)) + len(self.question)

    def build(self, length: int, depth: float, key: int) -> Prompt:
        key_ids = self.key_line(key)
        filler_total = length - len(self.prefix) - len(key_ids) - len(self.question)
        if filler_total < 0:
            raise UserError(f"passkey prompt ({self.task.variant}) needs at least {length - filler_total} tokens; "
                            f"{length} asked (use a longer length or the compact variant)")
        before = round(depth * filler_total)
        filler = self.filler(filler_total)
        ids = self.prefix + filler[:before] + key_ids + filler[before:] + self.question
        assert len(ids) == length
        return Prompt(ids, self.answer(key), key, len(self.prefix) + before, depth)

    def trial(self, length: int, depth: float, trial: int) -> Prompt:
        gen = trial_generator(self.task, length, depth, trial)
        return self.build(length, depth, random_key(gen, self.task.key_digits))

    def distractors(self, prompt: Prompt, trial: int) -> list[int]:
        """`distractors` other keys of the same width, fixed per trial."""
        gen = torch.Generator().manual_seed(hash_ints(self.task.seed, prompt.key, trial, 7))
        keys: list[int] = []
        while len(keys) < self.task.distractors:
            k = random_key(gen, self.task.key_digits)
            if k != prompt.key and k not in keys:
                keys.append(k)
        return keys

    def training_row(self, gen: torch.Generator, length: int, answer_only: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (length + 1,), loss mask (length,)): a prompt plus its answer filling a training row, the
        loss on the answer only (or on every token with `answer_only=False`; measured: it learns retrieval
        more slowly, the filler's easy targets dominate the gradient)."""
        key = random_key(gen, self.task.key_digits)
        answer = self.answer(key)
        depth = float(torch.rand(1, generator=gen))
        prompt = self.build(length + 1 - len(answer), depth, key)
        tokens = torch.tensor(prompt.ids + answer, dtype=torch.int64)
        mask = torch.zeros(length) if answer_only else torch.ones(length)
        mask[len(prompt.ids) - 1 :] = 1.0  # targets at these indices are the answer tokens
        return tokens, mask
