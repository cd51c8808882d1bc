"""Bad input, everywhere: every file the tool reads (empty, truncated or garbage) and every numeric option (NaN,
±inf, or a value that means nothing) fails in one line naming the file or the option, with exit code 2, no
traceback and nothing half-written."""

import inspect
import shutil
import typing

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.cli.util import OPTION_BOUNDS
from extrapolate.core.errors import UserError
from extrapolate.tasks.files import TASKS_DIR

from .helpers import make_corpus, tiny_options

cli = CliRunner()
KINDS = ["empty", "truncated", "garbage"]
GARBAGE = bytes(range(256)) * 8  # no text encoding decodes it, and it starts with no format's magic


def damage(path, kind):
    data = path.read_bytes()
    if kind == "empty":
        data = b""
    elif kind == "truncated":
        cut = len(data) // 2
        while cut > 1 and data[cut - 1] == ord("\n"):  # a cut at a line end leaves a shorter but whole text file
            cut -= 1
        data = data[:cut]
    else:
        data = GARBAGE
    path.write_bytes(data)


def assert_one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert needle.lower() in lines[0].lower(), lines[0]


def run_args(folder, out, *extra):
    return [
        "run",
        *tiny_options(steps=2, batch_size=2, eval_len=64, eval_tokens=64),
        "--tasks",  # the default's retrieval would be left out with a warning: no prompt fits in 32 tokens
        "perplexity",
        "--corpus",
        str(folder / "corpus"),
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny run: a run folder (tables, run.json) and its cached checkpoint, copied by every test that
    damages one of them."""
    root = tmp_path_factory.mktemp("trained")
    make_corpus(root / "corpus", documents=4, words=300)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
        result = cli.invoke(app, run_args(root, root / "run"))
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def work(tmp_path, trained, monkeypatch):
    folder = tmp_path / "work"
    shutil.copytree(trained, folder)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(folder / "cache"))
    return folder


def checkpoint(work):
    (folder,) = (work / "cache" / "models").iterdir()
    return folder


def snapshot(folder):
    return {p.relative_to(folder): p.stat().st_mtime_ns for p in folder.rglob("*")}


# ---- files ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "complete.json"])
def test_damaged_checkpoint(work, name, kind):
    damage(checkpoint(work) / name, kind)
    out = work / "hf"
    assert_one_line_error(cli.invoke(app, ["export", str(checkpoint(work)), "--out", str(out)]), name)
    assert not out.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_training_state(work, kind):
    (checkpoint(work) / "complete.json").unlink()  # an interrupted training: the next run resumes from state.pt
    damage(checkpoint(work) / "state.pt", kind)
    out = work / "again"
    assert_one_line_error(cli.invoke(app, run_args(work, out)), "state.pt")
    assert not out.exists()


class Planted:
    """An object whose unpickling runs code: here it only creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_training_state_that_would_run_code_is_refused_unread(work, tmp_path):
    """A state file is read as plain data only: a pickle that would build another object (and so run code)
    is refused in one line naming the file, and its code never runs."""
    marker = tmp_path / "ran"
    state = checkpoint(work) / "state.pt"
    plain = torch.load(state, weights_only=True)
    torch.save({**plain, "optimizer": {"state": {}, "param_groups": [], "planted": Planted(marker)}}, state)
    (checkpoint(work) / "complete.json").unlink()  # an interrupted training: the next run resumes from state.pt
    out = work / "again"
    result = cli.invoke(app, run_args(work, out))
    assert_one_line_error(result, f"training state {state} is corrupt or unreadable (not plain data")
    assert not marker.exists() and not out.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_run_record(work, kind):
    damage(work / "run" / "run.json", kind)
    out = work / "hf"
    assert_one_line_error(cli.invoke(app, ["export", str(work / "run"), "--out", str(out)]), "run.json")
    assert not out.exists()


@pytest.mark.parametrize("kind", [*KINDS, "list", "request"])
def test_damaged_record_among_the_runs_is_refused_by_report_and_before_training(work, kind):
    (record,) = (work / "run" / "runs").glob("*.json")
    if kind in KINDS:
        damage(record, kind)
    else:  # parsed, but not the object a record is
        record.write_text("[1, 2]" if kind == "list" else '{"request": 5}')
    before = snapshot(work / "run")
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), f"run record {record}")
    assert_one_line_error(cli.invoke(app, run_args(work, work / "run")), record.name)
    assert snapshot(work / "run") == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["results.csv", "positions.csv"])
