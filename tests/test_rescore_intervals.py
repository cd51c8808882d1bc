"""scripts/rescore_intervals.py: every retrieval row gets the proportion's interval at its mean over its n
prompts, named by whether its prompts score 0 or 1; a perplexity row gets the t interval over the documents
its samples keep, or loses an earlier rule's interval where they are not kept; values and every other column
stay."""

import json
import math

import pandas as pd
import pytest

from extrapolate.core.intervals import AT_MEAN, DOCUMENTS, PROPORTION, nll_interval, proportion_interval
from tests.helpers import load_script

BASE = {"run_id": "abc", "protocol": "p", "status": "ok", "depth": None, "n_tokens": None}


def write(tmp_path, rows, samples=()):
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "samples").mkdir(exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in samples)
    (tmp_path / "samples" / "abc.jsonl").write_text(text)


def test_retrieval_rows_get_the_proportions_interval_at_their_mean(tmp_path):
    rows = [
        {
            **BASE,
            "task": "ruler",
            "metric": "score",
            "eval_len": 1024,
            "value": 0.4375,
            "n": 4,
            "ci_method": "bootstrap-prompts",
        },
        {**BASE, "task": "ruler", "metric": "score", "eval_len": 2048, "value": 0.5, "n": 4, "ci_method": "wilson"},
        {**BASE, "task": "passkey", "metric": "accuracy", "eval_len": 512, "value": 0.7, "n": None, "n_tokens": 5120},
    ]
    samples = [
        {"task": "ruler", "protocol": "p", "eval_len": 1024, "index": i, "score": s}
        for i, s in enumerate([0.25, 0.5, 0.25, 0.75])
    ]
    samples += [
        {"task": "ruler", "protocol": "p", "eval_len": 2048, "index": i, "score": s} for i, s in enumerate([0, 1, 1, 0])
    ]
    write(tmp_path, rows, samples)
    assert load_script("rescore_intervals").rescore(tmp_path) == 3
    table = pd.read_csv(tmp_path / "results.csv")
    assert table.ci_method.tolist() == [AT_MEAN, PROPORTION, PROPORTION]
    assert (table.ci_low[0], table.ci_high[0]) == pytest.approx(proportion_interval(1.75, 4), abs=1e-6)
    assert (table.ci_low[1], table.ci_high[1]) == pytest.approx(proportion_interval(2, 4), abs=1e-6)
    assert table.n[2] == 10 and (table.ci_low[2], table.ci_high[2]) == pytest.approx(
        proportion_interval(7, 10), abs=1e-6
    )
    assert table.value.tolist() == [0.4375, 0.5, 0.7]  # values stay


def test_perplexity_rows_get_the_t_interval_of_their_documents_or_none(tmp_path):
    nll, tokens = [400.0, 380.0, 430.0], [100, 100, 100]
    mean = sum(nll) / sum(tokens)
    rows = [
        {**BASE, "task": "perplexity", "metric": "nll", "eval_len": 256, "value": round(mean, 6), "n": 3},
        {**BASE, "task": "perplexity", "metric": "ppl", "eval_len": 256, "value": round(math.exp(mean), 4), "n": 3},
        {**BASE, "task": "perplexity", "metric": "nll", "eval_len": 512, "value": 4.1, "n": 3},  # no documents kept
        {**BASE, "task": "perplexity", "metric": "nll", "eval_len": 1024, "value": 9.9, "n": 3},  # documents disagree
    ]
    for row in rows:
        row.update(ci_low=1.0, ci_high=9.0, ci_method="bootstrap-documents")
    samples = [
        {"task": "perplexity", "protocol": "p", "eval_len": length, "index": i, "nll_sum": v, "tokens": t}
        for length in (256, 1024)
        for i, (v, t) in enumerate(zip(nll, tokens))
    ]
    write(tmp_path, rows, samples)
    load_script("rescore_intervals").rescore(tmp_path)
    table = pd.read_csv(tmp_path / "results.csv")
    low, high = nll_interval(nll, tokens)
    assert (table.ci_low[0], table.ci_high[0], table.ci_method[0]) == (
        pytest.approx(low),
        pytest.approx(high),
        DOCUMENTS,
    )
    assert (table.ci_low[1], table.ci_high[1]) == (
        pytest.approx(math.exp(low), rel=1e-5),
        pytest.approx(math.exp(high), rel=1e-5),
    )
    assert pd.isna(table.ci_low[2]) and pd.isna(table.ci_method[2]) and table.n[2] == 3  # an earlier rule's: cleared
    assert table.ci_method[3] == "bootstrap-documents"  # its documents do not give back its value: left, named


def test_a_folder_without_a_table_is_one_line_and_exit_2(tmp_path):
    assert load_script("rescore_intervals").main([str(tmp_path / "none")]) == 2
