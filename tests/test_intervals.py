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
from extrapolate.core.intervals import (
    AT_MEAN,
    PROPORTION,
    nll_difference,
    nll_interval,
    paired_difference,
    proportion_interval,
    score_interval,
)

from .helpers import make_corpus


def test_the_proportion_interval_matches_published_values():
    # Newcombe (1998), Statistics in Medicine 17:857, table I, method 5 (exact, Clopper-Pearson):
    # 81/263 -> 0.2527-0.3676; 15/148 -> 0.0578-0.1617; 0/20 -> 0-0.1684; 1/29 -> 0.0009-0.1776
    for (k, n), (low, high) in {
        (81, 263): (0.2527, 0.3676),
        (15, 148): (0.0578, 0.1617),
        (0, 20): (0.0, 0.1684),
        (1, 29): (0.0009, 0.1776),
    }.items():
        got = proportion_interval(k, n)
        assert round(got[0], 4) == low and round(got[1], 4) == high, (k, n, got)
    assert proportion_interval(20, 20) == (pytest.approx(0.025 ** (1 / 20), abs=1e-9), 1.0)  # every prompt right
    assert all(math.isnan(x) for x in proportion_interval(0, 0))


def test_at_100_prompts_a_proportion_is_known_to_within_eleven_points():
    low, high = proportion_interval(50, 100)  # the widest case, p = 1/2
    assert high - low <= 0.21 and (high - low) / 2 > 0.09


def test_one_method_for_every_score_keeps_the_ranking():
    # 19 prompts right and one at 3/4 ranks below 20 right, not above (the bootstrap gave 99 [97-100] beside
    # 100 [84-100]); and a mean of partial credit is read at its mean, as a proportion of that mean
    scores = [1.0] * 19 + [0.75]
    low, high, method = score_interval(scores)
    assert method == AT_MEAN and (low, high) == proportion_interval(19.75, 20)
    all_right = score_interval([1.0] * 20)
    assert all_right[2] == PROPORTION and low < all_right[0] and high <= all_right[1] == 1.0
    assert score_interval([1.0, 0.0, 1.0])[2] == PROPORTION
    low, high, _ = score_interval([0.25] * 25)  # every prompt alike is not zero-wide
    assert low < 0.25 < high
    for n in (5, 20, 25):  # at equal n, a higher mean never has a lower bound below a lower mean's
        bounds = [proportion_interval(k / 4, n) for k in range(4 * n + 1)]
        assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(bounds, bounds[1:]))
    with pytest.raises(ValueError):
        score_interval([1.5])


def test_the_perplexity_interval_is_students_t_over_documents():
    # equal tokens: the t interval of the documents' mean NLLs, t(0.975, 2) = 4.302653
    per_doc, tokens = [3.0, 3.5, 4.0], [100, 100, 100]
    low, high = nll_interval([v * t for v, t in zip(per_doc, tokens)], tokens)
    assert (low + high) / 2 == pytest.approx(3.5) and (high - low) / 2 == pytest.approx(4.302653 * 0.5 / math.sqrt(3))
    # unequal tokens: centred on the token-weighted mean, the ratio of the totals
    nll, tokens = [10.0, 40.0, 30.0], [10, 20, 10]
    low, high = nll_interval(nll, tokens)
    assert (low + high) / 2 == pytest.approx(80 / 40)
    assert all(math.isnan(x) for x in nll_interval([12.0], [4]))  # one document: no interval


def test_a_paired_nll_difference_is_narrower_than_the_two_cells():
    # every document rises by about 0.3 nats though the documents differ by far more
    base = [3.0, 3.8, 4.6, 3.3]
    longer = [b + r for b, r in zip(base, [0.28, 0.31, 0.3, 0.32])]
    tokens = [100] * 4
    diff, low, high = nll_difference([v * 100 for v in longer], tokens, [v * 100 for v in base], tokens)
    assert diff == pytest.approx(0.3025) and low > 0.25 and high < 0.36
    own = nll_interval([v * 100 for v in base], tokens)
    assert own[1] - own[0] > 5 * (high - low)
    with pytest.raises(ValueError):
        nll_difference([1.0], [1], [1.0, 2.0], [1, 1])


def test_a_paired_score_difference_is_not_zero_wide_where_nothing_moved():
    same = [1.0] * 12 + [0.0] * 8
    diff, low, high = paired_difference(same, same)
    assert diff == 0 and low < 0 < high and high < 0.25
    moved = [0.0] * 10 + [1.0] * 10
    diff, low, high = paired_difference(moved, [1.0] * 20)  # 10 of 20 rose
    assert diff == 0.5 and 0.2 < low < 0.5 < high < 0.75


def test_perplexity_documents_add_up_to_the_cell():
    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM
    from extrapolate.tasks.perplexity import evaluate_perplexity

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=64)).eval()
    docs = [torch.randint(0, 50, (n,)) for n in (200, 130, 170)]
    args = dict(budget=128, bucket_width=8, device=torch.device("cpu"))
    result = evaluate_perplexity(model, docs, 32, **args)
    assert len(result.document_tokens) == 3 and sum(result.document_tokens) == result.tokens
    assert sum(result.document_nll) == pytest.approx(result.nll_sum, rel=1e-9)
    low, high = result.interval()
    assert low < result.nll < high
    one = evaluate_perplexity(model, docs[:1], 32, **args)  # one document: no interval, its windows not units
    assert len(one.document_tokens) == 1 and all(math.isnan(x) for x in one.interval())


def test_a_run_writes_n_intervals_and_every_prompts_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus", documents=20, words=700)  # two held out: a perplexity interval
    args = ["run", "--model", "tiny", "--steps", "20", "--train-len", "128", "--eval-lens", "128,256"]
    args += ["--corpus", str(corpus), "--encoding", "rope", "--tasks", "perplexity,passkey-word"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert (rows["n"] > 0).all() and (rows["ci_low"] <= rows["value"] + 1e-9).all()
    assert (rows["value"] <= rows["ci_high"] + 1e-9).all()
    retrieval = rows[rows["kind"] == "needle"]
    assert set(retrieval["ci_method"]) == {PROPORTION} and set(retrieval["n"]) == {20}
    (path,) = (tmp_path / "out" / "samples").glob("*.jsonl")
    assert path.stem == rows["run_id"].iloc[0]
    lines = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    documents = lines[lines["task"] == "perplexity"]
    assert len(documents) == 2 * 2 and set(documents["index"]) == {0, 1}  # lengths × held-out documents
    ppl = rows[rows["metric"] == "nll"].set_index("eval_len")
    for length, cell in documents.groupby("eval_len"):  # the row is the documents' token-weighted mean NLL
        assert cell["nll_sum"].sum() / cell["tokens"].sum() == pytest.approx(ppl.loc[length, "value"], rel=1e-5)
    assert set(ppl["ci_method"]) == {"t-documents"} and set(ppl["n"]) == {2}
    lines = lines[lines["task"] == "passkey-word"]
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
