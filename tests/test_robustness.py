"""Bad input: one line on stderr, exit code 2, no traceback, nothing left behind. Kill and resume: the same
results as an uninterrupted run. The same command twice: byte-identical tables (timestamps aside)."""

import os
import subprocess
import sys
import warnings

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app

from .helpers import killed_at_step, make_corpus, six_steps, tiny_options, wait_for

cli = CliRunner()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def base(corpus, out, *extra):
    return [
        "run",
        "--tasks",
        "perplexity",
        *tiny_options(steps=3, batch_size=2, eval_len=64, eval_tokens=128),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        *extra,
    ]


def assert_one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert needle.lower() in lines[0].lower() and "Traceback" not in result.output


BAD = [
    (["--encoding", "alibbi"], "did you mean alibi"),
    (["--encoding", "yarnn"], "did you mean yarn"),
    (["--tasks", "perplexty"], "did you mean perplexity"),
    (["--tasks", "passkee"], "did you mean passkey?"),  # the closest name alone, once
    (["--model", "smal"], "did you mean small"),
    (["--eval-len", "16"], "shorter than --train-len"),
    (["--eval-len", "abc"], "--eval-len"),
    (["--train-len", "-5"], "--train-len"),
    (["--eval-lens", "64,-2"], "--eval-lens"),
    (["--encoding", "pi", "--factor", "0"], "factor"),
    (["--encoding", "ntk", "--factor", "-1"], "factor"),
    (["--width", "30", "--heads", "4"], "must divide"),
    (["--encoding", "rope", "--width", "36", "--heads", "4"], "even head dimension"),
    (["--heads", "0"], "heads"),
    (["--device", "cuda"], "CUDA is not available"),
    (["--device", "tpu"], "unknown device"),
    (["--protocol", "diagonal"], "protocol"),
    (["--tasks", "retrieval", "--passkey-task", "nonexistent"], "unknown task"),
    (["--kernel", "flexx"], "did you mean flex"),
    (["--dtype", "float16"], "--dtype"),
    (["--train-dtype", "half"], "--train-dtype"),
    (["--model", "some-org/some-model", "--width", "64"], "--width"),
    (["--model", "some-org/some-model", "--embed-std", "0.05", "--layers", "2"], "--layers, --embed-std"),
    (["--tasks", ","], "names no task"),
    (["--eval-lens", "32,64"], "not both"),  # base() already gives --eval-len
    (["--seed", str(2**64)], "--seed"),
    (["--steps", str(10**23)], "--steps must be at most 2^63"),  # past int64: a run that could never end
    (["--longppl-window", str(10**23), "--tasks", "longppl"], "--longppl-window must be at most 2^63"),
    (["--eval-lens", f"64,{10**20}"], "--eval-lens must be at most 2^63"),
    (["--encoding", "yarn", "--factor", "0.5"], "≥ 1"),
    (["--batch-size", "99999999999"], "out of memory"),
]


@pytest.mark.parametrize("extra,needle", BAD)
def test_bad_input_one_line_exit_2_nothing_left(tmp_path, corpus, extra, needle):
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, base(corpus, out, *extra)), needle)
    assert not out.exists()


def test_corpus_problems(tmp_path):
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, base(tmp_path / "missing.txt", out)), "does not exist")
    (tmp_path / "empty.txt").write_text("")
    assert_one_line_error(cli.invoke(app, base(tmp_path / "empty.txt", out)), "empty")
    (tmp_path / "short.txt").write_text("too short " * 5)
    assert_one_line_error(cli.invoke(app, base(tmp_path / "short.txt", out)), "longer than")
    assert_one_line_error(cli.invoke(app, base("shakespear", out)), "did you mean shakespeare")
    assert_one_line_error(cli.invoke(app, base(" ", out)), "--corpus: give a built-in name")  # not the folder "."
    assert_one_line_error(cli.invoke(app, base("someone/some-dataset", out)), "offline")
    assert not out.exists()


