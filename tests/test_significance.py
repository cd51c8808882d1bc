"""The paired sign-flip test and Holm's adjustment (`core.significance`), against their definitions: McNemar's
exact binomial test for 0-or-1 scores, and the brute-force count over every sign pattern for partial credit."""

import itertools
import random
from math import comb

import pytest

from extrapolate.core import significance
from extrapolate.core.significance import holm, sign_flip_p


def brute_force(first, second):
    d = [b - a for a, b in zip(first, second)]
    observed = abs(sum(d))
    far = sum(
        abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-9
        for signs in itertools.product((-1, 1), repeat=len(d))
    )
    return far / 2 ** len(d)


@pytest.mark.parametrize("better, worse, same", [(7, 1, 10), (5, 5, 3), (0, 6, 19), (3, 0, 0), (12, 2, 11)])
def test_for_0_or_1_scores_it_is_mcnemars_exact_test(better, worse, same):
    first = [0] * better + [1] * worse + [1] * same
    second = [1] * better + [0] * worse + [1] * same
    n, k = better + worse, min(better, worse)
    mcnemar = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n) if better != worse else 1.0
    assert sign_flip_p(first, second) == pytest.approx(mcnemar, abs=1e-15)


def test_for_partial_credit_it_counts_every_sign_pattern():
    rng = random.Random(3)
    for _ in range(20):
        first = [rng.choice((0, 1 / 3, 2 / 3, 1)) for _ in range(10)]
        second = [rng.choice((0, 1 / 3, 2 / 3, 1)) for _ in range(10)]
        assert sign_flip_p(first, second) == pytest.approx(brute_force(first, second), abs=1e-12)


def test_nothing_moved_is_no_evidence_and_every_prompt_one_way_is_the_least_p():
    assert sign_flip_p([0.5, 1.0, 0.0], [0.5, 1.0, 0.0]) == 1.0
    assert sign_flip_p([0.0] * 6, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]) == pytest.approx(2 / 2**6)
    assert sign_flip_p([0.0, 1.0], [1.0, 0.0]) == 1.0  # one up, one down: the sum is 0
    with pytest.raises(ValueError, match="differ in number"):
        sign_flip_p([1.0], [1.0, 0.0])


def test_scores_off_any_lattice_are_sampled_and_agree_with_the_exact_count(monkeypatch):
    rng = random.Random(5)
    first = [rng.random() for _ in range(12)]
    second = [x + rng.gauss(0.15, 0.3) for x in first]
    exact = brute_force(first, second)
    monkeypatch.setattr(significance, "EXACT_SUMS", 64)  # force the sampled path
    sampled = sign_flip_p(first, second)
    assert sampled == pytest.approx(exact, abs=0.005)  # 200,000 draws: sd ≤ 0.0012
    assert sampled == sign_flip_p(first, second)  # a fixed seed: the same scores, the same p


def test_holm_multiplies_by_the_remaining_count_keeps_the_order_and_caps_at_one():
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.3, 0.6]) == pytest.approx([0.6, 0.6])
    assert holm([]) == []
    rng = random.Random(7)
    p = [rng.random() ** 3 for _ in range(30)]
    adjusted = holm(p)
    assert all(a >= x for a, x in zip(adjusted, p)) and max(adjusted) <= 1.0
    ranked = sorted(range(30), key=p.__getitem__)
    assert all(adjusted[i] <= adjusted[j] for i, j in zip(ranked, ranked[1:]))


def test_many_prompts_of_thirds_and_sevenths_stay_exact():
    """Fractions are summed on their common denominator, so 150 prompts of thirds (or 400 of sevenths) keep to
    a few hundred distinct sums and are counted exactly, equal to the count over the moved prompts' sizes."""
    rng = random.Random(11)
    for denominator, n in ((3, 150), (7, 400)):
        first = [rng.randrange(denominator + 1) / denominator for _ in range(n)]
        second = [rng.randrange(denominator + 1) / denominator for _ in range(n)]
        steps = [round((b - a) * denominator) for a, b in zip(first, second)]
        ways = {0: 1}
        for d in (abs(x) for x in steps if x):
            grown = {}
            for total, count in ways.items():
                for t in (total + d, total - d):
                    grown[t] = grown.get(t, 0) + count
            ways = grown
        moved = sum(1 for x in steps if x)
        expected = sum(c for t, c in ways.items() if abs(t) >= abs(sum(steps))) / 2**moved
        assert sign_flip_p(first, second) == expected


def test_nan_is_refused_not_read_as_a_number():
    with pytest.raises(ValueError, match="finite"):
        sign_flip_p([0.0, float("nan")], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.01, float("nan"), 0.02])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.5, 1.5])
