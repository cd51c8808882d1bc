"""The distributions the intervals need, exactly and without a SciPy dependency: the normal and Student's t
quantiles, through the regularised incomplete beta function."""

from __future__ import annotations

import math
from statistics import NormalDist


def normal_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def student_t_cdf(x: float, df: float) -> float:
    """P(T ≤ x) for Student's t with `df` degrees of freedom, through the regularised incomplete beta
    function: P(|T| > |x|) = I_{df/(df+x²)}(df/2, 1/2)."""
    if x == 0:
        return 0.5
    tail = 0.5 * _incomplete_beta(df / (df + x * x), df / 2, 0.5)
    return 1 - tail if x > 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The x with P(T ≤ x) = p (0 < p < 1), by bisection on the CDF (monotone, so exact to 1e-10)."""
    if not 0 < p < 1:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while student_t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """Regularised incomplete beta I_x(a, b) by its continued fraction (Lentz's method), using the symmetry
    I_x(a, b) = 1 − I_{1−x}(b, a) where the fraction converges slowly."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _incomplete_beta(1 - x, b, a)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1) < 1e-14:
            break
    return math.exp(log_front) * fraction / a


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(X ≤ x) for X ~ Beta(a, b): the regularised incomplete beta function."""
    return _incomplete_beta(x, a, b)


def beta_quantile(p: float, a: float, b: float) -> float:
    """The x with P(X ≤ x) = p for X ~ Beta(a, b), by bisection on the CDF (monotone; to 1e-12)."""
    if not 0 < p < 1:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if beta_cdf(mid, a, b) < p else (lo, mid)
    return (lo + hi) / 2
