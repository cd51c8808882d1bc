"""Every measured cell carries n and a 95% interval: the interval formulas against published values, and the
rows and samples files a run writes against each other."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.intervals import ALIKE, bootstrap_ratio, score_interval, wilson

from .helpers import make_corpus


def test_wilson_matches_published_values():
    # Newcombe (1998), Statistics in Medicine 17:857, table I: 81/263 -> 0.2553-0.3662; 15/148 -> 0.0624-0.1605;
    # 0/10 -> 0-0.2775 (his examples for the score method)
    for (k, n), (low, high) in {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 10): (0.0, 0.2775),
    }.items():
        got = wilson(k, n)
        assert round(got[0], 4) == low and round(got[1], 4) == high, (k, n, got)
    assert wilson(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_at_100_prompts_a_proportion_is_known_to_within_ten_points():
    low, high = wilson(50, 100)  # the widest case, p = 1/2
    assert high - low <= 0.2 and (high - low) / 2 > 0.09


def test_the_bootstrap_is_seeded_and_brackets_the_estimate():
    scores = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.0, 0.5]
    low, high, method = score_interval(scores)
    assert method == "bootstrap-prompts" and low < sum(scores) / len(scores) < high
    assert score_interval(scores) == (low, high, method)  # the same scores, the same interval
    assert score_interval([1.0, 0.0, 1.0])[2] == "wilson"  # every score 0 or 1: a proportion
    # prompts that all score alike: the bootstrap would be zero-wide, Wilson's at the mean is not
    low, high, method = score_interval([0.25] * 25)
    assert (low, high, method) == (*wilson(6.25, 25), ALIKE) and low < 0.25 < high
    # a ratio of sums (a token-weighted NLL): the estimate is the ratio of the totals, not the mean of ratios
    nll, tokens = [10.0, 40.0, 30.0], [10, 20, 10]
    low, high = bootstrap_ratio(nll, tokens)
    assert low <= sum(nll) / sum(tokens) <= high and low >= 1.0 and high <= 3.0


def test_perplexity_units_add_up_to_the_cell_and_resample_documents():
    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM
    from extrapolate.tasks.perplexity import evaluate_perplexity

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=64)).eval()
    docs = [torch.randint(0, 50, (n,)) for n in (200, 130, 170)]
    args = dict(budget=128, bucket_width=8, device=torch.device("cpu"))
    result = evaluate_perplexity(model, docs, 32, **args)
    assert result.unit == "documents" and len(result.unit_tokens) == 3
    assert sum(result.unit_tokens) == result.tokens
    assert sum(result.unit_nll) == pytest.approx(result.nll_sum, rel=1e-9)
    low, high = result.interval()
    assert low < result.nll < high
    one = evaluate_perplexity(model, docs[:1], 32, **args)  # one document: its windows are the units
    assert one.unit == "windows" and len(one.unit_tokens) == 4


def test_a_run_writes_n_intervals_and_every_prompts_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus", documents=8, words=1500)
    args = ["run", "--model", "tiny", "--steps", "20", "--train-len", "128", "--eval-lens", "128,256"]
    args += ["--corpus", str(corpus), "--encoding", "rope", "--tasks", "perplexity,passkey-word"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert (rows["n"] > 0).all() and (rows["ci_low"] <= rows["value"] + 1e-9).all()
    assert (rows["value"] <= rows["ci_high"] + 1e-9).all()
    retrieval = rows[rows["task"] == "passkey"]
    assert set(retrieval["ci_method"]) == {"wilson"} and set(retrieval["n"]) == {20}
    (path,) = (tmp_path / "out" / "samples").glob("*.jsonl")
    assert path.stem == rows["run_id"].iloc[0]
    lines = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    assert len(lines) == 2 * 5 * 20  # lengths × depths × trials
    assert {"reference", "prediction", "score", "ranked_first", "depth", "index"} <= set(lines.columns)
    accuracy = retrieval[retrieval["metric"] == "accuracy"].set_index(["eval_len", "depth"])["value"]
    means = lines.groupby(["eval_len", "depth"])["score"].mean()
    pd.testing.assert_series_equal(means.sort_index(), accuracy.sort_index(), check_names=False)
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "## Perplexity (one seed; [95% interval over held-out documents" in summary
    assert re.search(r"\| \d+\.\d{3} \[\d+\.\d+–\d+\.\d+\] \|", summary)  # a perplexity cell with its interval
    assert re.search(r"\| \*?\d+% \[\d+–\d+\]\*? \|", summary)  # a retrieval cell with its Wilson interval
    answered = summary.split("## What the model answered")[1].split("## Setup")[0]
    assert f"(samples/{path.stem}.jsonl)" in answered and " at 256 | " in answered


def test_the_aggregate_gives_the_seed_interval_over_several_seeds_and_the_rows_own_over_one():
    from extrapolate.report.table import aggregate

    base = dict(encoding="rope", train_len=8, eval_len=8, task="perplexity", metric="ppl", depth=None, status="ok")
    one = pd.DataFrame([dict(base, seed=0, value=10.0, n=4, ci_low=9.0, ci_high=11.5)])
    row = aggregate(one).iloc[0]
    assert (row["interval"], row["low"], row["high"], row["ci95"]) == ("within", 9.0, 11.5, 0.0)
    three = pd.DataFrame(
        [dict(base, seed=s, value=v, n=4, ci_low=v - 1, ci_high=v + 1) for s, v in enumerate([9, 10, 11])]
    )
    row = aggregate(three).iloc[0]
    # t(0.975, 2) = 4.303, sd 1, sqrt(3): the half-width over seeds, not any one seed's own interval
    assert row["interval"] == "seeds" and row["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)


def test_one_unit_has_no_interval_rather_than_a_zero_wide_one():
    assert all(math.isnan(x) for x in bootstrap_ratio([12.0], [4]))
    assert not any(math.isnan(x) for x in bootstrap_ratio([12.0, 10.0], [4, 4]))


def test_a_table_header_says_why_some_one_seed_cells_have_no_interval():
    from extrapolate.report.pages import seeds_note

    def agg(*cells):  # (interval, n) per one-seed cell
        return pd.DataFrame([{"status": "ok", "n_seeds": 1, "interval": interval, "n": n} for interval, n in cells])

    unit = "held-out documents"
    assert seeds_note(agg(("within", 12.0)), unit) == "one seed; [95% interval over held-out documents]"
    one_window = seeds_note(agg(("within", 12.0), ("none", 1.0)), unit)
    assert one_window.endswith("; a bare value: one document or window scored, nothing to resample")
    both = seeds_note(agg(("within", 12.0), ("none", 1.0), ("none", float("nan"))), unit)
    assert both.endswith("nothing to resample or a row written before rows recorded their interval")
    assert seeds_note(agg(("none", float("nan"))), unit) == "one seed; no interval recorded"
