"""`extrapolate longrope-search`: LongRoPE's evolutionary search of a RoPE model's long factors
(run/longrope_search.py), one line of progress a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from extrapolate.cli.options import parse_length, with_request
from extrapolate.cli.util import stdout, warn
from extrapolate.core.paths import file_target
from extrapolate.run.longrope_search import SearchSettings
from extrapolate.run.request import RunRequest

DEFAULTS = SearchSettings()
# run options the search has no use for: it measures one thing (perplexity at L') with one encoding
UNUSED = {
    "tasks": "--tasks",
    "eval_lens": "--eval-lens",
    "eval_len": "--eval-len",
    "passkey_task": "--passkey-task",
    "encoding_options": "--encoding-option",
    "finetune_steps": "--finetune-steps",
    "chat_template": "--chat-template",
}


def count(help: str):
    return Annotated[int, typer.Option(help=help, rich_help_panel="Search")]


@with_request(out_help="the JSON file the result is written to (default results/longrope-search-<L'>.json)")
def longrope_search(
    target: Annotated[
        int,
        typer.Option(
            help="L': the length the factors are searched for, e.g. 2048 or 32k",
            parser=parse_length,
            metavar="LENGTH",
            rich_help_panel="Search",
        ),
    ],
    population: count("candidates in the first population") = DEFAULTS.population,
    iterations: count("iterations of selection, mutation and crossover") = DEFAULTS.iterations,
    parents: count("candidates kept each iteration") = DEFAULTS.parents,
    mutations: count("mutated candidates added each iteration") = DEFAULTS.mutations,
    crossovers: count("crossed candidates added each iteration") = DEFAULTS.crossovers,
    step: Annotated[float, typer.Option(help="grid of the factors", rich_help_panel="Search")] = DEFAULTS.step,
    seed: count("seed of every choice of the search (and of a model it trains)") = DEFAULTS.seed,
    request: RunRequest = None,
) -> None:
    """Search LongRoPE's long factors for L' = --target by its genetic algorithm, fitness the perplexity at L'
    (the model trained here or reused, or a pretrained one). Prints the factors as --encoding-option."""
    from dataclasses import replace

    from extrapolate.run.longrope_search import search

    settings = SearchSettings(population, iterations, parents, mutations, crossovers, step, seed=seed)
    unused = [flag for name, flag in UNUSED.items() if getattr(request, name) != getattr(RunRequest(), name)]
    if unused:
        flags = ", ".join(unused)
        warn(f"{flags}: the search measures perplexity at --target alone, with LongRoPE's factors: ignored")
    request = replace(request, seed=seed)
    out = file_target(request.out or Path("results") / f"longrope-search-{target}.json", "--out")
    best = [float("inf")]

    def progress(done: int, total: int, candidate) -> None:
        best[0] = min(best[0], candidate.ppl)
        typer.echo(f"candidate {done}/{total}: perplexity {candidate.ppl:.3f} (best {best[0]:.3f})", err=True)

    def resumed(count: int, path: Path) -> None:
        typer.echo(f"resuming: {count} candidates already measured ({path})", err=True)

    result = search(replace(request, out=None), settings, target, out, progress, resumed)
    factors = ",".join(f"{f:g}" for f in result["long_factor"])
    stdout.print(
        f"perplexity at {target}: {result['ppl']:.3f} searched, {result['initial_ppl']:.3f} from "
        f"the first candidate (the reference's start), {result['yarn_ppl']:.3f} YaRN (s = {result['factor']:g})\n"
        f"--encoding longrope --factor {result['factor']:g} --encoding-option long_factor={factors}\n"
        f"wrote {out}",
        highlight=False,
        soft_wrap=True,
    )
