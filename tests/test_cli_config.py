"""`--config`: a run's settings kept in a file. A run.json given back re-creates the same run id; a TOML file's
values are defaults that flags override; a name that is no option is one line, exit 2. `-h` and `--version`.
Progress in a log: plain lines while training where stderr is no terminal."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from tests.helpers import make_corpus
from tests.test_tokenizers import tiny_run


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_a_run_json_given_back_re_creates_the_same_run_id(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    first = invoke(*tiny_run(corpus, tmp_path / "one", "--encoding", "alibi", "--seed", "3"))
    assert first.exit_code == 0, first.output
    again = invoke("run", "--config", str(tmp_path / "one" / "run.json"), "--out", str(tmp_path / "two"))
    assert again.exit_code == 0, again.output
    one, two = (pd.read_csv(tmp_path / name / "results.csv") for name in ("one", "two"))
    assert set(one.run_id) == set(two.run_id) and set(two.encoding) == {"alibi"} and set(two.seed) == {3}
    assert "reused the trained model" in again.output  # the same model, found in the cache


def test_toml_values_are_defaults_that_flags_override(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    config = tmp_path / "run.toml"
    config.write_text(
        f'model = "tiny"\nsteps = 2\nbatch-size = 2\ntrain_len = 32\neval-lens = [32, 64]\n'
        f'eval_tokens = 128\ncorpus = "{corpus}"\nencoding = "rope"\n'
    )
    result = invoke("run", "--config", str(config), "--steps", "3", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    request = json.loads((tmp_path / "out" / "run.json").read_text())["request"]
    assert request["steps"] == 3 and request["train_len"] == 32 and request["eval_lens"] == [32, 64]
    assert request["batch_size"] == 2


def test_a_name_that_is_no_option_is_one_line(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("train_len = 64\nlayres = 4\n")
    result = invoke("run", "--config", str(config), "--out", str(tmp_path / "out"))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "'layres' is not an option of `run`" in lines[0]
    assert not (tmp_path / "out").exists()
    missing = invoke("run", "--config", str(tmp_path / "none.toml"))
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_repeatable_option_takes_one_item_as_a_string(tmp_path):
    """`encoding-option = "beta_fast=16"` is a list of one, as the flag given once (click alone would answer
    "Value must be an iterable")."""
    config = tmp_path / "one.toml"
    config.write_text('encoding = "yarn"\nfactor = 2\nencoding-option = "beta_fast=16"\n')
    taken = invoke("run", "--config", str(config), "--dry-run", "--out", str(tmp_path / "out"))
    assert taken.exit_code == 0, taken.output
    config.write_text('encoding = "yarn"\nfactor = 2\nencoding-option = "wndow=16"\n')
    refused = invoke("run", "--config", str(config), "--dry-run", "--out", str(tmp_path / "out"))
    assert refused.exit_code == 2 and "unknown option 'wndow'" in refused.output, refused.output


@pytest.mark.parametrize(
    "request_,needle",
    [
        ({"encoding": "self-extend", "encoding_options": ["window"]}, "[name, value] pairs"),
        ({"encoding": "self-extend", "encoding_options": {"window": 64}}, "[name, value] pairs"),
        ({"encoding": "self-extend", "encoding_options": 5}, "[name, value] pairs"),
        ([1], "not a table of option values"),
        ({"steps": True}, "steps must be a whole number, got True"),
        ({"steps": 1e30}, "steps must be a whole number"),
        ({"lr": "fast", "factor": [2]}, "factor must be a number"),
        ({"compile": 1}, "compile must be true or false"),
    ],
)
def test_a_run_record_with_values_of_the_wrong_kind_is_one_line(tmp_path, request_, needle):
    """A run.json edited by hand: one line naming the field, exit 2, never a traceback or a silent reading."""
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"request": request_}))
    result = invoke("run", "--config", str(record), "--out", str(tmp_path / "out"))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line", ['dry_run = "false"', 'quiet = "no"', "dry_run = 0"])
def test_a_config_files_yes_no_option_must_be_true_or_false(tmp_path, line):
    """A flag of the command itself (not a request field) is read as strictly as one: "false" is not taken
    for true, which would turn a dry run into a real one."""
    config = tmp_path / "options.toml"
    config.write_text(line + "\n")
    result = invoke("run", "--config", str(config), "--out", str(tmp_path / "out"))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "must be true or false" in lines[0], result.output
    assert not (tmp_path / "out").exists()


def test_a_run_json_plans_the_same_cell_in_a_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    assert invoke(*tiny_run(corpus, tmp_path / "one", "--encoding", "alibi")).exit_code == 0
    plan = invoke("sweep", "--config", str(tmp_path / "one" / "run.json"), "--dry-run", "--out", str(tmp_path / "s"))
    assert plan.exit_code == 0, plan.output
    # one cell, the run's encoding and seed, on the very model the run trained
    model = json.loads((tmp_path / "one" / "run.json").read_text())["model_folder"]
    assert "1 reused" in plan.output and model in plan.output and "1 evaluation cell(s)" in plan.output


def test_help_and_version():
    from importlib.metadata import version

    assert invoke("--version").output.strip() == f"extrapolate {version('extrapolate')}"
    for args in (["-h"], ["run", "-h"], ["sweep", "-h"], ["encodings", "show", "-h"]):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage" in result.output


def test_training_prints_plain_progress_lines_in_a_log(capsys):
    from extrapolate.cli.render import RichReporter

    reporter = RichReporter(log_every=0.0)  # a line at every step
    on_step = reporter.training(3, reused=False)
    for step in (1, 2, 3):
        on_step(step, 3, 2.5 - step / 10, 1234.0)
    reporter.done_training()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("training step")]
    assert lines[0].startswith("training step 1/3 · loss 2.400 · 1,234 tok/s · ") and len(lines) == 3
    assert lines[-1].endswith("0.0 min left")


def test_time_left_after_a_resume_counts_only_the_steps_this_run_made(capsys, monkeypatch):
    from extrapolate.cli import render

    clock = iter([0.0, 0.0, 60.0, 60.0])  # the bar's start, then one minute for its first step
    monkeypatch.setattr(render.time, "monotonic", lambda: next(clock))
    reporter = render.RichReporter(log_every=0.0)
    on_step = reporter.training(2000, reused=False)
    on_step(1001, 2000, 2.0, 1000.0)  # resumed from a checkpoint at step 1000
    reporter.done_training()
    err = capsys.readouterr().err
    assert "resumed from the checkpoint at step 1000" in err
    # 999 steps left at a minute a step: not a minute spread over the 1001 steps the checkpoint counts
    assert "training step 1001/2000 · loss 2.000 · 1,000 tok/s · 999.0 min left" in err


def test_listings_print_whole_names_at_any_width_and_as_json(monkeypatch):
    from extrapolate.cli import util
    from extrapolate.encodings import ENCODINGS
    from extrapolate.tasks.files import list_task_names

    monkeypatch.setattr(util.stdout, "_width", 40)  # a narrow terminal
    monkeypatch.setattr(util.stdout, "_force_terminal", True)
    for command, names in (("tasks", list_task_names()), ("encodings", [name for name, _ in ENCODINGS])):
        table = invoke(command)
        assert table.exit_code == 0, table.output
        shown = {line.split("│")[1].strip() for line in table.output.splitlines() if line.count("│") > 2}
        assert set(names) <= shown  # every name whole in its cell, none cut with "…"
        listed = json.loads(invoke(command, "--json").output)
        assert set(names) <= {row.get("name", row.get("task")) for row in listed}
    models = json.loads(invoke("models", "--json").output)
    assert {"tiny", "small", "base", "smollm2-135m"} <= {row["name"] for row in models}


def test_run_and_sweep_group_their_options_in_panels():
    for command, panels in (
        ("run", ("Model", "Data", "Training", "Evaluation", "Retrieval", "Output")),
        ("sweep", ("Model", "Data", "Training", "Evaluation", "Retrieval", "Output", "Cluster")),
    ):
        shown = {
            line.split("─ ")[1].split(" ")[0] for line in invoke(command, "-h").output.splitlines() if "╭─ " in line
        }
        assert set(panels) <= shown, shown


def test_one_name_per_concept_the_former_names_still_work_and_say_so(tmp_path):
    from unittest import mock

    with (
        mock.patch("extrapolate.bench.job.bench_job", return_value=([], {})) as job,
        mock.patch("extrapolate.cli.app.render_bench"),
    ):
        for flag in ("--eval-lens", "--lengths"):
            result = invoke("bench", flag, "1k,2k", "--out", str(tmp_path / "b"))
            assert result.exit_code == 0, result.output
            assert job.call_args.args[0].lengths == (1024, 2048)
            assert ("--lengths is called --eval-lens now" in result.output) == (flag == "--lengths")
    assert "--lengths" not in invoke("bench", "-h").output and "--hf" not in invoke("export", "-h").output
    missing = invoke("export", str(tmp_path))
    assert missing.exit_code == 2 and "--out" in missing.output


def test_run_dry_run_plans_its_one_cell_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    plan = invoke(*tiny_run(corpus, tmp_path / "out", "--encoding", "alibi", "--dry-run"))
    assert plan.exit_code == 0, plan.output
    assert "1 model(s) to train, 0 reused; 1 evaluation cell(s)" in plan.output and "alibi" in plan.output
    assert not (tmp_path / "out").exists() and not list((tmp_path / "cache").glob("models/*/complete.json"))
    # the plan names the scaling's factor, the lengths, the tasks and the device "auto" resolved to
    scaled = invoke(*tiny_run(corpus, tmp_path / "out", "--encoding", "yarn", "--dry-run")).output.splitlines()
    header = scaled.index("seed\tencoding\tfactor\tmodel\tlengths\ttasks\tstate")
    seed, encoding, factor, model, lengths, tasks, state = scaled[header + 1].split("\t")
    assert (encoding, factor, tasks, state) == ("yarn", "2", "perplexity", "train + evaluate")
    assert lengths == "32,64" and model.startswith("rope-L32-")
    assert scaled[-1].endswith("min on cpu")
    # a retrieval task shows as its file's name, not as the kind that measures it (vt-compact, not ruler)
    retrieval = [*tiny_run(corpus, tmp_path / "out", "--dry-run"), "--train-len", "512", "--eval-len", "512"]
    retrieval[retrieval.index("--tasks") + 1] = "perplexity,vt-compact"
    planned = invoke(*retrieval).output.splitlines()
    assert planned[planned.index(scaled[header]) + 1].split("\t")[5] == "perplexity,vt-compact"


def test_quiet_prints_no_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    loud = invoke(*tiny_run(corpus, tmp_path / "loud", "--encoding", "alibi"))
    quiet = invoke(*tiny_run(corpus, tmp_path / "quiet", "--encoding", "alibi", "--quiet"))
    assert loud.exit_code == quiet.exit_code == 0, quiet.output
    assert "evaluating perplexity" in loud.output and "evaluating" not in quiet.output
    # no progress: the closing panel alone (what was found, then the files written; folded by the narrow terminal)
    said = " ".join(quiet.output.split())
    assert said.startswith("found (L = 32; means over seeds) encoding seeds ppl at L")
    assert said.endswith(
        f"wrote {tmp_path / 'quiet'}/: summary.md, results.csv, perplexity.png, positions.png, ratio.png"
    )


def test_run_measures_both_axes_by_default_and_leaves_retrieval_out_where_no_prompt_fits(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    common = ["run", "--model", "tiny", "--steps", "2", "--batch-size", "2", "--eval-tokens", "256"]
    common += ["--corpus", str(corpus), "--tokenizer", "bytes"]
    short = invoke(*common, "--train-len", "32", "--eval-len", "64", "--out", str(tmp_path / "short"))
    assert short.exit_code == 0, short.output
    assert "warning: retrieval left out: passkey-word prompts need at least" in short.output
    assert set(pd.read_csv(tmp_path / "short" / "results.csv").task) == {"perplexity"}
    both = invoke(*common, "--train-len", "128", "--eval-len", "128", "--out", str(tmp_path / "both"))
    assert both.exit_code == 0, both.output
    written = pd.read_csv(tmp_path / "both" / "results.csv")
    assert set(written.task) == {"perplexity", "passkey-word"}  # the task file's name, a model trained here's default
    assert set(written.kind) == {"perplexity", "needle"}
    named = invoke(
        *common,
        "--train-len",
        "32",
        "--eval-len",
        "64",
        "--tasks",
        "perplexity,retrieval",
        "--out",
        str(tmp_path / "n"),
    )
    assert named.exit_code == 2 and "prompts need at least" in named.output  # asked for by name: an error


def test_every_length_option_takes_k(tmp_path):
    """--train-len 4k, --eval-len 32k, --finetune-len 8k as --eval-lens 1k,2k: one spelling for every length."""
    from unittest import mock

    with mock.patch("extrapolate.run.run", return_value=tmp_path) as job:
        args = ["run", "--train-len", "4k", "--eval-len", "32K", "--finetune-len", "8k", "--stride", "1k"]
        result = invoke(*args, "--eval-tokens", "64k", "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    request = job.call_args.args[0]
    assert (request.train_len, request.eval_len, request.finetune_len) == (4096, 32768, 8192)
    assert (request.stride, request.eval_tokens) == (1024, 65536)
    bad = invoke("run", "--eval-len", "32q")
    assert bad.exit_code == 2 and "'32q' is not a length" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_version_answers_without_importing_torch():
    """--version is answered before the app is built: no torch import (a second or more), whatever the machine."""
    import subprocess
    import sys

    code = "import sys; sys.argv = ['extrapolate', '--version']; from extrapolate.cli import main; main(); "
    code += "print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["extrapolate", "0.1.0", "False"]


@pytest.mark.parametrize("argv", [["-h"], ["run", "-h"], ["sweep", "--help"], ["encodings", "show", "-h"]])
def test_help_answers_without_importing_torch_or_pandas(argv):
    """The command line's options are declared from light modules (run/request.py, encodings/options.py,
    core/defaults.py; the packages export lazily, core/lazy.py): help is printed without torch or pandas, the
    two imports that take a second or more."""
    import subprocess
    import sys

    code = f"import sys; sys.argv = ['extrapolate', *{argv!r}]\nfrom extrapolate.cli import main\n"
    code += "try:\n    main()\nexcept SystemExit:\n    pass\n"
    code += "print('heavy:', sorted(m for m in ('torch', 'pandas', 'matplotlib', 'transformers') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage" in done.stdout and done.stdout.rstrip().endswith("heavy: []"), done.stdout[-500:] + done.stderr


def test_listings_off_a_terminal_are_tab_separated_with_whole_identities():
    from extrapolate.tasks.files import load_task

    lines = invoke("tasks").output.splitlines()  # the test runner's stdout is no terminal, as `| cat` is not
    assert lines[0].split("\t") == ["task", "kind", "version", "prompts", "identity"]
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    assert rows["niah_multikey_1"][-1] == load_task("niah_multikey_1").identity
    assert not any(c in "".join(lines) for c in "│┃━")
