"""How often each interval of core/intervals.py (and the interval over seeds) covers the mean it estimates:
cells of known mean drawn at random on the grid of sizes the project measures, each handed to the method its
rows use. tests/test_interval_coverage.py requires at least `REQUIRED` in every case given an interval, and
docs/results.md shows the table (`coverage_table`), re-made from this module.

Each case is a population of known mean: prompts scored 0 or 1; partial credit in quarters (RULER's
multi-key and multi-value shape: mostly 1, rarely partial near 0, even); documents whose mean NLL spreads as
the held-out plays' do, with unequal lengths; paired prompts (chat template against plain) and paired
documents (one model at two lengths); three seeds' values of a cell.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from extrapolate.core.intervals import nll_difference, nll_interval, paired_difference, score_interval
from extrapolate.report.stats import seeds_interval

REQUIRED = 0.93  # the least coverage a nominal 95% interval may show on the grid
DRAWS = 4000  # cells drawn a case: the coverage's Monte-Carlo standard error at 0.95 is about 0.0035
SEED = 0

QUARTERS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
SHAPES = {  # partial credit: probabilities of 0, ¼, ½, ¾, 1
    "quarters, mostly 1": np.array([0.0, 0.0, 0.05, 0.15, 0.8]),
    "quarters, rare partial credit near 0": np.array([0.85, 0.1, 0.05, 0.0, 0.0]),
    "quarters, even": np.full(5, 0.2),
}
PROMPTS = (5, 20, 25, 100)
DOCUMENTS = (2, 4, 8, 20)


@dataclass(frozen=True)
class Case:
    kind: str  # the kind of cell (its method's row in core/intervals.py)
    population: str
    n: int
    mean: float
    draw: Callable[[np.random.Generator], tuple[float, float]]  # one cell's (low, high)


def _scores(probabilities: np.ndarray, n: int) -> Callable:
    return lambda rng: score_interval(rng.choice(QUARTERS, size=n, p=probabilities).tolist())[:2]


def _level(rng: np.random.Generator, n: int, spread: float) -> np.ndarray:
    """n draws of a right-skewed spread (lognormal, σ = 0.25) with mean 0 and standard deviation `spread`."""
    sigma = 0.25
    raw = rng.lognormal(0.0, sigma, size=n)  # (n,)
    return spread * (raw - math.exp(sigma**2 / 2)) / math.sqrt((math.exp(sigma**2) - 1) * math.exp(sigma**2))


def _tokens(rng: np.random.Generator, n: int) -> np.ndarray:
    """Scored tokens a document: most reach the budget (8,192), one in five is shorter (2,000–8,192)."""
    short = rng.random(n) < 0.2
    return np.where(short, rng.integers(2000, 8193, size=n), 8192).astype(float)  # (n,)


def _documents(n: int) -> Callable:
    """A perplexity's documents: mean NLL per document skewed around 3.9 nats (the held-out plays differ by
    about ±0.15), most of them scored to the budget; the known mean is the population's token-weighted mean
    NLL. (Strongly unequal lengths, 1,000–8,192 tokens at random, with a skew of σ = 0.5 bring the t interval
    to about 0.90 at 4–8 documents: docs/results.md says so.)"""

    def draw(rng):
        tokens = _tokens(rng, n)
        per_token = 3.9 + _level(rng, n, 0.15)
        return nll_interval((per_token * tokens).tolist(), tokens.tolist())

    return draw


def _paired_documents(n: int) -> Callable:
    """One model's documents at L and at a longer length: the longer one's NLL rises by 0.3 nats on average,
    more on some documents than others, and moves with the document's own level (paired)."""

    def draw(rng):
        tokens = _tokens(rng, n)
        level = 3.9 + 0.15 * rng.standard_normal(n)  # (docs,)
        rise = 0.3 + _level(rng, n, 0.1)  # (docs,)
        return nll_difference(
            ((level + rise) * tokens).tolist(), tokens.tolist(), (level * tokens).tolist(), tokens.tolist()
        )[1:]

    return draw


def _paired_prompts(up: float, down: float, n: int) -> Callable:
    """Prompts asked two ways: each rises by one with probability `up`, falls by one with `down`."""

    def draw(rng):
        first = (rng.random(n) < 0.5).astype(float)  # (prompts,)
        move = rng.random(n)
        rises, falls = move < up, (move >= up) & (move < up + down)
        first[rises], first[falls] = 0.0, 1.0  # a rise starts at 0, a fall at 1
        second = first.copy()
        second[rises], second[falls] = 1.0, 0.0
        return paired_difference(first.tolist(), second.tolist())[1:]

    return draw


