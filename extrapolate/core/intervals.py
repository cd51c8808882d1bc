"""95% intervals of a measured cell, one method a kind of cell; a row records its `n`, `ci_low`, `ci_high` and
`ci_method`. Their coverage at the sizes the project measures is checked by simulation
(tests/test_interval_coverage.py; the table in docs/results.md).

| cell | unit | method (`ci_method`) |
|---|---|---|
| a share of prompts, each scored 0 or 1 | prompt | the exact (Clopper–Pearson) interval (`clopper-pearson`) |
| a mean of partial credit in [0, 1] | prompt | the same at the mean (`clopper-pearson-at-mean`) |
| a perplexity | document | Student's t over documents (`t-documents`); none from one document |
| a perplexity at one length against another | document | t over documents of the paired difference |

- Wilson's score interval covers 0-or-1 scores at only 0.92 at 20 prompts and p = 0.05 (it oscillates below
  0.95 near the ends). The exact interval inverts the binomial test itself, so it covers at 0.95 or more at
  every n and p; at every prompt right it is the tightest of the covering ones (20 of 20: [83–100], where
  Wilson's with continuity correction gives [80–100]).
- A score in [0, 1] with mean p varies by at most p(1 − p), the variance of a 0-or-1 score with that mean (the
  0-or-1 score is the widest in the convex order), so the proportion's interval at the mean covers a mean of
  partial credit too, at any n and near 0 and 1, where a bootstrap of 5–25 prompts does not (0.83–0.88). One
  method for every score also keeps the ranking: at equal n a higher mean never gets a lower interval.
- A perplexity is exp of the token-weighted mean NLL, R = Σ nll_d / Σ tokens_d over documents d. Its interval
  is Student's t with docs − 1 degrees of freedom on R, whose standard error comes from the residuals
  nll_d − R·tokens_d (the linearised ratio estimator; with equal tokens per document, the t interval of the
  documents' mean NLLs). A percentile bootstrap of 2 documents has three possible means and covers half the
  time. Windows of one document are not independent units, so one document gives no interval.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from extrapolate.core.distributions import beta_quantile, student_t_quantile

PROPORTION, AT_MEAN, DOCUMENTS = "clopper-pearson", "clopper-pearson-at-mean", "t-documents"  # the rows' `ci_method`
NO_INTERVAL = (math.nan, math.nan)
# the confidence level every method here and the interval over seeds (report/stats.py) compute at: 95% unless a
# caller asks for another (a family-wise correction reads a finding at the level where it stops holding)
LEVEL = contextvars.ContextVar("interval_level", default=0.95)


@contextlib.contextmanager
def confidence(level: float) -> Iterator[None]:
    """Every interval computed inside the block at `level` (0 < level ≤ 1) instead of 95%; at 1 every interval
    is the whole range a quantity can take (what a statement still says with no certainty about any cell)."""
    if not 0 < level <= 1:
        raise ValueError(f"a confidence level is in (0, 1], got {level}")
    token = LEVEL.set(level)
    try:
        yield
    finally:
        LEVEL.reset(token)


def t_quantile(df: float) -> float:
    """Student's t quantile of the two-sided interval at the current level (at 95%: its 0.975 quantile);
    infinite at level 1."""
    level = LEVEL.get()
    return math.inf if level >= 1 else student_t_quantile((1 + level) / 2, df)


def proportion_interval(successes: float, n: float) -> tuple[float, float]:
    """The exact (Clopper–Pearson) 95% interval of successes / n, through the beta quantiles
    B⁻¹(0.025; x, n − x + 1) and B⁻¹(0.975; x + 1, n − x), which are defined at a fractional x too (a sum of
    partial credit) and grow with it; (nan, nan) for n = 0. Exactly 0 (1) at no (every) success."""
    return _exact(float(successes), float(n), LEVEL.get())


@functools.lru_cache(maxsize=65536)
def _exact(successes: float, n: float, level: float) -> tuple[float, float]:
    if n <= 0:
        return NO_INTERVAL
    if level >= 1:
        return 0.0, 1.0
    x, tail = min(max(successes, 0.0), n), (1 - level) / 2
    low = 0.0 if x <= 0 else beta_quantile(tail, x, n - x + 1)
    high = 1.0 if x >= n else beta_quantile(1 - tail, x + 1, n - x)
    return low, high


def score_interval(scores: Sequence[float]) -> tuple[float, float, str]:
    """(low, high, method) of the mean of per-prompt scores in [0, 1]: the proportion's interval at the mean,
    named `clopper-pearson` where every score is 0 or 1 and `clopper-pearson-at-mean` where some are partial
    credit."""
    scores = [float(s) for s in scores]
    if any(not 0.0 <= s <= 1.0 for s in scores):  # a NaN fails this too
        raise ValueError("scores must lie in [0, 1]")
    low, high = proportion_interval(math.fsum(scores), len(scores))
    return low, high, PROPORTION if all(s in (0.0, 1.0) for s in scores) else AT_MEAN


def _ratio_and_residuals(nll_sums: Sequence[float], tokens: Sequence[float]) -> tuple[float, np.ndarray]:
    """(R, residual per document divided by the mean tokens) of the token-weighted mean NLL."""
    y = np.asarray(nll_sums, dtype=np.float64)  # (docs,)
    x = np.asarray(tokens, dtype=np.float64)  # (docs,)
    if y.shape != x.shape:
        raise ValueError(f"{y.size} NLL sums and {x.size} token counts")
    ratio = float(y.sum() / x.sum())
    return ratio, (y - ratio * x) / x.mean()


def _t_half_width(values: np.ndarray) -> float:
    """The Student-t half-width (at the current level) of the mean of `values`, one value a unit, units − 1 df."""
    n = values.size
    sd = float(np.sqrt(((values - values.mean()) ** 2).sum() / (n - 1)))
    return t_quantile(n - 1) * sd / math.sqrt(n)


def nll_interval(nll_sums: Sequence[float], tokens: Sequence[float]) -> tuple[float, float]:
    """95% interval of the token-weighted mean NLL Σ nll_sums / Σ tokens over documents (the module's
    docstring); (nan, nan) from fewer than two documents or none scored."""
    if len(nll_sums) < 2 or sum(tokens) <= 0:
        return NO_INTERVAL
    ratio, residuals = _ratio_and_residuals(nll_sums, tokens)
    half = _t_half_width(residuals)
    return ratio - half, ratio + half


def nll_difference(
    nll_sums: Sequence[float], tokens: Sequence[float], base_sums: Sequence[float], base_tokens: Sequence[float]
) -> tuple[float, float, float]:
    """(difference, low, high): the token-weighted mean NLL minus the base's, the same documents in the same
    order scored twice (one model at two lengths, or two methods on one model), with the 95% t interval of
    the difference paired by document. exp of each is the perplexity ratio and its interval. (nan, nan, nan)
    from fewer than two documents."""
    if len(nll_sums) != len(base_sums):
        raise ValueError(f"paired documents differ in number: {len(nll_sums)} and {len(base_sums)}")
    if len(nll_sums) < 2:
        return math.nan, *NO_INTERVAL
    ratio, residuals = _ratio_and_residuals(nll_sums, tokens)
    base, base_residuals = _ratio_and_residuals(base_sums, base_tokens)
    half = _t_half_width(residuals - base_residuals)
    return ratio - base, ratio - base - half, ratio - base + half


def paired_difference(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of second - first, prompt by prompt (the two lists in the same prompt order), each
    score in [0, 1]; (nan, nan, nan) for fewer than two prompts.

    Each prompt moves up, down or not at all; the mean difference is the share moving up less the share moving
    down, in units of the largest move seen (1 for 0-or-1 scores, 1/4 where partial credit moves by quarters).
    Each share gets the exact interval and the two are combined by Newcombe's square-and-add (his method 10 for
    paired proportions), with the covariance two shares of one sample have. It keeps the pairing, so it is far
    narrower than the two cells' own intervals where the prompts move together, and it is not zero-wide where no
    prompt moved (then in whole units: 20 prompts alike still allow a few to move)."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in number: {a.size} and {b.size}")
    n = a.size
    if n < 2:
        return math.nan, *NO_INTERVAL
    difference = b - a  # (prompts,)
    unit = float(np.abs(difference).max()) or 1.0
    up, down = float(difference.clip(min=0).sum()) / unit, float((-difference).clip(min=0).sum()) / unit
    p_up, p_down = up / n, down / n
    up_low, up_high = proportion_interval(up, n)
    down_low, down_high = proportion_interval(down, n)
    covariance = 2 * p_up * p_down / n  # cov(p_up, p_down) = −p_up·p_down / n widens their difference
    below = math.sqrt((p_up - up_low) ** 2 + (down_high - p_down) ** 2 + covariance)
    above = math.sqrt((up_high - p_up) ** 2 + (p_down - down_low) ** 2 + covariance)
    mean = float(difference.mean())
    low, high = max(mean - unit * below, -1.0), min(mean + unit * above, 1.0)
    # rounded past float noise (0.2 - 0.2 + … need not sum to 0 exactly), so "excludes 0" means it
    return tuple(round(x, 12) + 0.0 for x in (mean, low, high))