def test_malformed_task_file(tmp_path, corpus):
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\nname = "x"\n')
    assert_one_line_error(
        cli.invoke(app, base(corpus, tmp_path / "o", "--tasks", "retrieval", "--passkey-task", str(bad))),
        "missing field",
    )
    bad.write_text("version = [")
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(bad)]), "not valid TOML")
    from extrapolate.tasks.files import TASKS_DIR

    text = (TASKS_DIR / "passkey.toml").read_text().replace("trials = 10", "trials = -1")
    bad.write_text(text)
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(bad)]), "'trials'")
    # one-digit keys leave 8 other keys: 9 distractors could never be drawn
    bad.write_text((TASKS_DIR / "passkey.toml").read_text().replace("key_digits = 5", "key_digits = 1"))
    assert_one_line_error(cli.invoke(app, ["tasks", "--validate", str(bad)]), "'distractors'")


def test_unwritable_output_folder(tmp_path, corpus):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert_one_line_error(cli.invoke(app, base(corpus, blocker / "sub")), "cannot create output folder")


def test_corrupt_cached_checkpoint(tmp_path, corpus):
    assert cli.invoke(app, base(corpus, tmp_path / "a")).exit_code == 0
    (model,) = (tmp_path / "cache" / "models").iterdir()
    (model / "model.safetensors").write_bytes(b"\x00" * 10)
    assert_one_line_error(cli.invoke(app, base(corpus, tmp_path / "b")), "corrupt")
    assert not (tmp_path / "b").exists()


