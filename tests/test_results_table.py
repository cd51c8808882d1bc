"""The results table reads back what was written: a run id of ten hex digits stays text even where every digit
is a decimal one or it reads as a number in exponent form; a number column is written as numbers whatever the
rows appended to it leave empty."""

import warnings

import pytest

from extrapolate.report.table import append_results, load_results


@pytest.mark.parametrize("run_id", ["0123456789", "12e4567890", "1234567890"])
def test_run_ids_that_look_like_numbers_read_back_as_written(tmp_path, run_id):
    row = {
        "encoding": "rope",
        "train_len": 128,
        "eval_len": 256,
        "task": "perplexity",
        "metric": "ppl",
        "value": 1.0,
        "seed": 0,
        "status": "ok",
        "created_at": "2026-11-28T00:00:00Z",
    }
    append_results(tmp_path, [row | {"run_id": run_id}])  # a table of that run alone
    append_results(tmp_path, [row | {"run_id": run_id, "seed": 1}])  # read back and written again
    assert load_results(tmp_path)["run_id"].tolist() == [run_id, run_id]


def test_a_column_new_rows_leave_empty_keeps_the_earlier_rows_numbers_as_written(tmp_path):
    """Rows without a factor (RoPE) appended to rows with one (YaRN at s = 4, PI at 2.5): the factor column
    stays a number column, written "4", not joined to the new rows' empty values as text ("4.0", what pandas 3
    writes for a float column concatenated with an empty object one), and pandas gives no warning about it."""
    row = {
        "run_id": "aaaaaaaaaa",
        "train_len": 128,
        "eval_len": 256,
        "task": "perplexity",
        "metric": "ppl",
        "value": 2.0,
        "seed": 0,
        "status": "ok",
        "created_at": "2026-11-28T00:00:00Z",
    }
    append_results(tmp_path, [row | {"encoding": "yarn", "factor": 4.0}, row | {"encoding": "pi", "factor": 2.5}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas 2's FutureWarning on an all-empty column
        append_results(tmp_path, [row | {"run_id": "bbbbbbbbbb", "encoding": "rope", "factor": None}])
    lines = (tmp_path / "results.csv").read_text().splitlines()
    header = lines[0].split(",")
    factors = [line.split(",")[header.index("factor")] for line in lines[1:]]
    values = [line.split(",")[header.index("value")] for line in lines[1:]]
    assert factors == ["4", "2.5", ""] and values == ["2", "2", "2"]
