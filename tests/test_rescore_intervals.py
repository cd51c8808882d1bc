"""scripts/rescore_intervals.py: a partial-credit RULER row written with the bootstrap alone gets the current
interval from its prompts' scores in samples/, and nothing else of the table moves; a row its samples do not
give back is left as it is."""

import json
from pathlib import Path

import pandas as pd
import pytest

from extrapolate.core.intervals import ALIKE, score_interval
from tests.helpers import load_script


def test_partial_credit_rows_get_the_current_interval_and_nothing_else_moves(tmp_path):
    scores = {1024: [0.25] * 4, 2048: [0.5, 0.25, 0.25, 1.0]}
    rows = [
        {
            "run_id": "abc",
            "task": "ruler",
            "eval_len": n,
            "protocol": "p",
            "value": sum(s) / 4,
            "n": 4,
            "ci_low": 0.25,
            "ci_high": 0.25,
            "ci_method": "bootstrap-prompts",
            "status": "ok",
        }
        for n, s in scores.items()
    ]
    rows.append({**rows[0], "run_id": "gone"})  # no samples: left as it is
    rows.append({**rows[0], "ci_method": "wilson", "value": 1.0, "ci_low": 0.5, "ci_high": 1.0})  # binary: untouched
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "samples").mkdir()
    records = [
        {"protocol": "p", "eval_len": n, "index": i, "score": v} for n, s in scores.items() for i, v in enumerate(s)
    ]
    (tmp_path / "samples" / "abc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert load_script("rescore_intervals").rescore(tmp_path) == 2
    table = pd.read_csv(tmp_path / "results.csv")
    for i, n in enumerate(scores):
        low, high, method = score_interval(scores[n])
        assert method in (ALIKE, "bootstrap-prompts") and table.ci_low[i] == pytest.approx(low, abs=1e-6)
        assert table.ci_high[i] == pytest.approx(high, abs=1e-6)
    assert table.ci_low[0] < 0.25 < table.ci_high[0]  # no longer zero-wide
    assert table.iloc[2:].ci_method.tolist() == ["bootstrap-prompts", "wilson"]
    assert table.value.tolist() == pytest.approx([r["value"] for r in rows])


def test_a_passkey_row_without_n_gets_its_prompts_and_wilsons_interval(tmp_path):
    from extrapolate.core.intervals import proportion_interval

    row = {"run_id": "abc", "task": "passkey", "metric": "accuracy", "eval_len": 256, "n_tokens": 10 * 256}
    rows = [{**row, "value": 0.7, "status": "ok"}, {**row, "value": 0.75, "status": "ok"}]  # 7.5 of 10: no count
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    load_script("rescore_intervals").rescore(tmp_path)
    table = pd.read_csv(tmp_path / "results.csv")
    assert table.n[0] == 10 and (table.ci_low[0], table.ci_high[0]) == pytest.approx(proportion_interval(7, 10), abs=1e-6)
    assert table.ci_method[0] == "wilson" and pd.isna(table.n[1])  # not a whole number of prompts: left as it is


def test_a_perplexity_of_one_window_loses_its_zero_wide_interval(tmp_path):
    row = {"run_id": "abc", "task": "perplexity", "metric": "ppl", "status": "ok", "eval_len": 16384, "n_tokens": 16383}
    rows = [{**row, "value": 62.5, "n": 1, "ci_low": 62.5, "ci_high": 62.5, "ci_method": "bootstrap-windows"}]
    rows.append({**row, "value": 31.9, "n": 3, "ci_low": 30.0, "ci_high": 33.0, "ci_method": "bootstrap-windows"})
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    load_script("rescore_intervals").rescore(tmp_path)
    table = pd.read_csv(tmp_path / "results.csv")
    assert table.ci_low.isna().tolist() == [True, False]
    assert table.ci_method.tolist() == ["bootstrap-windows"] * 2  # the unit stays named


def test_a_mean_the_table_rounds_to_six_digits_still_matches_its_samples(tmp_path):
    scores = [1 / 3, 2 / 3, 0.0]
    row = {"run_id": "abc", "task": "ruler", "status": "ok", "eval_len": 1024, "protocol": "p", "n": 3}
    row |= {"value": float(f"{sum(scores) / 3:.6g}"), "ci_low": 0.1, "ci_high": 0.6, "ci_method": "bootstrap-prompts"}
    pd.DataFrame([row]).to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "samples").mkdir()
    records = [{"protocol": "p", "eval_len": 1024, "index": i, "score": v} for i, v in enumerate(scores)]
    (tmp_path / "samples" / "abc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert load_script("rescore_intervals").rescore(tmp_path) == 1


def test_a_ruler_row_without_n_gets_its_prompts_and_an_interval_only_where_scored_0_or_1(tmp_path):
    import shutil

    from extrapolate.core.intervals import proportion_interval
    from extrapolate.tasks.files import load_task

    (tmp_path / "tasks").mkdir()
    for name in ("niah_single_1", "niah_multivalue"):  # one answer a prompt; four, partial credit
        shutil.copy(Path(__file__).resolve().parents[1] / "tasks" / "ruler" / f"{name}.toml", tmp_path / "tasks")
    single = load_task(str(tmp_path / "tasks" / "niah_single_1.toml")).identity
    multi = load_task(str(tmp_path / "tasks" / "niah_multivalue.toml")).identity
    row = {"run_id": "abc", "task": "ruler", "metric": "score", "status": "ok", "eval_len": 1024, "n_tokens": 5 * 1024}
    rows = [
        {**row, "protocol": single, "value": 0.6},
        {**row, "protocol": single + "+chat+bos", "value": 0.8},
        {**row, "protocol": multi, "value": 0.6},
        {**row, "protocol": multi, "value": 0.0},  # every prompt scored 0: Wilson's is exact
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    assert load_script("rescore_intervals").rescore(tmp_path) == 4
    table = pd.read_csv(tmp_path / "results.csv")
    assert table.n.tolist() == [5, 5, 5, 5]
    assert (table.ci_low[0], table.ci_high[0]) == pytest.approx(proportion_interval(3, 5), abs=1e-6)
    assert (table.ci_low[1], table.ci_high[1]) == pytest.approx(proportion_interval(4, 5), abs=1e-6)
    assert table.ci_method.tolist()[:2] == ["wilson", "wilson"]
    assert pd.isna(table.ci_low[2]) and pd.isna(table.ci_method[2])  # partial credit: no scores, no interval
    assert (table.ci_low[3], table.ci_high[3]) == pytest.approx(proportion_interval(0, 5), abs=1e-6)
    assert table.ci_method[3] == "wilson"
    assert table.value.tolist() == pytest.approx([0.6, 0.8, 0.6, 0.0])


def test_a_partial_credit_row_without_an_interval_gets_one_once_its_answers_are_recovered(tmp_path):
    scores = [0.6, 0.2, 1.0, 0.0, 0.4]
    row = {"task": "ruler", "metric": "score", "status": "ok", "eval_len": 256, "protocol": "vt", "n": 5}
    rows = [
        {**row, "run_id": "abc", "value": 0.44},  # its answers recovered into samples/abc.jsonl
        {**row, "run_id": "gone", "value": 0.44},  # none kept: no interval, and no word about it
        {**row, "run_id": "abc", "eval_len": 512, "value": 0.5},  # a length the samples do not hold
    ]
    pd.DataFrame(rows).assign(ci_low=float("nan"), ci_high=float("nan"), ci_method=None).to_csv(
        tmp_path / "results.csv", index=False
    )
    (tmp_path / "samples").mkdir()
    records = [{"protocol": "vt", "eval_len": 256, "index": i, "score": v} for i, v in enumerate(scores)]
    (tmp_path / "samples" / "abc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert load_script("rescore_intervals").rescore(tmp_path) == 1
    table = pd.read_csv(tmp_path / "results.csv")
    low, high, method = score_interval(scores)
    assert (table.ci_low[0], table.ci_high[0], table.ci_method[0]) == (pytest.approx(low), pytest.approx(high), method)
    assert table.ci_low[1:].isna().all() and table.value.tolist() == pytest.approx([0.44, 0.44, 0.5])


def test_a_folder_without_a_table_is_a_one_line_error(tmp_path, capsys):
    assert load_script("rescore_intervals").main([str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