def test_divergence_is_recorded(tmp_path, corpus):
    result = cli.invoke(app, base(corpus, tmp_path / "d", "--lr", "1e30", "--steps", "20"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "diverged" in result.output.strip().splitlines()[-1]  # above it: the progress bar
    table = pd.read_csv(tmp_path / "d" / "results.csv")
    assert set(table.status) == {"diverged"}


def test_a_diverged_cell_of_a_sweep_is_recorded_and_the_others_go_on(tmp_path, corpus):
    """In a sweep a diverged training is one warning and its `diverged` rows; the next cell still runs and the
    report is written."""
    args = base(corpus, tmp_path / "s", "--lr", "1e30", "--steps", "20", "--tasks", "perplexity")[1:]
    result = cli.invoke(app, ["sweep", "--encodings", "nope,alibi", *args])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    warned = [line for line in result.output.splitlines() if "recorded as diverged" in line]
    assert sorted(line.split(":")[1].strip() for line in warned) == ["alibi seed 0", "nope seed 0"], result.output
    table = pd.read_csv(tmp_path / "s" / "results.csv")
    assert set(table.status) == {"diverged"} and set(table.encoding) == {"nope", "alibi"}
    assert (tmp_path / "s" / "report.md").exists()


def test_divergence_and_report_of_a_folder_with_no_measurement(tmp_path, corpus):
    """Every row failed (no parameter count, no value): the report still renders, from the table alone."""
    cli.invoke(app, base(corpus, tmp_path / "d", "--lr", "1e30", "--steps", "20"))
    result = cli.invoke(app, ["report", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "parameters not recorded" in (tmp_path / "d" / "report.md").read_text()


def test_non_finite_values_stay_out_of_the_plots(tmp_path, corpus):
    """A perplexity that overflowed (inf) or a NaN cannot go on a log axis: the report keeps them in its tables
    and draws the rest, instead of failing half way through its figures."""
    out = tmp_path / "r"
    assert cli.invoke(app, base(corpus, out)).exit_code == 0
    table = pd.read_csv(out / "results.csv")
    table.loc[table["eval_len"] == 64, "value"] = float("inf")
    table.loc[table["eval_len"] == 32, "value"] = float("nan")
    table.to_csv(out / "results.csv", index=False)
    (out / "report.md").unlink(missing_ok=True)
    result = cli.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert "inf" in (out / "report.md").read_text()


@pytest.mark.filterwarnings("error::RuntimeWarning:extrapolate")
def test_a_perplexity_that_overflowed_everywhere_is_reported_without_numpy_warnings(tmp_path, corpus):
    """inf at L too: its ratios are inf / inf, shown as nan, with no RuntimeWarning printed under the report."""
    out = tmp_path / "r"
    assert cli.invoke(app, base(corpus, out)).exit_code == 0
    table = pd.read_csv(out / "results.csv")
    table.loc[table["task"] == "perplexity", "value"] = float("inf")
    table.to_csv(out / "results.csv", index=False)
    result = cli.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output


def test_a_perplexity_at_the_edge_of_floats_is_drawn(tmp_path, corpus):
    """1e308 at every length: the log axis's own ticks, where round numbers cannot be stepped through."""
    out = tmp_path / "r"
    assert cli.invoke(app, base(corpus, out)).exit_code == 0
    table = pd.read_csv(out / "results.csv")
    table.loc[table["metric"] == "ppl", "value"] = 1e308
    table.to_csv(out / "results.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nor numpy's overflow warnings printed to the user
        result = cli.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output


def test_interrupt_inside_a_command_says_so(monkeypatch):
    """Ctrl-C in a command: typer turns it into exit code 130 silently; the user must read that finished work
    is kept and how to resume."""
    import extrapolate.report.pages as report

    def interrupted(folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "write_report", interrupted)
    result = cli.invoke(app, ["report", "anywhere"])
    assert result.exit_code == 130 and "interrupted" in result.output and "Traceback" not in result.output


def test_sigterm_inside_a_command_cleans_up_and_says_so(monkeypatch):
    """`kill`, a container's stop or a scheduler's time limit: as Ctrl-C, one line, and exit code 143; the
    handler is the command's alone (the process's own is back afterwards)."""
    import signal

    import extrapolate.report.pages as report

    def terminated(folder):
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(report, "write_report", terminated)
    result = cli.invoke(app, ["report", "anywhere"])
    assert result.exit_code == 143 and "terminated (SIGTERM)" in result.output and "Traceback" not in result.output
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_mid_run_is_one_line_and_leaves_no_lock_or_temporary_file(tmp_path, corpus):
    import signal

    out = tmp_path / "out"
    args = [*tiny_options(steps=4000, eval_len=64, eval_tokens=128), "--corpus", str(corpus), "--out", str(out)]
    env = {**os.environ, "EXTRAPOLATE_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "extrapolate", "run", *args], env=env, stderr=subprocess.PIPE, text=True
    )
    wait_for(lambda: (out / ".lock").exists() or process.poll() is not None, "the run to lock its folder")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate()
    assert process.returncode == 143, stderr
    assert "terminated (SIGTERM)" in stderr.strip().splitlines()[-1] and "Traceback" not in stderr
    assert not out.exists()  # a new folder with nothing finished in it is removed, its lock with it
    leftovers = [p for p in (tmp_path / "cache").rglob(".tmp-*")]
    assert leftovers == []


def test_a_collective_whose_peer_stopped_is_one_line_under_torchrun(monkeypatch):
    """Rank 1 killed: rank 0's next collective fails in gloo. One line, not sixty lines of traceback; outside a
    launch the same error is a bug and keeps its traceback."""
    import extrapolate.report.pages as report

    def collective(folder):
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [::1]:5")

    monkeypatch.setattr(report, "write_report", collective)
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = cli.invoke(app, ["report", "anywhere"])
    assert result.exit_code == 1 and "another process of this launch stopped" in result.output
    assert len(result.output.strip().splitlines()) == 1
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert isinstance(cli.invoke(app, ["report", "anywhere"]).exception, RuntimeError)


def test_error_text_is_printed_as_written(monkeypatch):
    """A message quoting a library's text in brackets ("[enforce fail at …]") is not eaten as console markup."""
    import extrapolate.report.pages as report
    from extrapolate.core.errors import UserError

    def failing(folder):
        raise UserError("[enforce fail at alloc.cpp:1] [bold]x[/bold]")

    monkeypatch.setattr(report, "write_report", failing)
    result = cli.invoke(app, ["report", "anywhere"])
    assert result.exit_code == 2 and "[enforce fail at alloc.cpp:1] [bold]x[/bold]" in result.output


HOLD = """
import sys, time
from pathlib import Path
from extrapolate.core.lock import folder_lock
with folder_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_second_writer_is_refused(tmp_path, corpus):
    out = tmp_path / "locked"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # a live process holds the folder
        assert_one_line_error(cli.invoke(app, base(corpus, out)), f"(pid {holder.pid}) is writing to")
        assert not (tmp_path / "cache").exists()  # refused before the corpus, tokenizer or model is prepared
    finally:
        holder.kill()  # SIGKILL: no clean-up runs, its lock file (naming a dead pid) stays behind
        holder.wait()
    assert (out / ".lock").read_text() == str(holder.pid)
    assert cli.invoke(app, base(corpus, out)).exit_code == 0  # the kernel released it with its holder


def test_a_lock_file_naming_a_live_process_that_holds_nothing_refuses_nothing(tmp_path, corpus):
    """A pid in a left-over lock file can be another live process's by now (pids are reused)."""
    out = tmp_path / "left-over"
    out.mkdir()
    (out / ".lock").write_text(str(os.getppid()))
    assert cli.invoke(app, base(corpus, out)).exit_code == 0


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_two_processes_starting_at_once_never_both_hold_the_folder(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for trial in range(100):
        barrier, inside, both = context.Barrier(2), context.Value("i", 0), context.Value("i", 0)
        workers = [context.Process(target=enter, args=(tmp_path / str(trial), barrier, inside, both)) for _ in "ab"]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        assert both.value == 0, f"trial {trial}: both processes held the lock"


def enter(folder, barrier, inside, both):
    import time

    from extrapolate.core.errors import UserError
    from extrapolate.core.lock import folder_lock

    barrier.wait()
    try:
        with folder_lock(folder):
            with inside.get_lock():
                inside.value += 1
                both.value += inside.value > 1
            time.sleep(0.02)
            with inside.get_lock():
                inside.value -= 1
    except UserError:
        pass


def stable(path):
    return pd.read_csv(path).drop(columns=["created_at"])


def test_same_command_twice_gives_identical_tables(tmp_path, corpus, monkeypatch):
    assert cli.invoke(app, base(corpus, tmp_path / "a", "--encoding", "t5")).exit_code == 0
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "other-cache"))  # retrain from scratch
    assert cli.invoke(app, base(corpus, tmp_path / "b", "--encoding", "t5")).exit_code == 0
    pd.testing.assert_frame_equal(stable(tmp_path / "a" / "results.csv"), stable(tmp_path / "b" / "results.csv"))
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "a" / "positions.csv"), pd.read_csv(tmp_path / "b" / "positions.csv")
    )


@pytest.mark.slow  # end to end, tens of seconds: run by .ci/run's slow step
def test_sigkill_mid_training_then_resume_equals_uninterrupted(tmp_path, corpus):
    args = [
        *tiny_options(steps=400, eval_len=64, eval_tokens=128),
        "--corpus",
        str(corpus),
        "--encoding",
        "alibi",
    ]
    env = {**os.environ, "EXTRAPOLATE_CACHE": str(tmp_path / "killed-cache")}
    command = [sys.executable, "-m", "extrapolate", "run", *args, "--out", str(tmp_path / "killed")]
    # checkpoints every 100 steps: killed at 150, the run keeps step 100 and must redo 101-150 exactly
    killed_at_step(command, env, 150)
    (folder,) = (tmp_path / "killed-cache" / "models").iterdir()
    assert (folder / "state.pt").exists() and not (folder / "complete.json").exists()
    assert torch.load(folder / "state.pt", weights_only=False)["step"] == 100
    assert not (tmp_path / "killed" / "results.csv").exists()  # nothing half-written
    again = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    assert "resumed from the checkpoint at step 100" in again.stderr  # the user sees the finished steps are kept
    uninterrupted_env = {**env, "EXTRAPOLATE_CACHE": str(tmp_path / "clean-cache")}
    subprocess.run([*command[:-1], str(tmp_path / "clean")], env=uninterrupted_env, check=True, capture_output=True)
    import json

    resumed = json.loads((folder / "complete.json").read_text())
    (clean,) = (tmp_path / "clean-cache" / "models").iterdir()
    uninterrupted = json.loads((clean / "complete.json").read_text())
    assert resumed["losses"] == uninterrupted["losses"] and resumed["final_loss"] == uninterrupted["final_loss"]
    a, b = stable(tmp_path / "killed" / "results.csv"), stable(tmp_path / "clean" / "results.csv")
    pd.testing.assert_frame_equal(a, b)


def test_the_folder_lock_is_a_plain_file_while_held_and_gone_after(tmp_path):
    from extrapolate.core.lock import LOCK, folder_lock

    with folder_lock(tmp_path / "out"):
        mode = (tmp_path / "out" / LOCK).stat().st_mode & 0o777
        assert mode & 0o111 == 0 and mode & 0o600 == 0o600  # readable data, never executable
        assert (tmp_path / "out" / LOCK).read_text() == str(os.getpid())
    assert not (tmp_path / "out" / LOCK).exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["bench", "--model", "tiny", "--eval-lens", "16", "--encodings", "rope", "--out", "{file}"], "is a file"),
        (
            ["bench", "--model", "tiny", "--eval-lens", "16", "--encodings", ",", "--out", "{tmp}/b"],
            "names no encoding",
        ),
        (["bench", "--model", "tiny", "--eval-lens", "16", "--dtype", "float16", "--out", "{tmp}/b"], "--dtype"),
        (["encodings", "show", "yarn", "--factor", "4", "--plot", "{tmp}"], "name a file"),
        (["encodings", "show", "yarn", "--factor", "4", "--plot", "{tmp}/p.xyz"], "name a file"),
        (["encodings", "show", "yarn", "--factor", "4", "--plot", "{file}/p.png"], "is a file"),
    ],
)
def test_other_commands_check_their_outputs_before_any_work(tmp_path, args, needle):
    """Checked before the benchmark runs or the figure is drawn: one line, exit 2, nothing made."""
    (tmp_path / "afile").write_text("x")
    args = [a.format(tmp=tmp_path, file=tmp_path / "afile") for a in args]
    assert_one_line_error(cli.invoke(app, args), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--encodings", "clasic"], "unknown encoding or group 'clasic'; did you mean classic?"),
        (["--seeds", "0,,1"], "--seeds: an empty item in '0,,1'"),  # a seed left out, not a sweep of two
        (["--seeds", str(2**63)], "--seeds must be ≤"),
        (["--eval-lens", "256,,1k"], "--eval-lens: an empty item"),
        (["--tasks", "perplexity,"], "--tasks: an empty item in 'perplexity,'"),  # the same rule as for numbers
        (["--encodings", "rope,,alibi"], "--encodings: an empty item"),
        (["--train-tasks", ","], "--train-tasks names no task"),  # not the default task file, silently
        (["--train-tasks", "passkey,passkey"], "--train-tasks: passkey is given twice"),
        (["--tasks", "qa1-compact,QA1-compact"], "--tasks: qa1-compact is given twice"),
        (["--encodings", "rope,alibi,rope"], "--encodings: rope is given twice"),
    ],
)
def test_sweep_lists_refused_in_one_line(tmp_path, args, needle):
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, ["sweep", "--dry-run", "--out", str(out), *args]), needle)
    assert not out.exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--encoding", "rope", "--encoding-option", "window=64"], "no encoding asked for (rope) has this option"),
        (["--encoding", "alibi", "--encoding-option", "window=64"], "no encoding asked for (alibi)"),
        (["--encoding", "yarn", "--encoding-option", "wndow=64"], "unknown option 'wndow'"),
    ],
)
def test_a_dry_run_refuses_what_the_run_refuses(tmp_path, args, needle):
    """The plan checks the encoding options before resolution keeps only the encoding's own (which would
    leave an option no encoding has out of the plan without a word)."""
    out = tmp_path / "out"
    assert_one_line_error(cli.invoke(app, ["run", "--dry-run", "--out", str(out), *args]), needle)
    assert not out.exists()


