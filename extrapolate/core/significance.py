"""Whether a paired difference is more than chance, and what many such questions asked at once allow.

- `sign_flip_p`: the exact two-sided p-value of a paired difference (the same prompts asked two ways): under
  "no effect" each prompt's difference is as likely to have the other sign, so the p-value is the share of the
  2^n sign patterns whose sum is at least as far from 0 as the one observed. Prompts that did not move add
  nothing. For 0-or-1 scores this is the exact McNemar test (a binomial test on the discordant prompts); for
  partial credit it needs no normal approximation either. Computed exactly, by the distribution of the signed
  sum built prompt by prompt, wherever scores are fractions with small denominators (every task here).
- `holm`: Holm's step-down adjustment of a family of p-values, so that "some cell moved" is claimed at 5% over
  the whole family rather than at 5% per cell (44 cells at 95% give about two by chance alone).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

MAX_DENOMINATOR = 10**6  # a difference is read as the nearest fraction with at most this denominator
EXACT_SUMS = 1 << 16  # distinct signed sums kept before the exact count gives way to sampling
DRAWS = 200_000
CHUNK = 10_000  # sign patterns drawn at a time: memory stays CHUNK × prompts
SEED = 0


def sign_flip_p(first: Sequence[float], second: Sequence[float]) -> float:
    """The two-sided sign-flip p-value of mean(second - first) against 0, prompt by prompt (the two lists in
    the same prompt order); 1.0 where no prompt moved. Each difference is read as a fraction (2/3 − 1/3 as 1/3,
    not as the float 0.33333333333333326) and the signed sums are counted in exact integers on their common
    denominator, as long as there are at most `EXACT_SUMS` distinct sums (scores that are fractions with small
    denominators, as RULER's and the passkey's are); otherwise from `DRAWS` random sign patterns of a fixed
    seed, the observed pattern counted once."""
    if len(first) != len(second):
        raise ValueError(f"paired scores differ in number: {len(first)} and {len(second)}")
    differences = [float(b) - float(a) for a, b in zip(first, second)]
    if not all(math.isfinite(d) for d in differences):
        raise ValueError("paired scores must be finite numbers (a NaN or infinity was given)")
    exact = [Fraction(d).limit_denominator(MAX_DENOMINATOR) for d in differences]
    scale = math.lcm(*(f.denominator for f in exact))
    signed = [int(f * scale) for f in exact]  # integers: the differences on their common denominator
    moved = [abs(d) for d in signed if d]
    observed = abs(sum(signed))
    # the distribution of the signed sum: {sum: number of sign patterns giving it}, prompt by prompt
    ways: dict[int, int] = {0: 1}
    for d in moved:
        grown: dict[int, int] = defaultdict(int)
        for total, count in ways.items():
            grown[total + d] += count
            grown[total - d] += count
        ways = grown
        if len(ways) > EXACT_SUMS:
            return sampled_p([d / scale for d in moved], observed / scale)
    return sum(count for total, count in ways.items() if abs(total) >= observed) / 2 ** len(moved)


def sampled_p(moved: list[float], observed: float) -> float:
    """The sign-flip p-value from random sign patterns: (1 + patterns at least as far out) / (1 + draws)."""
    rng = np.random.default_rng(SEED)
    sizes = np.asarray(moved, dtype=np.float64)  # (moved prompts,)
    reach = observed - 1e-9 * max(1.0, observed)  # float sums of equal value may differ in the last bits
    far = 0
    for start in range(0, DRAWS, CHUNK):
        signs = rng.choice((-1.0, 1.0), size=(min(CHUNK, DRAWS - start), sizes.size))  # (chunk, moved prompts)
        far += int((np.abs(signs @ sizes) >= reach).sum())
    return (1 + far) / (1 + DRAWS)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: the k-th smallest of m is multiplied by m - k + 1, and
    the adjusted values are made non-decreasing in that order and capped at 1."""
    if any(not 0.0 <= p <= 1.0 for p in p_values):  # a NaN fails this too
        raise ValueError("p-values must lie in [0, 1] (a NaN or a value outside was given)")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
