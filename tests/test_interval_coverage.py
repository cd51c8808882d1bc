"""The coverage of every interval method (core/intervals.py, the interval over seeds) on the grid of sizes the
project measures: cells of known mean drawn at random (report/coverage.py), each case at least 0.93 where an
interval is given, and docs/results.md's table equal to what the simulation gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

from extrapolate.report import coverage as sim


def results() -> dict[tuple[str, str, int], sim.Coverage]:
    return {(r.case.kind, r.case.population, r.case.n): r for r in sim.grid_coverage()}


def test_the_grid_is_the_one_the_project_measures():
    keys = results()
    assert {n for kind, _, n in keys if kind == "0 or 1"} == {5, 20, 25, 100}
    assert {p for kind, p, _ in keys if kind == "0 or 1"} == {"p = 0.05", "p = 0.5", "p = 0.95"}
    assert {n for kind, _, n in keys if kind == "a perplexity"} == {2, 4, 8, 20}
    assert len({p for kind, p, _ in keys if kind == "partial credit"}) == 3 and ("over seeds", "normal", 3) in keys
    assert sim.DRAWS >= 1000


@pytest.mark.parametrize("key", sorted(results()), ids=lambda k: f"{k[0]}|{k[1]}|n={k[2]}")
def test_every_interval_covers_its_mean(key):
    result = results()[key]
    assert result.given > 0.99, "every cell of two or more units is given an interval"
    assert result.covered >= sim.REQUIRED, f"{key}: covered {result.covered:.3f}"


def test_the_grid_catches_an_interval_that_does_not_cover():
    # plain Wilson at 20 prompts, p = 0.05, and a percentile bootstrap of 4 documents: the old methods
    def plain_wilson(k, n, z=1.959963984540054):
        p = k / n
        centre, half = (
            (p + z * z / (2 * n)) / (1 + z * z / n),
            z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)),
        )
        return centre - half, centre + half

    rng = np.random.default_rng(0)
    hits = [plain_wilson(k, 20)[0] <= 0.05 <= plain_wilson(k, 20)[1] for k in rng.binomial(20, 0.05, size=4000)]
    assert np.mean(hits) < sim.REQUIRED

    def bootstrap(values):
        draws = rng.integers(0, len(values), size=(500, len(values)))
        return tuple(np.quantile(np.asarray(values)[draws].mean(1), [0.025, 0.975]))

    covered = [lo <= 0 <= hi for lo, hi in (bootstrap(rng.standard_normal(4)) for _ in range(1000))]
    assert np.mean(covered) < sim.REQUIRED


def test_docs_show_the_coverage_table():
    assert sim.main(["--check"]) == 0, "run `python -m extrapolate.report.coverage --write`"
