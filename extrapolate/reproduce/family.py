"""The findings as one family: each finding's p-value, and Holm's adjustment over all of them.

A finding holds only where every part of its test holds on its 95% intervals (an intersection–union test). Its
p-value is the smallest α at which it still holds with every interval it reads computed at level 1 − α
(core/intervals.confidence): the largest of its parts' p-values, read off the intervals themselves, so that the
same cells and rules decide it at every level. Holm's step-down adjustment (core/significance.holm) then runs
over every finding of the family at once, and a finding survives it where its adjusted p-value is below 0.05: so
"30 findings at 95% each" becomes "these hold together at 95%".

A finding that holds even with every interval the whole range its quantity can take (level 1) reads no interval
that could fail (a deterministic one-window perplexity, a count of seeds): it has no p-value, and the pages say
it stands outside the correction. One that holds at α = 10⁻¹² is given p < 10⁻¹².
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from extrapolate.core.intervals import confidence
from extrapolate.core.significance import holm

ALPHA = 0.05
SMALLEST = 1e-12  # the smallest p-value told apart (the bisection's floor)
STEPS = 14  # bisection steps in log α between 10⁻¹² and 0.05: p to a factor of about 1.2


@dataclass(frozen=True)
class FamilyWise:
    p: float | None  # None: the finding reads no interval that could fail
    adjusted: float | None
    survives: bool


def holds_at(check, alpha: float) -> bool:
    with confidence(1 - alpha):
        return check().holds


def p_value(check) -> float | None:
    """The smallest α (to about a factor 1.2, at least 10⁻¹²) at which `check` holds with its intervals at level
    1 − α, searched up to 0.05: a part that says an interval straddles a bar or overlaps another holds the more
    surely the wider the intervals, so only below 0.05 is holding monotone in α. 1.0 (never surviving) where the
    finding does not hold at 95%; None where it holds with every interval the whole range (it reads none)."""
    if not holds_at(check, ALPHA):
        return 1.0
    if holds_at(check, 0.0):  # every interval the whole range: the finding reads none that could fail
        return None
    if holds_at(check, SMALLEST):
        return SMALLEST
    low_log, high_log = math.log(SMALLEST), math.log(ALPHA)  # fails at low, holds at high
    for _ in range(STEPS):
        middle = (low_log + high_log) / 2
        if holds_at(check, math.exp(middle)):
            high_log = middle
        else:
            low_log = middle
    return math.exp(high_log)


def family_wise(checks: dict[str, object]) -> dict[str, FamilyWise]:
    """{finding: its p-value, Holm-adjusted over every finding with one, and whether it survives}."""
    p = {name: p_value(check) for name, check in checks.items()}
    named = [name for name, value in p.items() if value is not None]
    adjusted = dict(zip(named, holm([p[name] for name in named])))
    return {
        name: FamilyWise(p[name], adjusted.get(name), adjusted.get(name, 1.0) < ALPHA and p[name] is not None)
        for name in checks
    }
