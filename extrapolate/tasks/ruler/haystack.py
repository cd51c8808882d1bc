"""Haystacks sized in tokens: real text from held-out books with insertions at sentence boundaries, and
lists of lines (noise sentences, distractor needles, numbered words, documents) grown until the budget.

Every builder here returns token ids no longer than the budget it is given; the prompt builder tops the
context up to its exact length with the task's noise sentence."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

# RULER's insertion depths: 40 evenly spaced percentages, needles at distinct ones
DEPTHS = tuple(round(100 * i / 39) for i in range(40))
SENTENCE_ENDS = (".", "!", "?", '."', '!"', '?"', ".'", ".”", "!”", "?”")


def fit_count(
    make: Callable[[int], list[int]], budget: int, least: int = 0, most: int | None = None
) -> tuple[int, list[int]]:
    """The largest count in [`least`, `most`] whose tokens (`make(count)`, growing with the count) fit in
    `budget`, and those tokens; `make(least)` when even that does not fit (the caller checks)."""
    low, tokens = least, make(least)
    if len(tokens) > budget:
        return least, tokens
    high = max(1, least * 2)
    while True:  # grow until a count overflows, or the most there is fits
        if most is not None and high >= most:
            high = most
            candidate = make(most)
            if len(candidate) <= budget:
                return most, candidate
            break
        candidate = make(high)
        if len(candidate) > budget:
            break
        low, tokens = high, candidate
        high *= 2
    while high - low > 1:  # low fits, high does not
        middle = (low + high) // 2
        candidate = make(middle)
        if len(candidate) <= budget:
            low, tokens = middle, candidate
        else:
            high = middle
    return low, tokens


class Essay:
    """The essay haystack: the held-out documents (token ids) end to end from the first, repeated when a
    length needs more; the same text under every prompt of a task, as RULER's essay is."""

    def __init__(self, documents: Sequence[torch.Tensor], tokenizer):
        self.documents, self.tokenizer = list(documents), tokenizer
        self._texts: dict[int, str] = {}  # token -> its text, decoded once

    def tokens(self, count: int) -> list[int]:
        if not self.documents:
            raise ValueError("no held-out documents for the essay haystack")
        stream = torch.cat(self.documents)
        repeats = count // max(1, stream.numel()) + 1
        return stream.repeat(repeats)[:count].tolist()

    def ends_sentence(self, token: int) -> bool:
        text = self._texts.get(token)
        if text is None:
            text = self._texts[token] = self.tokenizer.decode([token])
        return text.rstrip().endswith(SENTENCE_ENDS)

    def insert(self, haystack: list[int], pieces: list[list[int]], depths: list[int]) -> tuple[list[int], int]:
        """`pieces` placed in `haystack` at the sentence boundary at or after each depth (percent), in order;
        the result and the index of the first piece."""
        boundaries = [i + 1 for i, t in enumerate(haystack) if self.ends_sentence(t)]
        out, start, first = [], 0, None
        for piece, depth in zip(pieces, sorted(depths)):
            target = len(haystack) * depth // 100
            at = next((b for b in boundaries if b >= max(target, start)), max(target, start))
            out += haystack[start:at]
            first = len(out) if first is None else first
            out += piece
            start = at
        return out + haystack[start:], (first if first is not None else len(out))


def insert_lines(lines: list[str], inserts: list[str], rng: random.Random) -> tuple[list[str], int]:
    """RULER's noise and needle haystacks: `inserts` before distinct random lines (in their order), never
    after the last line; the lines and the index of the first inserted line. A context too short for
    distinct lines (a length with fewer lines than inserts) shares positions."""
    n, k = len(lines), len(inserts)
    positions = sorted(rng.sample(range(n), k) if n >= k else rng.choices(range(n + 1), k=k))
    out = list(lines)
    for offset, (position, line) in enumerate(zip(positions, inserts)):
        out.insert(position + offset, line)
    return out, (positions[0] if positions else len(out))


def filler(unit: list[int], count: int) -> list[int]:
    """`count` tokens of a repeated unit, cut at token level."""
    return (unit * (count // max(1, len(unit)) + 1))[:count]