def test_a_kill_between_the_weights_and_the_state_resumes_as_if_uninterrupted(tmp_path):
    """The weights file of step 6 renamed in, its progress file not yet (a kill between the two renames):
    training goes on from the step-3 state and its own weights, and ends where an uninterrupted one does."""
    from safetensors.torch import save_file

    from extrapolate.core.config import PRESETS, ModelConfig
    from extrapolate.data.batches import BatchSource
    from extrapolate.training import checkpoint as ckpt
    from extrapolate.training.train import train

    config = six_steps(ModelConfig(**PRESETS["tiny"], encoding="rope", max_len=32))
    source = BatchSource(torch.arange(5000) % 251, config.seq_len, config.batch_size, config.seed)
    full = train(config, source, torch.device("cpu"), folder=tmp_path / "a")
    train(config, source, torch.device("cpu"), folder=tmp_path / "b", stop_after=3)
    later = {name: t + 1.0 for name, t in ckpt.weights_dict(full.model).items()}  # not step 3's weights
    save_file(later, str(tmp_path / "b" / ckpt.WEIGHTS))
    resumed = train(config, source, torch.device("cpu"), folder=tmp_path / "b")
    assert resumed.summary["losses"] == full.summary["losses"]
    for name, weight in ckpt.weights_dict(full.model).items():
        assert torch.equal(weight, ckpt.weights_dict(resumed.model)[name]), name


