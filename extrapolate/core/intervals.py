"""95% intervals of a measured cell, as its rows record them (`n`, `ci_low`, `ci_high`, `ci_method`).

- A proportion (greedy exact match over n prompts, every score 0 or 1): Wilson's score interval, which stays
  inside [0, 1] and is not zero-wide at 0 or n successes, unlike the normal approximation.
- A mean of partial-credit scores (RULER's `all`/`part` metrics): a percentile bootstrap over the prompts;
  where every prompt scored alike it has nothing to resample and would be zero-wide (25 prompts each finding
  one of four values: 25 [25–25]), and Wilson's interval at the mean is given instead: a score in [0, 1] with
  mean p varies by at most p(1 − p), a 0-or-1 score's variance, so it is the widest the prompts allow.
- A perplexity: a percentile bootstrap over documents (over windows where one document is scored) of the
  token-weighted mean NLL, exponentiated for the perplexity row.
- A difference between two conditions on the same prompts (plain and chat-templated): a percentile bootstrap
  over the prompts of the mean per-prompt difference, which is far narrower than two cells' own intervals
  where the prompts' scores move together.

Bootstraps draw from a fixed seed, so the same scores always give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054  # the standard normal's 0.975 quantile
RESAMPLES = 2000
SEED = 0


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion successes / n; (nan, nan) for n = 0."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact at the ends, not rounding's 1e-17
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def bootstrap_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of sum(numerators) / sum(denominators), units resampled with
    replacement (a mean of scores: denominators all 1; a token-weighted NLL: per-document sums and tokens);
    (nan, nan), no interval, for fewer than two units."""
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.size == 0 or den.sum() <= 0:
        return math.nan, math.nan
    if num.size == 1:  # one unit: nothing to resample, and a zero-wide interval would claim no uncertainty
        return math.nan, math.nan
    draws = np.random.default_rng(SEED).integers(0, num.size, size=(RESAMPLES, num.size))  # (R, units)
    ratios = num[draws].sum(1) / np.maximum(den[draws].sum(1), 1e-300)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(low), float(high)


ALIKE = "wilson-at-mean"  # the `ci_method` of a partial-credit mean whose prompts all scored alike


def score_interval(scores: Sequence[float]) -> tuple[float, float, str]:
    """(low, high, method) of the mean of per-prompt scores in [0, 1]: Wilson where every score is 0 or 1; the
    bootstrap over prompts where some are partial credit, or Wilson's at the mean where those all scored alike
    (the module's docstring)."""
    total = float(sum(scores))
    if all(s in (0.0, 1.0) for s in scores):
        low, high = wilson(total, len(scores))
        return low, high, "wilson"
    if len(set(scores)) == 1:
        low, high = wilson(total, len(scores))
        return low, high, ALIKE
    low, high = bootstrap_ratio(scores, [1.0] * len(scores))
    return low, high, "bootstrap-prompts"


def paired_difference(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of second - first, prompt by prompt (the two lists in the same prompt order): the
    95% percentile bootstrap over prompts of the mean difference; (nan, nan, nan) for fewer than two prompts.
    Where every prompt moved alike (most often: none moved) it is zero-wide, and says only that."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in number: {a.size} and {b.size}")
    if a.size < 2:
        return math.nan, math.nan, math.nan
    difference = b - a  # (prompts,)
    draws = np.random.default_rng(SEED).integers(0, a.size, size=(RESAMPLES, a.size))  # (R, prompts)
    low, high = np.quantile(difference[draws].mean(1), [0.025, 0.975])
    # rounded past float noise (0.2 - 0.2 + … need not sum to 0 exactly), so "excludes 0" means it
    return tuple(round(float(x), 12) + 0.0 for x in (difference.mean(), low, high))
