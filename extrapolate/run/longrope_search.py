"""LongRoPE's search (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"): the
per-pair rescale factors λ_j of its long list (θ_j / λ_j past L) for a target length L' = s·L, found by the
genetic algorithm of the authors' `evolution/` code (microsoft/LongRoPE, its `dim_mono` algorithm), whose
fitness is the model's perplexity at L'.

- A candidate is a list of factors, one a pair, non-decreasing from the fastest pair to the slowest (the
  monotone constraint) and on a grid of `step` (0.01) in [1, 1 + s], as the reference's mutation draws them.
- The first candidate is the reference's default start (`evolution/search.py`, commit c9e56aa5): YaRN's ramp
  r_j over the pairs (β_fast 32, β_slow 1, its ends floored and ceiled: the reference's Llama setting) blends
  the factors linearly, λ_j = s·r_j + 1·(1 - r_j): 1 for the fast pairs, s for the slow ones, evenly spaced
  between (the showcase model at s = 8: 1, 2, 3 … 8). It is not `--encoding longrope`'s default long list,
  θ_j/θ_j(YaRN) = 1/(1 - r_j·(1 - 1/s)), which blends the frequencies instead (there 1, 1.14, 1.33 … 4, 8).
  The rest of the first population are mutations of it, as in the reference.
- Each iteration keeps the best `parents`, then adds `mutations` mutated parents and `crossovers` children of
  two parents (each factor taken from the second with probability 0.3 · 0.5, retried while the child breaks
  the constraint or repeats a candidate seen); a crossover that finds no new child mutates its first parent.
- No candidate is evaluated twice. One numpy Generator, seeded, draws every choice: the same seed and the same
  fitness give the same search.
- A stopped search resumes: each candidate's perplexity is kept as it is measured (`SearchLog`, beside the
  result), and the search run again replays the same draws, reading the candidates it measured before instead
  of measuring them again (at L' = 16k on a CPU a candidate is minutes).

The result is a `long_factor` list that `--encoding longrope --encoding-option long_factor=…` applies.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from extrapolate.core.atomic import write_text
from extrapolate.core.errors import UserError

MUTATE_PROBABILITY = 0.3  # each factor of a mutated candidate is redrawn with this probability (the reference's)
CROSSOVER_TAKE = 0.5  # a factor picked for crossover comes from the second parent with this probability
MAX_MUTATION_TRIES = 1000  # a mutation that keeps landing on seen candidates gives up (a tiny search space)
# the reference's YaRN betas for the start's ramp (its Llama setting; Mistral's are 128 and 2)
START_BETA_FAST, START_BETA_SLOW = 32.0, 1.0


@dataclass(frozen=True)
class SearchSettings:
    """The genetic algorithm's sizes (the reference's defaults are 64, 40, 32, 16, 16: a GPU's budget; these are a
    CPU's)."""

    population: int = 16
    iterations: int = 4
    parents: int = 8
    mutations: int = 4
    crossovers: int = 4
    step: float = 0.01
    max_crossover_try: int = 20
    seed: int = 0

    def check(self) -> SearchSettings:
        for name in ("population", "iterations", "parents", "mutations", "crossovers", "max_crossover_try"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.parents > self.population:
            raise UserError(f"--parents ({self.parents}) must be at most --population ({self.population})")
        if not 0 < self.step <= 1:
            raise UserError(f"--step must be in (0, 1], got {self.step:g}")
        return self


@dataclass
class Candidate:
    factors: np.ndarray  # (Dh/2,) float64, non-decreasing
    ppl: float


def monotone(factors: np.ndarray) -> bool:
    return bool(np.all(np.diff(factors) >= 0))


def first_candidate(head_dim: int, base: float, scale: float, original_len: int) -> np.ndarray:
    """The reference's first candidate, (d/2,): s·(1 - mask) + 1·mask with mask = 1 - YaRN's ramp, in float32
    as the reference computes it (its mask is the YaRN module's `inv_freq_mask`), so 1 for the fast pairs, s
    for the slow ones and evenly spaced factors between."""
    # imported here, as in `search`: the command's options import this module, and torch is slow to load
    from extrapolate.encodings.frequencies import yarn_ramp

    ramp = yarn_ramp(head_dim, base, original_len, START_BETA_FAST, START_BETA_SLOW, truncate=True)  # (d/2,)
    mask = 1 - ramp  # (d/2,) float32: 1 where a pair is kept (extrapolated)
    return (scale * (1 - mask) + 1.0 * mask).double().numpy()


class Evolution:
    """The search over factor lists, given a fitness (factors -> perplexity, lower is better)."""

    def __init__(
        self, fitness: Callable[[np.ndarray], float], init: np.ndarray, scale: float, settings: SearchSettings
    ):
        if not monotone(init):
            raise UserError("the initial factors must be non-decreasing from the fastest pair to the slowest")
        self.fitness, self.init, self.scale, self.settings = fitness, np.asarray(init, float), scale, settings
        self.rng = np.random.default_rng(settings.seed)
        self.history: list[Candidate] = []  # every candidate evaluated, in order
        self.top = 1.0 + scale  # the grid's last value, as the reference's mutation bounds it

    def seen(self, factors: np.ndarray) -> bool:
        return any(np.allclose(factors, c.factors) for c in self.history)

    def evaluate(self, factors: np.ndarray) -> Candidate:
        candidate = Candidate(factors.copy(), float(self.fitness(factors)))
        self.history.append(candidate)
        return candidate

    def grid(self, low: float, high: float) -> np.ndarray:
        return np.arange(low, high, self.settings.step)

    def mutated(self, parent: np.ndarray) -> np.ndarray | None:
        """The reference's mutation: each factor, with probability 0.3, redrawn from the grid between its
        neighbours (the first from 1, the last up to 1 + s), until the list is new and non-decreasing."""
        step, factors = self.settings.step, parent.copy()
        for _ in range(MAX_MUTATION_TRIES):
            if not self.seen(factors) and monotone(factors):
                return factors
            for dim in range(len(factors)):
                if self.rng.random() >= MUTATE_PROBABILITY:
                    continue
                if dim == 0:
                    choices = self.grid(1.0, factors[1]) if len(factors) > 1 else self.grid(1.0, self.top + step)
                elif dim == len(factors) - 1:
                    choices = self.grid(factors[dim - 1], self.top + step)
                else:
                    choices = self.grid(factors[dim - 1], factors[dim + 1] + step)
                if len(choices):
                    factors = factors.copy()
                    factors[dim] = choices[self.rng.integers(len(choices))]
        return None

    def crossed(self, first: np.ndarray, second: np.ndarray) -> np.ndarray | None:
        """The reference's crossover: factors of `first` replaced by `second`'s one at a time, the first new,
        non-decreasing list returned; None where the parents are equal or no such list turns up."""
        if np.allclose(first, second):
            return None
        child = first.copy()
        for _ in range(self.settings.max_crossover_try):
            for i in range(len(child)):
                if self.rng.random() < MUTATE_PROBABILITY:
                    child = child.copy()
                    if self.rng.random() < CROSSOVER_TAKE:
                        child[i] = second[i]
                    if self.seen(child) or not monotone(child):
                        continue
                    return child
        return None

    def run(self, on_candidate: Callable[[int, int, Candidate], None] = lambda *_: None) -> list[float]:
        """Search; returns the best perplexity after each iteration (the first: the initial population's)."""
        s = self.settings
        total = s.population + s.iterations * (s.mutations + s.crossovers)
        population = [self.evaluate(self.init)]
        on_candidate(len(self.history), total, population[0])
        while len(population) < s.population:
            factors = self.mutated(population[0].factors)
            if factors is None:  # the grid holds fewer lists than the population asks for
                break
            population.append(self.evaluate(factors))
            on_candidate(len(self.history), total, population[-1])
        best = []
        for _ in range(s.iterations):
            parents = sorted(population, key=lambda c: c.ppl)[: s.parents]
            best.append(parents[0].ppl)
            population = list(parents)
            for _ in range(s.mutations):
                factors = self.mutated(parents[self.rng.integers(len(parents))].factors)
                if factors is not None:
                    population.append(self.evaluate(factors))
                    on_candidate(len(self.history), total, population[-1])
            for _ in range(s.crossovers):
                if len(parents) < 2:
                    break
                i, j = sorted(self.rng.choice(len(parents), 2, replace=False))
                factors = self.crossed(parents[i].factors, parents[j].factors)
                factors = self.mutated(parents[i].factors) if factors is None else factors
                if factors is not None:
                    population.append(self.evaluate(factors))
                    on_candidate(len(self.history), total, population[-1])
        best.append(min(c.ppl for c in population))
        return best

    def best(self) -> Candidate:
        return min(self.history, key=lambda c: c.ppl)


class SearchLog:
    """The candidates a search has measured, kept on disk (`<out>.partial`) while it runs and removed with the
    result. It is keyed by everything a perplexity depends on (the run id: model, evaluation data, dtype;
    L', the settings), so a log of another search is ignored; a damaged log is ignored too (the candidates are
    then measured again)."""

    def __init__(self, path: Path, identity: dict):
        self.path, self.identity = Path(path), identity
        self.measured = self._read()

    def _read(self) -> list[Candidate]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("identity") != self.identity:
                return []
            return [Candidate(np.array(c["long_factor"], float), float(c["ppl"])) for c in data["candidates"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def lookup(self, factors: np.ndarray) -> float | None:
        return next((c.ppl for c in self.measured if np.array_equal(c.factors, factors)), None)

    def add(self, factors: np.ndarray, ppl: float) -> None:
        self.measured.append(Candidate(factors.copy(), ppl))
        candidates = [{"long_factor": c.factors.tolist(), "ppl": c.ppl} for c in self.measured]
        write_text(self.path, json.dumps({"identity": self.identity, "candidates": candidates}))

    def logged(self, fitness: Callable[[np.ndarray], float]) -> Callable[[np.ndarray], float]:
        """`fitness`, read from the log where the candidate was measured before, else measured and logged."""

        def measure(factors: np.ndarray) -> float:
            ppl = self.lookup(factors)
            if ppl is None:
                ppl = float(fitness(factors))
                self.add(factors, ppl)
            return ppl

        return measure

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def search(
    request,
    settings: SearchSettings,
    target: int,
    out: Path,
    on_candidate=lambda *_: None,
    on_resume=lambda n, path: None,
) -> dict:
    """Search the long list of `request`'s RoPE model (trained here, reused from the cache, or pretrained) for
    L' = `target` tokens; write the result (the factors, their perplexity, YaRN's and the initial list's, every
    candidate) to `out` as JSON and return it. A search stopped midway and started again with the same arguments
    resumes from its log (`on_resume` is told how many candidates it holds)."""
    from extrapolate.encodings import encoding_for
    from extrapolate.run.evaluate import trained_model
    from extrapolate.run.prepare import prepare
    from extrapolate.run.reporter import Reporter
    from extrapolate.run.resolution import resolve
    from extrapolate.run.resolved import resolve_run, task_setup
    from extrapolate.tasks.kinds import MeasureContext
    from extrapolate.tasks.perplexity import PERPLEXITY, exp

    settings.check()
    # measured at the target alone: --eval-len and --eval-lens (each warned of as ignored) give way to it
    request = dataclasses.replace(
        request, encoding="longrope", tasks=(PERPLEXITY.name,), eval_lens=(target,), eval_len=None
    )
    resolved = resolve(request)
    request = resolved.request
    if target <= request.train_len:
        raise UserError(f"--target ({target}) must be longer than the training length L ({request.train_len})")
    prepared = prepare(resolved)
    run = resolve_run(resolved, prepared)
    model = trained_model(run, prepared, Reporter()).model.to(prepared.device)
    model.use_kernel(request.kernel)
    setup, context = task_setup(run, prepared), MeasureContext(model, prepared.device, request.dtype)
    config, scale = model.config, run.factor

    def perplexity(name: str, **options) -> float:
        encoding = encoding_for(config, name, factor=scale, original_len=request.train_len, options=options)
        model.set_encoding(encoding.to(prepared.device))
        return exp(PERPLEXITY.measure(setup, context, target).nll)

    pairs = config.rotated_dim // 2

    def fitness(factors: np.ndarray) -> float:
        return perplexity("longrope", short_factor=[1.0] * pairs, long_factor=[float(f) for f in factors])

    init = first_candidate(config.rotated_dim, config.rope_base, scale, request.train_len)
    identity = {"run_id": run.run_id, "target": target, "settings": dataclasses.asdict(settings)}
    log = SearchLog(out.with_name(out.name + ".partial"), identity)
    if log.measured:
        on_resume(len(log.measured), log.path)
    evolution = Evolution(log.logged(fitness), init, scale, settings)
    best_by_iteration = evolution.run(on_candidate)
    best = evolution.best()
    result = {
        "model": request.model,
        "train_len": request.train_len,
        "target": target,
        "factor": scale,
        "settings": dataclasses.asdict(settings),
        "long_factor": [round(float(f), 6) for f in best.factors],
        "ppl": best.ppl,
        "initial_ppl": evolution.history[0].ppl,
        "yarn_ppl": perplexity("yarn"),
        "best_by_iteration": best_by_iteration,
        "candidates": [{"long_factor": c.factors.round(6).tolist(), "ppl": c.ppl} for c in evolution.history],
    }
    write_text(out, json.dumps(result, indent=1) + "\n")
    log.clear()
    return result
