"""Inputs a formula, a task file or a corpus cannot take: one line, exit code 2, before any work and with
nothing written (a head too small for NTK, a scaling option outside its formula's domain, a task template
with a placeholder the prompt builder does not fill, a JSON corpus record without a text string)."""

import json

import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.errors import UserError
from extrapolate.encodings import frequencies
from extrapolate.tasks.files import TASKS_DIR

from .helpers import make_corpus

cli = CliRunner()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def assert_one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert needle.lower() in lines[0].lower() and "Traceback" not in result.output


def run_args(corpus, out, *extra):
    return [
        "run",
        "--tasks",
        "perplexity",
        "--model",
        "tiny",
        "--steps",
        "2",
        "--train-len",
        "16",
        "--eval-lens",
        "16,32",
        "--eval-tokens",
        "64",
        "--tokenizer",
        "bytes",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        *extra,
    ]


# ---- encodings ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ntk", "--head-dim", "2", "--factor", "2"], "ntk needs a head dimension of at least 4"),
        (["dynamic-ntk", "--head-dim", "2", "--factor", "2"], "dynamic-ntk needs a head dimension of at least 4"),
        (["yarn", "--factor", "1e308"], "in (0, 2^24]"),  # past 2^24 float32 has no θ/s for the slow pairs
        (["pi", "--factor", "0.5"], "≥ 1"),
        (["yarn", "--factor", "2", "--beta-fast", "1", "--beta-slow", "2"], "beta_fast must be at least beta_slow"),
        (["longrope", "--factor", "2", "--original-len", "1"], "original length of at least 2"),
        (["ssmax", "--original-len", "1"], "ssmax needs an original length of at least 2"),  # s = 1/ln L
        (["sinusoidal", "--position", "100000000000000000000"], "--position"),
        (["t5", "--distances", "1,100000000000000000000"], "--distances"),
        (["alibi", "--heads", "100000000000"], "--heads is at most 65536"),  # used to run for minutes
        (["sinusoidal", "--width", "100000000000"], "--width is at most 65536"),
        (["rope", "--head-dim", "100000000000"], "--head-dim is at most 65536"),
    ],
)
def test_encodings_show_refuses_inputs_outside_the_formula(args, needle):
    assert_one_line_error(cli.invoke(app, ["encodings", "show", *args]), needle)


@pytest.mark.parametrize("length", [2, 3, 5])
def test_ssmax_shows_its_scale_at_the_shortest_lengths(length):
    """L // 4 keys is 0 below L = 4: the keys shown are distinct and at least one (log n defined)."""
    result = cli.invoke(app, ["encodings", "show", "ssmax", "--original-len", str(length), "--json"])
    assert result.exit_code == 0, result.output
    keys = json.loads(result.output)["keys"]
    assert keys == sorted(set(keys)) and keys[0] == 1 and length in keys


def test_a_two_wide_head_is_refused_before_training(tmp_path):
    out = tmp_path / "out"
    corpus = make_corpus(tmp_path / "corpus", documents=3, words=200)
    result = cli.invoke(app, run_args(corpus, out, "--encoding", "ntk", "--width", "6", "--heads", "3"))
    assert_one_line_error(result, "ntk needs a head dimension of at least 4")
    assert "training" not in result.output and not out.exists()


@pytest.mark.parametrize(
    "option,needle",
    [
        ("low_freq_factor=0", "0 < low_freq_factor < high_freq_factor"),
        ("high_freq_factor=0", "0 < low_freq_factor < high_freq_factor"),
        ("high_freq_factor=0.5", "0 < low_freq_factor < high_freq_factor"),  # below the default low of 1
    ],
)
def test_llama3_bands_refused_before_training(tmp_path, option, needle):
    out = tmp_path / "out"
    corpus = make_corpus(tmp_path / "corpus", documents=3, words=200)
    result = cli.invoke(app, run_args(corpus, out, "--encoding", "llama3", "--encoding-option", option))
    assert_one_line_error(result, needle)
    assert "training" not in result.output and not out.exists()


@pytest.mark.parametrize(
    "name,factor,options",
    [
        ("yarn", 2.0, {"attention_factor": 0.0}),
        ("longrope", 2.0, {"attention_factor": -1.0}),
        ("dynamic-yarn", 1.0, {"beta_fast": 1.0, "beta_slow": 32.0}),
        *[(name, 0.5, {}) for name in ("pi", "ntk", "dynamic-ntk", "yarn", "llama3", "longrope")],
        ("pi", float("inf"), {}),
    ],
)
def test_check_scaling_refuses(name, factor, options):
    with pytest.raises(UserError, match=name):
        frequencies.check_scaling(name, 64, factor, 256, **options)