def test_damaged_table(work, name, kind):
    damage(work / "run" / name, kind)
    before = snapshot(work / "run")
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), name)
    # a run appending to the table refuses it before training, and leaves the folder as it was
    assert_one_line_error(cli.invoke(app, run_args(work, work / "run")), name)
    assert snapshot(work / "run") == before


def tiny_gguf(path):
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_tensor("token_embd.weight", np.ones((16, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_gguf(tmp_path, kind):
    pytest.importorskip("gguf")
    path = tiny_gguf(tmp_path / "model.gguf")
    damage(path, kind)
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, ["run", "--model", str(path), "--out", str(out)]), "model.gguf")
    assert not out.exists()


def test_a_gguf_holding_no_model_is_one_line(tmp_path):
    """Metadata and a RoPE table only: refused, not loaded as transformers' default-sized model (7B, in memory)."""
    from gguf import GGUFWriter

    path = tmp_path / "meta-only.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_tensor("rope_freqs.weight", np.ones(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, ["run", "--model", str(path), "--out", str(out)]), "holds no model")
    assert not out.exists()


@pytest.mark.parametrize("spec", ["./my-checkpoint", "~/models/mine", "models/llama/8b"])
def test_a_model_path_that_does_not_exist_is_named_as_one(tmp_path, monkeypatch, spec):
    """A path that is not there is no hub id (`owner/name`), online or not: one line, not the hub's id rules."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    result = cli.invoke(app, ["run", "--model", spec, "--out", str(out)])
    assert_one_line_error(result, f"model {spec}: no such folder or file")
    assert not out.exists()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_damaged_model_folder(tmp_path, name, kind):
    from safetensors.torch import save_file

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": 8}')
    save_file({"model.embed_tokens.weight": torch.ones(16, 8)}, str(folder / "model.safetensors"))
    damage(folder / name, kind)
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, ["run", "--model", str(folder), "--out", str(out)]), name)
    assert not out.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_task_file(tmp_path, kind):
    path = tmp_path / "mytask.toml"
    shutil.copy(TASKS_DIR / "passkey.toml", path)
    damage(path, kind)
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(path)]), "mytask.toml")


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_suite_file(tmp_path, kind, monkeypatch):
    import extrapolate.run.sweep

    def no_sweep(*args, **kwargs):  # a suite file that loads would start the whole suite: never here
        raise AssertionError("the damaged suite file was accepted")

    monkeypatch.setattr(extrapolate.run.sweep, "sweep", no_sweep)
    path = tmp_path / "mysuite.toml"
    shutil.copy(TASKS_DIR / "suites" / "reference.toml", path)
    damage(path, kind)
    assert_one_line_error(cli.invoke(app, ["reproduce", "--suite", str(path)]), "mysuite.toml")


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_corpus(tmp_path, kind):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(f'{{"text": "document {i} {"words " * 40}"}}\n' for i in range(12)))
    damage(path, kind)
    out = tmp_path / "out"
    assert_one_line_error(
        cli.invoke(app, ["run", "--model", "tiny", "--corpus", str(path), "--out", str(out)]), "corpus.jsonl"
    )
    assert not out.exists()


def test_damaged_corpus_parquet_names_the_field(tmp_path):
    import pandas as pd

    path = tmp_path / "corpus.parquet"
    pd.DataFrame({"text": list(range(12))}).to_parquet(path)  # numbers where the documents go
    out = tmp_path / "out"
    assert_one_line_error(
        cli.invoke(app, ["run", "--model", "tiny", "--corpus", str(path), "--out", str(out)]),
        "every 'text' must be a string",
    )
    assert not out.exists()


@pytest.mark.parametrize("column", ["finetune_steps", "finetune_len"])
def test_table_with_a_word_in_a_later_numeric_column(work, column):
    """Columns added after tables were first written are checked where present, like the original ones."""
    import pandas as pd

    table = pd.read_csv(work / "run" / "results.csv")
    table[column] = "many"
    table.to_csv(work / "run" / "results.csv", index=False)
    before = snapshot(work / "run")
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), column)
    assert_one_line_error(cli.invoke(app, run_args(work, work / "run")), column)
    assert snapshot(work / "run") == before


@pytest.mark.parametrize(
    "name,column,value",
    [("results.csv", "eval_len", 0), ("results.csv", "train_len", -256), ("positions.csv", "eval_len", -64)],
)
def test_table_with_a_length_below_one(work, name, column, value):
    import pandas as pd

    table = pd.read_csv(work / "run" / name)
    table.loc[len(table) - 1, column] = value
    table.to_csv(work / "run" / name, index=False)
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), f"{column} must be above 0")


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"depth": float("inf"), "task": "passkey"}, "depth is infinite"),
        ({"n": float("inf")}, "n is infinite"),
        ({"n_tokens": 2.5}, "n_tokens must be a whole number"),
        ({"value": 0.5}, "value of a 'ppl' row must be at least 1"),
        ({"value": float("-inf")}, "value of a 'ppl' row must be at least 1"),
        ({"value": -0.1, "metric": "nll"}, "value of a 'nll' row must be at least 0"),
        ({"task": "passkey", "metric": "accuracy", "depth": 0.5, "value": 1.5}, "'accuracy' row must be from 0 to 1"),
        ({"task": "passkey", "metric": "rank_accuracy", "depth": 0.5, "value": -1}, "must be from 0 to 1"),
        ({"task": "passkey", "metric": "accuracy", "depth": 5, "value": 0.5}, "depth must be from 0 to 1"),
        ({"eval_len": 64.5}, "eval_len must be a whole number"),
        ({"seed": -1}, "seed must be at least 0"),
    ],
)
def test_table_with_a_number_no_measurement_gives(work, change, needle):
    """Numbers the tool never writes (an infinite count or depth, a share outside [0, 1], a perplexity below 1,
    a fractional count) are refused where the table is read, not in a report's figures. An overflowed
    perplexity (inf) is a value (test_robustness)."""
    import pandas as pd

    table = pd.read_csv(work / "run" / "results.csv")
    row = table.index[table["metric"] == "ppl"][-1]
    for column, value in change.items():
        table[column] = table[column].astype(object)
        table.loc[row, column] = value
    table.to_csv(work / "run" / "results.csv", index=False)
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), needle)


@pytest.mark.parametrize("name", ["results.csv", "positions.csv"])
def test_a_table_holding_one_measurement_twice_is_refused(work, name):
    """A row copied (two files joined, a run's rows appended by hand) would be read as another seed of the
    same cell, its interval narrowed by a copy: refused where the table is read, naming both lines."""
    table = (work / "run" / name).read_text()
    (work / "run" / name).write_text(table + table.splitlines()[1] + "\n")
    before = snapshot(work / "run")
    copy = len(table.splitlines()) + 1  # the copied row's line: the header, the rows, then it
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), f"line {copy}: the measurement of line 2")
    assert snapshot(work / "run") == before


@pytest.mark.parametrize(
    "column,value", [("step", "late"), ("retrieval_accuracy", "high"), ("step", ""), ("step", "0")]
)
def test_damaged_training_log(work, column, value):
    row = {
        "run_id": "r",
        "encoding": "rope",
        "seed": "0",
        "train_len": "32",
        "step": "10",
        "loss": "3.2",
        "retrieval_accuracy": "0.5",
        column: value,
    }
    (work / "run" / "training.csv").write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n")
    before = snapshot(work / "run")
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), "training.csv")
    assert_one_line_error(cli.invoke(app, run_args(work, work / "run")), "training.csv")
    assert snapshot(work / "run") == before


def test_a_fine_tune_longer_than_the_corpus_is_refused_before_training(tmp_path):
    make_corpus(tmp_path / "corpus", documents=4, words=300)
    out = tmp_path / "out"
    result = cli.invoke(app, run_args(tmp_path, out, "--finetune-steps", "1", "--finetune-len", "100000"))
    assert_one_line_error(result, "fine-tune length L' = 100000")
    assert not out.exists() and not (tmp_path / "cache" / "models").exists()  # no base model was trained


# ---- paths ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--model", "tiny", "--out", ""],
        ["run", "--model", "tiny", "--out="],
        ["report", ""],
        ["export", "RUN", "--out", ""],
        ["sweep", "--out", " "],
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(work, args, monkeypatch):
    here = work / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    args = [str(work / "run") if a == "RUN" else a for a in args]
    assert_one_line_error(cli.invoke(app, args), "not an empty string")
    assert list(here.iterdir()) == []


@pytest.mark.parametrize("name", ["summary.md", "run.json", "results.csv", "perplexity.png", ".lock"])
def test_a_folder_where_an_output_file_goes(work, name):
    run = work / "run"
    target = run / name
    if target.exists():
        target.unlink()
    target.mkdir()
    before = snapshot(run)
    assert_one_line_error(cli.invoke(app, run_args(work, run)), name)
    assert snapshot(run) == before  # refused before any row was appended


def test_a_file_where_an_output_folder_goes(work):
    run = work / "run"
    shutil.rmtree(run / "runs")
    (run / "runs").write_text("not a folder")
    before = snapshot(run)
    assert_one_line_error(cli.invoke(app, run_args(work, run)), "runs")
    assert snapshot(run) == before


def test_export_refuses_a_folder_of_several_scalings_and_takes_one_record(work):
    """A sweep folder holds several models or scalings: exporting "the" run would pick one silently, so it is
    refused, naming the records; a record exports with its scaling (here YaRN on the RoPE model)."""
    import json

    run = work / "run"
    (record,) = (run / "runs").glob("*.json")
    data = json.loads(record.read_text())
    data["encoding"] = {"name": "yarn", "base": 10000.0, "factor": 2.0, "original_len": 32}
    (run / "runs" / "yarn-run.json").write_text(json.dumps(data))
    assert_one_line_error(cli.invoke(app, ["export", str(run), "--out", str(work / "hf")]), "holds 2 runs")
    assert not (work / "hf").exists()
    result = cli.invoke(app, ["export", str(run / "runs" / "yarn-run.json"), "--out", str(work / "hf")])
    assert result.exit_code == 0, result.output
    parameters = json.loads((work / "hf" / "config.json").read_text())["rope_parameters"]
    assert parameters["rope_type"] == "yarn" and parameters["factor"] == 2.0
    assert not [p for p in work.iterdir() if p.name.startswith(".staging")]


def test_export_refuses_a_folder_that_is_not_empty(work):
    out = work / "hf"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert_one_line_error(cli.invoke(app, ["export", str(work / "run"), "--out", str(out)]), "not empty")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_report_refuses_a_folder_where_the_report_goes(work):
    (work / "run" / "report.md").mkdir()
    assert_one_line_error(cli.invoke(app, ["report", str(work / "run")]), "report.md")


def test_a_refused_write_is_one_line(tmp_path, monkeypatch):
    """What no check foresees (a read-only mount, a folder of /proc) still ends in one line, exit code 2."""
    import errno

    import extrapolate.report.plots

    def refuse(fig, path):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(extrapolate.report.plots, "save_figure", refuse)
    plot = tmp_path / "freq.png"
    result = cli.invoke(app, ["encodings", "show", "yarn", "--factor", "4", "--plot", str(plot)])
    assert_one_line_error(result, f"{plot}: Read-only file system")


# ---- numeric options --------------------------------------------------------------------------------------

NOT_FINITE = ["nan", "inf", "-inf"]
RUN_OPTIONS = {  # values that mean nothing for each numeric option of run and sweep
    "--train-len": ["0", "1", "-5", "nan"],
    "--eval-len": ["0", "-1", "inf"],
    "--factor": NOT_FINITE + ["0", "-2", "1e9"],  # past 2^24: θ/s is 0 in float32
    "--width": ["0", "-8"],
    "--layers": ["0"],
    "--heads": ["0", "-1"],
    "--embed-std": NOT_FINITE + ["0", "-0.02", "1e39"],  # past float32: a tensor cannot hold it
    "--position-std": NOT_FINITE + ["-0.01"],
    "--position-lr-scale": NOT_FINITE + ["0", "-0.1", "1e39"],
    "--steps": ["0", "-3", "nan"],
    "--batch-size": ["0", "-1"],
    "--lr": NOT_FINITE + ["0", "-0.001", "1e39"],
    "--seed": ["-1", "inf"],
    "--stride": ["0", "-256"],
    "--eval-tokens": ["0", "-1"],
    "--eval-docs": ["0", "-1"],
    "--passkey-fraction": NOT_FINITE + ["-0.1", "1", "2"],
    "--eval-lens": ["nan", "64,inf", "0", "64,-2", "", ",", "1k,1024"],
    "--finetune-len": ["0", "-5", "nan", "256", "100"],  # L' must be longer than L (256)
    "--finetune-lr": NOT_FINITE + ["0", "-1e-4", "1e300"],
}
SHOW_OPTIONS = {  # and of `encodings show`
    "--head-dim": ["0", "-2", "nan"],
    "--base": NOT_FINITE + ["0", "-10000", "1"],
    "--factor": NOT_FINITE + ["0", "-1", "16777217"],
    "--original-len": ["0", "-2048"],
    "--seq-len": ["0", "-1"],
    "--heads": ["0", "-8"],
    "--position": ["-1"],
    "--width": ["0", "-8"],
    "--beta-fast": NOT_FINITE + ["0", "-32"],
    "--beta-slow": NOT_FINITE + ["0", "-1"],
    "--distances": ["nan", "1,-5", "5,5"],
}


RUN_OPTIONS["--encoding-option"] = ["window=0", "beta=1", "leak=nan"]
SWEEP_OPTIONS = {
    **{k: v for k, v in RUN_OPTIONS.items() if k != "--seed"},
    "--seeds": ["-1", "nan", "0,-2", "0,1,0"],  # a repeated item, as in a list of names
    "--finetune-steps": ["-1", "nan", "0,-25", "0,25,25"],
    "--gpus-per-task": ["-1"],
    "--cpus-per-task": ["0"],
    "--time-min": ["0"],
    "--executor": ["gpu"],
}
RUN_OPTIONS["--finetune-steps"] = ["-1", "nan"]


def cases(command, options):
    return [(command, flag, value) for flag, values in options.items() for value in values]


@pytest.mark.parametrize("command,flag,value", cases("run", RUN_OPTIONS) + cases("sweep", SWEEP_OPTIONS))
def test_bad_number_run_and_sweep(tmp_path, command, flag, value):
    out = tmp_path / "out"
    # `--flag=value`, so that a value starting with "-" is read as the value
    args = [command, "--model", "tiny", "--corpus", str(tmp_path / "none.txt"), "--out", str(out), f"{flag}={value}"]
    assert_one_line_error(cli.invoke(app, args), flag)
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_stride_longer_than_a_window_is_refused(tmp_path, command):
    """Sliding windows moving by more than their length would leave tokens unscored between them."""
    out = tmp_path / "out"
    args = [
        command,
        "--model",
        "tiny",
        "--corpus",
        str(tmp_path / "none.txt"),
        "--out",
        str(out),
        "--protocol",
        "sliding",
        "--stride",
        "512",
        "--eval-lens",
        "256,1024",
    ]
    assert_one_line_error(cli.invoke(app, args), "--stride 512 is longer than the evaluation length 256")
    assert not out.exists()


@pytest.mark.parametrize("command,flag,value", cases("encodings show", SHOW_OPTIONS))
def test_bad_number_encodings_show(command, flag, value):
    encoding = {"--position": "sinusoidal", "--width": "sinusoidal", "--distances": "t5"}.get(flag, "yarn")
    assert_one_line_error(cli.invoke(app, [*command.split(), encoding, f"{flag}={value}"]), flag)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-4k"])
def test_bad_number_bench(tmp_path, value, monkeypatch):
    import extrapolate.bench.measure

    def no_bench(*args, **kwargs):  # the options are checked before any measurement: never here
        raise AssertionError("bench started with a bad --eval-lens")

    monkeypatch.setattr(extrapolate.bench.measure, "run_bench", no_bench)
    out = tmp_path / "bench"
    assert_one_line_error(cli.invoke(app, ["bench", f"--eval-lens={value}", "--out", str(out)]), "--eval-lens")
    assert not out.exists()


def numeric_options():
    """(command, flag) of every option whose type is a number, in every command and subcommand."""

    def walk(command, path):
        hints = typing.get_type_hints(inspect.unwrap(command.callback)) if command.callback else {}
        for param in command.params:
            kinds = typing.get_args(hints.get(param.name)) or (hints.get(param.name),)
            if int in kinds or float in kinds:
                yield path, param.opts[0]
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}".strip())

    return sorted(set(walk(typer.main.get_command(app), "")))


def test_every_numeric_option_has_a_bound():
    """A new numeric option needs its range in OPTION_BOUNDS (finiteness is checked for every float anyway)."""
    options = numeric_options()
    assert ("run", "--lr") in options and ("encodings show", "--base") in options
    assert [(command, flag) for command, flag in options if flag not in OPTION_BOUNDS] == []


def test_the_hub_clients_retry_warnings_are_silenced_while_it_fetches(monkeypatch, capsys):
    """Where the hub cannot be reached its client logs a warning per retry before it raises; the user sees
    only the one-line error, and the client's logging is as it was afterwards."""
    from huggingface_hub.utils import logging as hub_logging

    from extrapolate.data import corpora

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    before = hub_logging.get_verbosity()

    def unreachable(name, split):
        hub_logging.get_logger("huggingface_hub.utils._http").warning("Retrying in 8s [Retry 4/5].")
        raise ConnectionError(f"Couldn't reach {name} on the hub\n(a second line)")

    monkeypatch.setattr(corpora.quiet_datasets(), "load_dataset", unreachable)
    with pytest.raises(UserError, match=r"hub dataset 'someone/data' could not be loaded: Couldn't reach") as error:
        corpora.hub_corpus("someone/data")
    assert "\n" not in str(error.value) and "Retrying" not in capsys.readouterr().err
    assert hub_logging.get_verbosity() == before
