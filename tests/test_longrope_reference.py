"""LongRoPE's search starts where the authors' code does: a port, written from reading it, of how
microsoft/LongRoPE at commit c9e56aa54007c328399677232a489feec446e4b8 builds its first population:
`evolution/search.py` (the default initial factors, from the `inv_freq_mask` of the YaRN module in
`rope/yarn.py`) and `evolution/algorithms/genetic_base.py` (`run_genetic_algorithm`: the initial factors,
then mutations of them). The project's start must equal the port's, and the numbers of the showcase model
(s = 8) and of SmolLM2 (s = 2) are pinned, beside the default long list they are not."""

import math

import numpy as np
import pytest
import torch

from extrapolate.encodings.frequencies import longrope_default_long
from extrapolate.run.longrope_search import Evolution, SearchSettings, first_candidate

# the reference's YaRN betas for every model but Mistral's (`--yarn-settings llama`, its default)
LLAMA_BETAS = (32, 1)


def correction_dim(rotations: float, dim: int, base: float, original_len: int) -> float:
    """`find_correction_dim`: the pair index whose wavelength fits `rotations` turns into the original length."""
    return (dim * math.log(original_len / (rotations * 2 * math.pi))) / (2 * math.log(base))


def correction_range(beta_fast: float, beta_slow: float, dim: int, base: float, original_len: int):
    """`find_correction_range`: the ramp's ends, floored and ceiled, clamped to [0, dim - 1] (dim is the head's
    size there, not the number of pairs)."""
    low = math.floor(correction_dim(beta_fast, dim, base, original_len))
    high = math.ceil(correction_dim(beta_slow, dim, base, original_len))
    return max(low, 0), min(high, dim - 1)


def linear_ramp_mask(low: float, high: float, pairs: int) -> torch.Tensor:
    """`linear_ramp_mask`: 0 up to `low`, 1 from `high`, linear between; (pairs,) float32."""
    if low == high:
        high += 0.001
    return torch.clamp((torch.arange(pairs, dtype=torch.float32) - low) / (high - low), 0, 1)


def reference_first_candidate(head_dim: int, base: float, target_length: int, original_length: int) -> np.ndarray:
    """`search.py` without `--init-factors`: length_scale = L'/L, the YaRN module's inv_freq_mask (1 - the ramp,
    times its extrapolation_factor 1), then length_scale·(1 - mask) + 1.0·mask, in float32."""
    length_scale = target_length / original_length
    low, high = correction_range(*LLAMA_BETAS, head_dim, base, original_length)
    inv_freq_mask = (1 - linear_ramp_mask(low, high, head_dim // 2).float()) * 1  # (d/2,)
    inv_freq = length_scale * (1 - inv_freq_mask) + 1.0 * inv_freq_mask  # (d/2,)
    return inv_freq.numpy().flatten()


def reference_first_population(init: np.ndarray, size: int, mutate) -> list[np.ndarray]:
    """`run_genetic_algorithm`'s first population: the initial factors, then `size - 1` mutations of them
    (its `indv` is bound at i == 0 only, so every mutation starts from the initial factors)."""
    population = []
    for i in range(size):
        if i == 0:
            first = init
            population.append(first)
        else:
            population.append(mutate(first))
    return population


# (head_dim, base, L', L): the showcase's `small` model (width 128, 4 heads) at s = 8; SmolLM2-135M (width 576,
# 9 heads, base 100000, context 8192) at s = 2; the `tiny` model of the command's test; two more shapes
CASES = [(32, 10000.0, 2048, 256), (64, 100000.0, 16384, 8192), (16, 10000.0, 128, 32)]
CASES += [(128, 500000.0, 32768, 4096), (8, 10000.0, 1024, 64)]


@pytest.mark.parametrize("head_dim,base,target,original", CASES)
def test_the_first_candidate_is_the_references(head_dim, base, target, original):
    ours = first_candidate(head_dim, base, target / original, original)
    np.testing.assert_array_equal(ours, reference_first_candidate(head_dim, base, target, original))


def test_the_showcase_start_at_s8():
    """The small model (head 32, base 10000, L = 256) at L' = 2048: the ramp runs over pairs 0 to 7, so the
    factors climb 1, 2 … 8; the default long list blends the frequencies instead, 8/(8 - k)."""
    start = first_candidate(32, 10000.0, 8.0, 256)
    expected = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] + [8.0] * 9
    assert start.tolist() == pytest.approx(expected, rel=1e-6)
    assert reference_first_candidate(32, 10000.0, 2048, 256).tolist() == pytest.approx(expected, rel=1e-6)
    default = [1.0, 8 / 7, 4 / 3, 1.6, 2.0, 8 / 3, 4.0] + [8.0] * 9
    assert longrope_default_long(32, 10000.0, 8.0, 256) == pytest.approx(default, rel=1e-6)


def test_the_smollm2_start_at_s2():
    """SmolLM2-135M (head 64, base 100000, L = 8192) at L' = 16384: the ramp runs over pairs 10 to 20, so 1.1,
    1.2 … 1.9 between; the default long list there is 20/(20 - k), and 9 of the 32 pairs differ."""
    start = first_candidate(64, 100000.0, 2.0, 8192)
    expected = [1.0] * 11 + [1 + k / 10 for k in range(1, 10)] + [2.0] * 12
    assert start.tolist() == pytest.approx(expected, rel=1e-6)
    assert reference_first_candidate(64, 100000.0, 16384, 8192).tolist() == pytest.approx(expected, rel=1e-6)
    default = np.array(longrope_default_long(64, 100000.0, 2.0, 8192))
    assert default[11:20].tolist() == pytest.approx([20 / (20 - k) for k in range(1, 10)], rel=1e-6)
    differ = ~np.isclose(start, default, rtol=1e-6)
    assert differ.sum() == 9 and np.flatnonzero(differ).tolist() == list(range(11, 20))


def test_the_rest_of_the_first_population_are_mutations_of_the_first_candidate():
    """The project's first population against the port's, both drawing from one seeded generator: the same
    candidates, in order, so each is a mutation of the first (not of the candidate before it)."""
    init, settings = first_candidate(32, 10000.0, 8.0, 256), SearchSettings(population=16, iterations=1, seed=7)
    searched = Evolution(lambda f: float(f.sum()), init, 8.0, settings)
    searched.run()
    replay = Evolution(lambda f: float(f.sum()), init, 8.0, settings)

    def mutate(factors: np.ndarray) -> np.ndarray:
        mutated = replay.mutated(factors)
        replay.evaluate(mutated)  # seen from now on, as the reference's history holds it
        return mutated

    replay.evaluate(init)
    ported = reference_first_population(init, settings.population, mutate)
    ours = [c.factors for c in searched.history[: settings.population]]
    assert len(ours) == len(ported) == settings.population
    assert all(np.array_equal(a, b) for a, b in zip(ours, ported))
    assert np.array_equal(ours[0], init)
