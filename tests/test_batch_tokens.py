"""A training step reads a budget of tokens, not of rows: rows = tokens / L (at least one), so training at a long L
costs what it costs at L = 256; --batch-size (rows) overrides it, and the rows are what a model's identity holds."""

import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.defaults import DEFAULT_BATCH_TOKENS
from extrapolate.core.errors import UserError
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import resolve_request


def resolved(**fields) -> RunRequest:
    fields.setdefault("train_len", 256)
    return resolve_request(RunRequest(model="tiny", eval_lens=(fields["train_len"],), **fields))


@pytest.mark.parametrize("length,rows", [(128, 64), (256, 32), (1024, 8), (4096, 2), (8192, 1), (32768, 1)])
def test_the_default_step_reads_the_same_tokens_at_every_length(length, rows):
    request = resolved(train_len=length)
    assert DEFAULT_BATCH_TOKENS == 8192 and request.batch_size == rows
    assert request.batch_size * length == max(DEFAULT_BATCH_TOKENS, length)  # one row where L is past the budget


def test_the_token_budget_and_the_rows_are_each_a_knob_and_the_rows_win():
    assert resolved(train_len=1024, batch_tokens=4096).batch_size == 4
    assert resolved(train_len=1024, batch_tokens=100).batch_size == 1  # at least one row
    assert resolved(train_len=1024, batch_size=3).batch_size == 3  # rows given: as asked, whatever L
    again = resolved(train_len=512, batch_tokens=2048)
    assert resolve_request(again) == again  # resolved twice: the same rows, the budget left out of the record
    assert again.batch_tokens is None and again.batch_size == 4


@pytest.mark.parametrize(
    "args,said",
    [
        (["--batch-size", "2", "--batch-tokens", "512"], "give --batch-size (rows a step) or --batch-tokens"),
        (["--batch-tokens", "0"], "--batch-tokens must be at least 1, got 0"),
    ],
)
def test_a_budget_mistake_is_one_line_and_exit_2(tmp_path, args, said):
    result = CliRunner().invoke(app, ["run", "--dry-run", "--model", "tiny", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2
    assert said in result.output.strip().splitlines()[-1]


def test_both_knobs_given_to_the_library_are_refused_too():
    with pytest.raises(UserError, match="not both"):
        resolved(batch_size=2, batch_tokens=512)
