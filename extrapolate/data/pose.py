"""PoSE, positional skip-wise training (Zhu et al., ICLR 2024): a fine-tune for a target length L' that reads
rows of the original window L, each row's position ids skipping ahead once so that, over the rows, every
relative distance up to L' - 1 is seen without a forward pass of L' tokens.

As the authors' `train_preprocess_function_pose` (dwzhu-pku/PoSE at 43b43b3, src/train_pose.py) builds a row
from a document cut at 5 windows: the first `first` tokens of the span, then a chunk ending at `end` that
completes the window, the two chunks' ids 0 … first-1 and first + shift …, with (randint inclusive of both ends)

    first ∈ [1, (n + 1) // 2],  end ∈ [n, span],  shift ∈ [0, L'' - n]

for a window of n tokens and ids below L''. Here a row is n = L + 1 tokens (L inputs and the last target)
with ids below L'' = L' + 1, so the inputs' ids stay below L', the furthest an evaluation at L' reaches. The
span is 5·n tokens of the training stream (the authors' documents are cut at 5 windows and may be shorter);
the draws come from the batch's generator, so a row depends on (seed, step) alone like every other."""

from __future__ import annotations

from dataclasses import dataclass

import torch

SPAN_WINDOWS = 5  # the authors cut each document at 5 windows: the second chunk ends within them


@dataclass(frozen=True)
class Skip:
    """One row's draws: the first chunk's length, where the second chunk ends in the span, the ids' skip."""

    first: int  # tokens of the first chunk, 1 … (n + 1) // 2
    end: int  # the second chunk ends here in the span, n … span
    shift: int  # the second chunk's ids start at first + shift, shift 0 … ids - n


def randint(generator: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], both ends included (Python's random.randint, which the authors draw with)."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


def draw_skip(generator: torch.Generator, n: int, span: int, ids: int) -> Skip:
    """The draws of a row of `n` tokens from a span of `span` tokens, its ids below `ids`."""
    first = randint(generator, 1, (n + 1) // 2)
    end = randint(generator, n, span)
    shift = randint(generator, 0, ids - n)
    return Skip(first, end, shift)


def skipped_tokens(span: torch.Tensor, n: int, skip: Skip) -> torch.Tensor:
    """span (S,) -> the row's n tokens (n,): the span's first `first`, then the n - first ending at `end`."""
    second_start = skip.end - (n - skip.first)
    return torch.cat([span[: skip.first], span[second_start : skip.end]])


def skipped_ids(n: int, skip: Skip) -> torch.Tensor:
    """(n,) int64 position ids: 0 … first - 1, then on from first + shift."""
    ids = torch.arange(n)
    ids[skip.first :] += skip.shift
    return ids


def span_length(n: int, stream_tokens: int) -> int:
    """Tokens of the span a row is cut from: 5 windows, or the whole stream where it is shorter."""
    return min(SPAN_WINDOWS * n, stream_tokens)