def test_scale_one_is_still_plain_rope():
    plain, _ = frequencies.rope(64, 1e4, 1.0, 256, 256)
    for name, scaling in frequencies.SCALINGS.items():
        frequencies.check_scaling(name, 64, 1.0, 256)
        assert scaling.fn(64, 1e4, 1.0, 256, 256)[0].equal(plain), name
    frequencies.check_scaling(
        "yarn", 64, 2.0, 256, beta_fast=4.0, beta_slow=4.0
    )  # equal betas: a hard cut, still defined
    frequencies.check_scaling("yarn", 2, 2.0, 256)  # a head of one pair is enough for every formula but NTK's


# ---- task files ---------------------------------------------------------------------------------------------


def task_file(tmp_path, **fields):
    """The shipped passkey task with some lines replaced (TOML values as written)."""
    lines = (TASKS_DIR / "passkey.toml").read_text().splitlines()
    lines = [
        f"{line.split('=')[0].strip()} = {fields[line.split('=')[0].strip()]}"
        if "=" in line and line.split("=")[0].strip() in fields
        else line
        for line in lines
    ]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"key_line": '"The pass key is {key} {other}."'}, "'key_line' has placeholder {other}"),
        ({"key_line": '"The pass key is {key} {."'}, "'key_line' is not a valid template"),
        ({"key_line": '"The pass key is {key:>8}."'}, "'key_line' has placeholder {key:>8}"),
        ({"key_line": '"The pass key is {{key}}."'}, "'key_line' must contain {key}"),  # a literal, not a placeholder
        ({"answer": '" {key} {0}."'}, "'answer' has placeholder {0}"),
        ({"answer": '" {key} {name}."'}, "'answer' has placeholder {name}"),
        ({"depths": "[0.0, 0.5, 0.5]"}, "'depths' must not repeat a depth"),
    ],
)
def test_task_file_templates_and_depths(tmp_path, fields, needle):
    path = task_file(tmp_path, **fields)
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(path)]), f"bad.toml: field {needle}")


def test_named_task_question_may_use_only_name(tmp_path):
    text = (TASKS_DIR / "ruler-multikey.toml").read_text()
    path = tmp_path / "bad.toml"
    path.write_text(text.replace('question = "What is', 'question = "{key}: What is'))
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(path)]), "'question' has placeholder {key}")


def test_an_empty_word_key_list_is_named_as_such(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text((TASKS_DIR / "passkey.toml").read_text().replace("key_digits = 5", "keys = []"))
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(path)]), "field 'keys' must list at least one")


def test_a_task_file_or_results_folder_that_is_not_there_is_named_as_such(tmp_path):
    """A path is not a task name: "does not exist", not a list of the shipped tasks; a results table named
    instead of its folder is a file, not a folder without a table."""
    missing = tmp_path / "mine.toml"
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(missing)]), f"task file {missing} does not exist")
    assert_one_line_error(cli.invoke(app, ["run", "--tasks", "ruler-multikeys"]), "did you mean ruler-multikey")
    table = tmp_path / "results.csv"
    table.write_text("run_id\n")
    assert_one_line_error(cli.invoke(app, ["report", str(table)]), "is a file; name the results folder")
    assert_one_line_error(cli.invoke(app, ["report", str(tmp_path / "nowhere")]), "nowhere does not exist")


def test_shipped_task_files_still_validate():
    result = cli.invoke(app, ["tasks"])
    assert result.exit_code == 0, result.output


# ---- JSON corpora -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,content,needle",
    [
        ("a.jsonl", '{"text": "the sky is blue"}\n[1,2,3]\n', "a.jsonl line 2 is a JSON list"),
        ("a.jsonl", '{"text": "the sky is blue"}\n{"text": 5}\n', "a.jsonl line 2 has a 'text' that is a number"),
        ("a.jsonl", '{"text": 5}\n', "a.jsonl line 1 has a 'text' that is a number"),
        ("a.json", '[{"text": "the sky is blue"}, {"text": ["x"]}]', "a.json record 2 has a 'text' that is a list"),
    ],
)
def test_json_corpus_record_without_text_string(tmp_path, name, content, needle):
    corpus, out = tmp_path / name, tmp_path / "out"
    corpus.write_text(content)
    assert_one_line_error(cli.invoke(app, run_args(corpus, out)), needle)
    assert not out.exists()
