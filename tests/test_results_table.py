"""The results table reads back what was written: a run id of ten hex digits stays text even where every digit
is a decimal one or it reads as a number in exponent form."""

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
