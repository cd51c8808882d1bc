"""LongRoPE's search (run/longrope_search.py): the genetic algorithm of microsoft/LongRoPE's `dim_mono` keeps
every candidate non-decreasing and on its grid in [1, 1 + s], never evaluates one twice, is the same search
for the same seed, and improves on its start; `longrope-search` finds factors that `run` then scores at the
perplexity the search reported."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.errors import UserError
from extrapolate.run.longrope_search import Evolution, SearchLog, SearchSettings, monotone

from .helpers import make_corpus
from .test_longrope_reference import reference_first_candidate

SCALE = 4.0
START = np.array([1.0, 1.0, 1.0, 2.5, 4.0, 4.0, 4.0, 4.0])  # a YaRN-like ramp: fast pairs kept, slow ones ×s
GOAL = np.array([1.0, 1.2, 1.7, 2.2, 2.9, 3.4, 3.9, 4.6])


def distance(factors: np.ndarray) -> float:
    return float(np.abs(factors - GOAL).sum())


def evolve(seed=0, **sizes):
    settings = SearchSettings(**{"population": 8, "iterations": 6, "parents": 4, **sizes, "seed": seed})
    evolution = Evolution(distance, START, SCALE, settings)
    return evolution, evolution.run()


def test_every_candidate_keeps_the_constraint_and_none_repeats():
    evolution, _ = evolve()
    factors = [c.factors for c in evolution.history]
    assert len(factors) == 8 + 6 * (4 + 4)
    for f in factors:
        assert monotone(f) and f.min() >= 1.0 - 1e-9 and f.max() <= 1.0 + SCALE + 1e-9
        on_grid = np.round((f - 1.0) / 0.01) * 0.01 + 1.0
        changed = ~np.isclose(f, START)
        assert np.allclose(f[changed], on_grid[changed])  # a redrawn factor is a grid point
    assert all(not np.allclose(a, b) for i, a in enumerate(factors) for b in factors[:i])


def test_the_search_is_the_same_for_a_seed_and_improves_on_its_start():
    (first, best), (again, best_again) = evolve(seed=3), evolve(seed=3)
    assert best == best_again and [c.ppl for c in first.history] == [c.ppl for c in again.history]
    assert best == sorted(best, reverse=True)  # the parents keep the best: never worse
    assert first.best().ppl < distance(START)
    other, _ = evolve(seed=4)
    assert [c.ppl for c in other.history] != [c.ppl for c in first.history]


def test_crossover_takes_each_factor_from_one_parent():
    evolution, _ = evolve(iterations=1)
    a, b = START, np.array([1.0, 1.1, 1.5, 2.5, 4.0, 4.2, 4.5, 5.0])
    child = evolution.crossed(a, b)
    assert child is not None and monotone(child)
    assert all(np.isclose(c, x) or np.isclose(c, y) for c, x, y in zip(child, a, b))
    assert evolution.crossed(a, a.copy()) is None  # equal parents have no child


class Stopped(Exception):
    """A kill in the middle of a search."""


def test_a_stopped_search_resumes_from_its_log_without_measuring_a_candidate_again(tmp_path):
    settings = SearchSettings(population=8, iterations=6, parents=4, seed=5)
    whole = Evolution(distance, START, SCALE, settings)
    whole.run()
    measured = []

    def stops_after(count):
        def fitness(factors):
            if len(measured) == count:
                raise Stopped
            measured.append(factors.copy())
            return distance(factors)

        return fitness

    identity = {"run_id": "abc", "target": 1024, "settings": {"seed": 5}}
    log = SearchLog(tmp_path / "search.json.partial", identity)
    with pytest.raises(Stopped):
        Evolution(log.logged(stops_after(13)), START, SCALE, settings).run()
    resumed = SearchLog(tmp_path / "search.json.partial", identity)
    assert len(resumed.measured) == 13
    again = Evolution(resumed.logged(stops_after(len(whole.history))), START, SCALE, settings)
    again.run()
    assert len(measured) == len(whole.history)  # the 13 logged ones were read, not measured again
    assert [c.ppl for c in again.history] == [c.ppl for c in whole.history]
    assert all(np.array_equal(a.factors, b.factors) for a, b in zip(again.history, whole.history))
    # a log of another search (another run id, L' or settings) is not read, nor is a damaged one
    assert SearchLog(tmp_path / "search.json.partial", {**identity, "target": 2048}).measured == []
    (tmp_path / "search.json.partial").write_text("{not json")
    assert SearchLog(tmp_path / "search.json.partial", identity).measured == []


@pytest.mark.parametrize(
    "sizes,message",
    [({"parents": 9, "population": 8}, "--parents"), ({"iterations": 0}, "--iterations"), ({"step": 0.0}, "--step")],
)
def test_bad_sizes_are_one_line(sizes, message):
    with pytest.raises(UserError, match=message):
        SearchSettings(**sizes).check()


def test_the_command_finds_factors_that_run_scores_as_the_search_did(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    model = ["--model", "tiny", "--steps", "30", "--train-len", "32", "--corpus", str(corpus), "--eval-tokens", "128"]
    sizes = ["--population", "4", "--iterations", "1", "--parents", "2", "--mutations", "1", "--crossovers", "1"]
    out = tmp_path / "search.json"
    # --eval-len is no length of the search's: warned of and ignored, not taken for a second list of lengths
    search = ["longrope-search", *model, *sizes, "--target", "128", "--eval-len", "512", "--out", str(out)]
    result = CliRunner().invoke(app, search)
    assert result.exit_code == 0, result.output
    assert "--eval-len: the search measures perplexity at --target alone" in " ".join(result.output.split())
    found = json.loads(out.read_text())
    assert len(found["long_factor"]) == 8 and found["factor"] == 4.0 and len(found["candidates"]) == 6
    assert found["ppl"] == min(c["ppl"] for c in found["candidates"])
    # the search starts where the reference's does (the tiny model: head 16, base 10000), not at the default list
    start = reference_first_candidate(16, 10000.0, 128, 32)
    assert found["candidates"][0]["long_factor"] == pytest.approx(start.tolist(), abs=1e-6)
    assert not (tmp_path / "search.json.partial").exists()  # the log goes once the result is written
    option = next(line for line in result.stdout.splitlines() if line.startswith("--encoding longrope"))
    assert option.endswith(",".join(f"{f:g}" for f in found["long_factor"]))
    # the factors, given to `run` as the printed option, score what the search measured
    factors = option.split("long_factor=")[1]
    args = ["run", *model, "--encoding", "longrope", "--factor", "4", "--encoding-option", f"long_factor={factors}"]
    args += ["--encoding-option", "short_factor=" + ",".join(["1"] * 8), "--eval-lens", "128", "--tasks", "perplexity"]
    ran = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert ran.exit_code == 0, ran.output
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    assert table[table.metric == "ppl"].value.iloc[0] == pytest.approx(found["ppl"], rel=1e-5)


def test_a_target_inside_L_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    args = ["longrope-search", "--model", "tiny", "--steps", "2", "--train-len", "32", "--target", "32"]
    result = CliRunner().invoke(app, [*args, "--corpus", str(make_corpus(tmp_path / "corpus"))])
    assert result.exit_code == 2 and "--target" in result.output and "Traceback" not in result.output


def test_an_out_that_is_a_folder_is_refused_before_the_search(tmp_path, monkeypatch):
    """The search writes --out at its end: a folder there is named before any model is trained."""
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "taken").mkdir()
    result = CliRunner().invoke(
        app, ["longrope-search", "--model", "tiny", "--target", "512", "--out", str(tmp_path / "taken")]
    )
    assert result.exit_code == 2 and "--out" in result.output and "is a folder" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "cache").exists()


def test_run_options_the_search_has_no_use_for_are_named():
    """--tasks and --encoding-option are shared with run; the search measures perplexity at L' alone. (The
    folder as --out stops it before any training.)"""
    args = ["longrope-search", "--model", "tiny", "--target", "512", "--tasks", "passkey", "--out", "."]
    result = CliRunner().invoke(app, [*args, "--encoding-option", "window=5"])
    assert "--tasks, --encoding-option: the search measures perplexity at --target alone" in result.output
    result = CliRunner().invoke(app, ["longrope-search", "--model", "tiny", "--target", "512", "--out", "."])
    assert "ignored" not in result.output
