"""`--encoding-option NAME=VALUE`: typed, checked like `encodings show`, applied to the evaluated encoding,
part of the run id, and a sweep's options reach exactly the encodings that have them."""

import json

import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.errors import UserError
from extrapolate.encodings import get_spec
from extrapolate.encodings.options import OptionSpec, by_name, check_used, options_for, parse_encoding_options

from .helpers import make_corpus, tiny_options


def test_values_are_typed_and_sorted():
    options = parse_encoding_options(["window=64", "short-factor=1,1.5", "truncate=false", "beta_fast=16"])
    assert options == (("beta_fast", 16.0), ("short_factor", [1.0, 1.5]), ("truncate", False), ("window", 64))
    assert isinstance(dict(options)["window"], int)


@pytest.mark.parametrize(
    "item, needle",
    [
        ("window=0", "at least 1"),
        ("window=2.5", "integer"),
        ("beta=1", "unknown"),
        ("window", "NAME=VALUE"),
        ("leak=inf", "finite"),
        ("truncate=yes", "true or false"),
        ("long_factor=1,x", "not a number"),
        ("attn_scale=1e308", r"in \[0, 100\]"),  # would overflow every logit to NaN
        ("shift_rule=down", "one of floor, exact"),
    ],
)
def test_bad_options_fail_in_one_line(item, needle):
    with pytest.raises(UserError, match=needle):
        parse_encoding_options([item])


def test_each_encodings_option_has_a_name_of_its_own():
    """STRING's shift (a distance) and Self-Extend's rule of its shift once shared a name, and the later
    declaration took the earlier's place: STRING's shift could not be set."""
    assert parse_encoding_options(["shift=100", "shift_rule=exact"]) == (("shift", 100), ("shift_rule", "exact"))
    with pytest.raises(ValueError, match="declared twice"):
        by_name((OptionSpec("shift", int, "a distance"), OptionSpec("shift", str, "a rule")))


def test_a_sweep_gives_each_encoding_its_own_options():
    options = parse_encoding_options(["window=4", "beta_fast=16"])
    assert options_for(get_spec("self-extend"), options) == {"window": 4}
    assert options_for(get_spec("yarn"), options) == {"beta_fast": 16.0}
    assert options_for(get_spec("rope"), options) == {}
    check_used([get_spec("yarn"), get_spec("self-extend")], options)
    with pytest.raises(UserError, match="no encoding asked for"):
        check_used([get_spec("yarn")], options)


def test_run_evaluates_with_the_options_and_keeps_them_in_its_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    args = [
        "run",
        "--tasks",
        "perplexity",
        "--encoding",
        "self-extend",
        *tiny_options(),
        "--corpus",
        str(corpus),
    ]
    runner = CliRunner()
    assert runner.invoke(app, args + ["--out", str(tmp_path / "default")]).exit_code == 0
    result = runner.invoke(
        app, args + ["--out", str(tmp_path / "set"), "--encoding-option", "window=4", "--encoding-option", "group=8"]
    )
    assert result.exit_code == 0, result.output
    default, chosen = (json.loads((tmp_path / f / "run.json").read_text()) for f in ("default", "set"))
    assert (default["encoding"]["window"], default["encoding"]["group"]) == (8, 5)  # L/4 and the smallest group
    assert (chosen["encoding"]["window"], chosen["encoding"]["group"]) == (4, 8)
    ids = [__import__("pandas").read_csv(tmp_path / f / "results.csv")["run_id"].iloc[0] for f in ("default", "set")]
    assert ids[0] != ids[1]  # other options, another cell
    wrong = runner.invoke(
        app, args + ["--encoding", "yarn", "--out", str(tmp_path / "x"), "--encoding-option", "window=4"]
    )
    assert wrong.exit_code == 2 and "no encoding asked for (yarn)" in wrong.output