def test_perplexity_stopped_at_one_length_keeps_the_lengths_it_finished(tmp_path, corpus, monkeypatch):
    """Interrupted at 64 tokens: 32 is logged, and the next run scores 64 only and writes what an
    uninterrupted run writes; the log goes once the cell is in the table."""
    import extrapolate.tasks.perplexity as perplexity

    original, scored = perplexity.evaluate_perplexity, []

    def stopped_at_64(model, docs, length, **kw):
        if length == 64:
            raise KeyboardInterrupt
        return original(model, docs, length, **kw)

    out = tmp_path / "stopped"
    monkeypatch.setattr(perplexity, "evaluate_perplexity", stopped_at_64)
    assert cli.invoke(app, base(corpus, out)).exit_code == 130
    assert [p.name.split("-", 1)[1] for p in (out / ".partial").iterdir()] == ["perplexity-32-rank0.json"]
    monkeypatch.setattr(perplexity, "evaluate_perplexity", original)
    add = perplexity.PerplexityResult.add  # the real scoring from here, each scored batch's length counted
    monkeypatch.setattr(
        perplexity.PerplexityResult, "add", lambda self, *a: scored.append(self.length) or add(self, *a)
    )
    assert cli.invoke(app, base(corpus, out)).exit_code == 0
    assert set(scored) == {64}
    assert not (out / ".partial").exists()
    assert cli.invoke(app, base(corpus, tmp_path / "whole")).exit_code == 0
    pd.testing.assert_frame_equal(
        stable(out / "results.csv"), stable(tmp_path / "whole" / "results.csv"), check_exact=True
    )
