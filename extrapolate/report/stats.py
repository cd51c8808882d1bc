"""Aggregation over seeds: the interval over several seeds' values of one cell."""

from __future__ import annotations

import math

from extrapolate.core.intervals import proportion_interval, t_quantile
from extrapolate.tasks.longppl import LONGPPL

# the values a metric can take: an interval over seeds (mean ± t·sd/√n, symmetric) is cut to them, as a score
# of 99% ± 4 over seeds says "95–100", not "95–103"
METRIC_BOUNDS = {
    "accuracy": (0.0, 1.0),
    "rank_accuracy": (0.0, 1.0),
    "score": (0.0, 1.0),
    "ppl": (1.0, math.inf),
    "nll": (0.0, math.inf),
    **dict(zip(LONGPPL.metrics, ((1.0, math.inf), (0.0, 1.0)))),  # a perplexity, a share
}


def seeds_interval(
    values, metric: str = "", pooled: tuple[float, float] | None = None
) -> tuple[float, float, float, float]:
    """Mean, half-width and 95% interval (low, high) of two or more seeds' values: the Student t interval,
    cut to the values `metric` can take (`METRIC_BOUNDS`). `pooled`: (successes, trials) of a proportion's
    prompts over every seed; the interval is then at least the proportion's interval over them
    (core/intervals.py), as seeds that happen to agree (a t interval of zero width) are still each a sample of
    prompts."""
    values = [float(v) for v in values]
    n = len(values)
    if n < 2:
        raise ValueError("an interval over seeds needs at least two seeds")
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n - 1) * sd / math.sqrt(n) if sd > 0 else 0.0
    floor, ceiling = METRIC_BOUNDS.get(metric, (-math.inf, math.inf))
    low, high = max(mean - half, floor), min(mean + half, ceiling)
    if pooled is not None and pooled[1] > 0:
        within_low, within_high = proportion_interval(pooled[0], pooled[1])
        low, high = min(low, within_low), max(high, within_high)
    return mean, half, low, high