def _paired_credit(n: int) -> Callable:
    """Partial credit asked two ways: a prompt rises by a quarter with probability 0.3, falls by a quarter with
    0.1, and rarely (0.02) rises by a whole point."""

    def draw(rng):
        first = rng.choice([0.25, 0.5, 0.75], size=n)  # (prompts,)
        move = rng.random(n)
        second = np.where(move < 0.3, first + 0.25, np.where(move < 0.4, first - 0.25, first))
        whole = move > 0.98
        first[whole], second[whole] = 0.0, 1.0
        return paired_difference(first.tolist(), second.tolist())[1:]

    return draw


def _seeds(n: int) -> Callable:
    return lambda rng: seeds_interval((50.0 + 6.0 * rng.standard_normal(n)).tolist())[2:]


def cases() -> list[Case]:
    grid = []
    for n in PROMPTS:
        for p in (0.05, 0.5, 0.95):
            probabilities = np.array([1 - p, 0, 0, 0, p])
            grid.append(Case("0 or 1", f"p = {p}", n, p, _scores(probabilities, n)))
        for name, probabilities in SHAPES.items():
            grid.append(Case("partial credit", name, n, float(QUARTERS @ probabilities), _scores(probabilities, n)))
        for up, down in ((0.05, 0.0), (0.1, 0.1), (0.3, 0.05)):
            grid.append(Case("paired prompts", f"+{up:g} / −{down:g}", n, up - down, _paired_prompts(up, down, n)))
        credit_mean = 0.3 * 0.25 - 0.1 * 0.25 + 0.02 * 1.0  # the moves' mean, exactly
        grid.append(Case("paired prompts", "quarters, rarely a whole point", n, credit_mean, _paired_credit(n)))
    for n in DOCUMENTS:
        grid.append(Case("a perplexity", "skewed documents", n, 3.9, _documents(n)))
        grid.append(Case("paired documents", "a rise of 0.3 nats", n, 0.3, _paired_documents(n)))
    grid.append(Case("over seeds", "normal", 3, 50.0, _seeds(3)))
    return grid


@dataclass(frozen=True)
class Coverage:
    case: Case
    covered: float  # share of the drawn cells whose interval holds the mean, of those given one
    given: float  # share of drawn cells given an interval
    width: float  # mean width of the intervals given


def coverage(case: Case, draws: int = DRAWS) -> Coverage:
    rng = np.random.default_rng([SEED, zlib.crc32(f"{case.kind}|{case.population}".encode()), case.n])
    hits = given = 0
    width = 0.0
    for _ in range(draws):
        low, high = case.draw(rng)
        if math.isnan(low):
            continue
        given += 1
        width += high - low
        hits += low - 1e-12 <= case.mean <= high + 1e-12
    return Coverage(case, hits / max(given, 1), given / draws, width / max(given, 1))


def coverage_table(results: list[Coverage]) -> list[str]:
    """The docs' table: one line a case."""
    lines = ["| cell | population | n | covered | mean width |", "|---|---|---|---|---|"]
    for r in results:
        c = r.case
        lines.append(f"| {c.kind} | {c.population} | {c.n} | {r.covered:.3f} | {r.width:.3g} |")
    return lines


MARK_BEGIN = "<!-- coverage: generated by `python -m extrapolate.report.coverage --write` -->"
MARK_END = "<!-- /coverage -->"


@functools.cache
def grid_coverage() -> tuple[Coverage, ...]:
    """Every case's coverage (computed once a process: about ten seconds)."""
    return tuple(coverage(case) for case in cases())


def coverage_block() -> str:
    """The docs' generated block: the table of every case, between its markers."""
    lines = coverage_table(list(grid_coverage()))
    return "\n".join([MARK_BEGIN, *lines, MARK_END])


def main(argv: list[str] | None = None) -> int:
    """--write: re-make the table in docs/results.md; --check (default): exit 1 where it differs."""
    import sys
    from pathlib import Path

    from extrapolate.core.atomic import write_text

    args = sys.argv[1:] if argv is None else argv
    page = Path(__file__).resolve().parents[2] / "docs" / "results.md"
    text = page.read_text(encoding="utf-8")
    start, end = text.index(MARK_BEGIN), text.index(MARK_END) + len(MARK_END)
    block = coverage_block()
    if "--write" in args:
        write_text(page, text[:start] + block + text[end:])
        return 0
    return 0 if text[start:end] == block else 1


if __name__ == "__main__":
    raise SystemExit(main())
