"""The everyday run: a results folder is one experiment (nothing mixed or replaced in silence), `--config` of a run
record writes where that run did, every skipped length says why (log, summary, plan), a sweep's log counts its
cells with the time left, and the closing panel's numbers are the rows'."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.cli.closing import number
from extrapolate.core.errors import UserError

from .helpers import make_corpus, tiny_options

cli = CliRunner()


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """A local corpus, and a model cache of the test's own (what a test trains is never another's)."""
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    return make_corpus(tmp_path / "corpus", documents=6, words=900)


def run_args(corpus, out, *extra, encoding="rope"):
    return [
        "run",
        "--encoding",
        encoding,
        *tiny_options(batch_size=2, eval_len=64, eval_tokens=128),
        *("--tasks", "perplexity", "--corpus", str(corpus), "--out", str(out)),
        *extra,
    ]


def test_a_folder_refuses_another_setting_and_a_cell_measured_another_way(corpus, tmp_path):
    out = tmp_path / "out"
    assert cli.invoke(app, run_args(corpus, out)).exit_code == 0
    before = (out / "results.csv").read_text()

    # the same cell on one held-out document: a replacement of rows measured on all of them
    same_cell = cli.invoke(app, run_args(corpus, out, "--eval-docs", "1"))
    assert same_cell.exit_code == 2
    assert "measured another way (eval_docs 1 where its rows have all)" in " ".join(same_cell.output.split())
    # another cell (ALiBi) on one document: another evaluation setting beside the folder's
    other_cell = cli.invoke(app, run_args(corpus, out, "--eval-docs", "1", encoding="alibi"))
    assert other_cell.exit_code == 2 and "holds another experiment (eval_docs 1" in other_cell.output
    # another tokenizer: another model's rows
    other_model = cli.invoke(app, run_args(corpus, out, "--tokenizer", "bytes", encoding="alibi"))
    assert other_model.exit_code == 2 and "holds another experiment (tokenizer bytes" in other_model.output
    assert (out / "results.csv").read_text() == before  # every refusal before anything was written

    appended = cli.invoke(app, run_args(corpus, out, "--eval-docs", "1", "--append", encoding="alibi"))
    assert appended.exit_code == 0 and "--append: adding rows with eval_docs 1 beside rows with all" in appended.output
    replaced = cli.invoke(app, run_args(corpus, out, "--eval-docs", "1", "--overwrite"))
    assert replaced.exit_code == 0 and "--overwrite: replacing rows measured with eval_docs all by 1" in replaced.output
    table = pd.read_csv(out / "results.csv")
    assert set(table[table["metric"] == "ppl"]["n"]) == {1}  # both cells now on one document, as said


def test_config_of_a_run_record_writes_where_that_run_did(corpus, tmp_path, monkeypatch):
    out = tmp_path / "first"
    assert cli.invoke(app, run_args(corpus, out)).exit_code == 0
    record = json.loads((out / "run.json").read_text())
    assert "out" not in record["request"] and record["run_id"] in set(pd.read_csv(out / "results.csv")["run_id"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # run again from another folder: the record's folder, not results/<encoding>-L<L>
    again = cli.invoke(app, ["run", "--config", str(out / "run.json")])
    assert again.exit_code == 0, again.output
    assert not (elsewhere / "results").exists()
    said = " ".join(again.output.split())
    assert "already: measured again at " in said and "the rows it measures replaced, the others kept" in said
    assert str(out) in " ".join(again.output.split())


def test_a_length_past_a_learned_table_says_why_in_the_log_the_summary_and_the_plan(corpus, tmp_path):
    out = tmp_path / "learned"
    args = run_args(corpus, out, encoding="learned")
    why = "64 > 32 rows of the learned table: --learned-policy clamp to extend"
    plan = cli.invoke(app, [*args, "--dry-run"])
    assert plan.exit_code == 0 and f"learned · seed 0 at 64: will be recorded unsupported: {why}" in plan.output
    result = cli.invoke(app, args)
    assert result.exit_code == 0 and f"learned at 64 tokens (perplexity): unsupported, {why}" in result.output
    table = pd.read_csv(out / "results.csv")
    assert set(table[table["eval_len"] == 64]["reason"]) == {why}
    assert set(table[table["eval_len"] == 32]["reason"].isna()) == {True}
    summary = (out / "summary.md").read_text()
    assert "[unsupported](#not-measured)" in summary and "## Not measured" in summary
    assert f"| learned | 0 | perplexity | 64 | unsupported | {why} |" in summary  # seed 0


def test_lengths_wholly_below_the_training_length_are_warned_at_planning(corpus, tmp_path):
    args = ["run", "--model", "tiny", "--steps", "4", "--train-len", "32", "--eval-lens", "16,24"]
    plan = cli.invoke(app, [*args, "--tasks", "perplexity", "--corpus", str(corpus), "--dry-run"])
    assert plan.exit_code == 0 and "every evaluation length (16, 24) is below L = 32" in plan.output


def test_a_piped_sweep_counts_its_cells_with_the_time_left_and_closes_with_the_rows_numbers(corpus, tmp_path):
    out = tmp_path / "sweep"
    args = [
        "sweep",
        *("--encodings", "rope,alibi", "--seeds", "0"),
        *tiny_options(batch_size=2, eval_len=64, eval_tokens=128),
        *("--tasks", "perplexity", "--corpus", str(corpus), "--out", str(out)),
    ]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    cells = [line for line in result.output.splitlines() if line.startswith("cell ")]
    assert [line.split(" · ")[0] for line in cells] == ["cell 1/2 alibi", "cell 2/2 rope"]
    assert all("left in the sweep" in line for line in cells)  # the first from timed steps, the second measured
    # the closing panel: tab-separated off a terminal, its numbers the rows'
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("encoding\tseeds\tppl at L"))
    panel = {line.split("\t")[0]: line.split("\t") for line in lines[header + 1 : header + 3]}
    table = pd.read_csv(out / "results.csv")
    for encoding, cells in panel.items():
        rows = table[(table["encoding"] == encoding) & (table["metric"] == "ppl")].set_index("eval_len")["value"]
        assert not math.isnan(rows[64])
        assert (cells[2], cells[3]) == (number(rows[32]), number(rows[64]))  # at L and at the longest length
    assert f"wrote {out}/: report.md, results.csv" in " ".join(result.output.split())


def test_a_sweep_without_a_training_length_writes_the_folder_the_docs_name(corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["sweep", "--encodings", "rope", "--model", "tiny", "--eval-lens", "256", "--tasks", "perplexity"]
    plan = cli.invoke(app, [*args, "--corpus", str(corpus), "--dry-run"])
    assert plan.exit_code == 0 and "plan → results/sweep-L256" in plan.output


@pytest.mark.parametrize(
    "flag, value, said",
    [
        ("--eval-lens", "10Q", "--eval-lens: '10Q' is not a length (a whole number of tokens, e.g. 4096, 4k or 1M"),
        ("--eval-len", "10Q", "'10Q' is not a length (a whole number of tokens, e.g. 4096, 4k or 1M"),
        ("--encoding", "yarnn", "unknown encoding 'yarnn'; did you mean yarn?"),
    ],
)
def test_a_mistake_gets_one_line_that_says_what_would_do(flag, value, said):
    result = cli.invoke(app, ["run", flag, value, "--dry-run"])
    assert result.exit_code == 2 and said in " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) == 1


def test_lengths_take_m_for_1024_squared_and_the_help_says_k_is_1024():
    from extrapolate.core.numbers import parse_int_list

    assert parse_int_list("1M,2k,512", "--eval-lens", lengths=True) == [1024**2, 2048, 512]
    help_text = " ".join(cli.invoke(app, ["run", "--help"], terminal_width=200).output.split())
    assert "k = 1024 tokens" in help_text


def test_the_not_measured_section_lists_each_reason_once_with_its_seeds_and_lengths():
    from extrapolate.report.skipped import UNRECORDED_REASON, not_measured_section

    def row(seed, length, status, reason=None):
        return {
            "encoding": "learned",
            "seed": seed,
            "task": "perplexity",
            "eval_len": length,
            "status": status,
            "reason": reason,
        }

    why = "512 > 256 rows of the learned table: --learned-policy clamp to extend"
    table = pd.DataFrame(
        [row(s, n, "unsupported", why) for s in (0, 1) for n in (512, 1024)]
        + [row(2, 512, "unsupported"), row(0, 256, "ok")]
    )
    assert not_measured_section(table) == [
        "## Not measured",
        "",
        "| encoding | seeds | task | lengths | status | why |",
        "|---|---|---|---|---|---|",
        f"| learned | 0, 1 | perplexity | 512, 1024 | unsupported | {why} |",
        f"| learned | 2 | perplexity | 512 | unsupported | {UNRECORDED_REASON} |",
        "",
    ]
    assert not_measured_section(table[table["status"] == "ok"]) == []


def test_a_checkpoint_as_released_and_stretched_with_yarn_is_one_command_and_one_table(corpus, tmp_path):
    """`sweep --encodings released,yarn --factor 4` on a checkpoint: its own RoPE (no factor) beside YaRN at
    s = 4, one folder, one table; `released` on a model trained here is refused."""
    pytest.importorskip("transformers")
    import torch

    from extrapolate.core.config import ModelConfig
    from extrapolate.data.corpora import load_corpus
    from extrapolate.data.tokenizers import load_tokenizer
    from extrapolate.model import TransformerLM
    from extrapolate.run.export import export_hf

    tokenizer = load_tokenizer("bpe:300", load_corpus(str(corpus)))
    torch.manual_seed(0)
    config = ModelConfig(
        d_model=32, n_layers=2, n_heads=2, vocab_size=tokenizer.vocab_size, encoding="rope", max_len=32
    )
    export_hf(TransformerLM(config), tmp_path / "llama", tokenizer)
    out = tmp_path / "pair"
    args = ["sweep", "--model", str(tmp_path / "llama"), "--encodings", "released,yarn", "--factor", "4"]
    args += ["--tasks", "perplexity", "--eval-lens", "32,128", "--eval-tokens", "128", "--corpus", str(corpus)]
    result = cli.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    factors = table.drop_duplicates("encoding").set_index("encoding")["factor"]
    assert factors.to_dict() == {"rope": 1.0, "yarn": 4.0}
    trained_here = cli.invoke(app, ["sweep", "--encodings", "released", "--model", "tiny", "--dry-run"])
    assert trained_here.exit_code == 2 and "a pretrained model's own encoding" in trained_here.output


def test_a_slurm_dry_run_without_submitit_says_so_before_its_plan(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "submitit", None)  # an import of it raises ImportError
    result = cli.invoke(app, ["sweep", "--encodings", "rope", "--executor", "slurm", "--dry-run"])
    assert result.exit_code == 2 and "--executor slurm needs submitit" in result.output
    assert "plan →" not in result.output


def test_a_slow_preparation_says_what_it_builds_and_a_quick_one_says_nothing(monkeypatch):
    """On a fresh cache the tokenizer and the encoded corpus take tens of seconds before any other line: the
    user is told what is built; a quick preparation (or a mistake refused at once) adds no line."""
    import threading
    from types import SimpleNamespace

    from extrapolate.run import prepare as prepare_module

    resolved = SimpleNamespace(request=SimpleNamespace(corpus="shakespeare", tokenizer="bpe"), checkpoint=None)
    said, told = [], threading.Event()
    monkeypatch.setattr(prepare_module, "SAY_AFTER", 0.0)
    with prepare_module.preparing(resolved, lambda text: (said.append(text), told.set())):
        assert told.wait(60)  # the note comes while the work goes on (a bound against a hung timer only)
    assert said == ["preparing corpus shakespeare and tokenizer bpe (built once, then read from the cache)"]
    monkeypatch.setattr(prepare_module, "SAY_AFTER", 3600.0)
    with prepare_module.preparing(resolved, said.append):
        pass
    assert len(said) == 1


@pytest.mark.parametrize(
    "tasks,model,file",
    [
        (("passkey",), "tiny", "passkey"),  # the file of that name on a model trained here too
        (("retrieval",), "tiny", "passkey-word"),  # the run's retrieval task: a model trained here's default
        (("perplexity", "ruler-multikey"), "tiny", "ruler-multikey"),
        (("perplexity", "vt-compact"), "tiny", "vt-compact"),
    ],
)
def test_a_task_name_is_one_task_on_every_model(tasks, model, file):
    from extrapolate.run.request import RunRequest
    from extrapolate.run.resolution import resolve_request
    from extrapolate.tasks.files import load_task
    from extrapolate.tasks.kinds import TASK_KINDS

    request = resolve_request(RunRequest(model=model, tasks=tasks, eval_lens=(256,)))
    assert request.passkey_task == file
    kind = load_task(file).kind
    assert kind in request.tasks and all(t in TASK_KINDS for t in request.tasks)
    assert resolve_request(request) == request  # a resolved request, resolved again, asks for the same


def test_a_task_file_and_another_retrieval_task_are_refused_in_one_line(corpus, tmp_path):
    args = run_args(corpus, tmp_path / "out", "--passkey-task", "passkey-word")
    args[args.index("--tasks") + 1] = "perplexity,passkey"
    result = cli.invoke(app, args)
    assert result.exit_code == 2
    assert (
        result.output.strip()
        .splitlines()[-1]
        .endswith("one retrieval task per run, got passkey and --passkey-task passkey-word")
    )


@pytest.mark.parametrize("kind,passkey_task", [("babilong", None), ("ruler", "qa1")])
def test_a_kind_named_without_a_file_of_its_own_is_refused_in_one_line(kind, passkey_task):
    """`--tasks babilong` would otherwise measure the run's retrieval task, another kind's file, as if asked."""
    from extrapolate.run.request import RunRequest
    from extrapolate.run.resolution import resolve_request

    with pytest.raises(UserError, match=f"--tasks {kind} names a kind of task, not a task"):
        resolve_request(RunRequest(tasks=("perplexity", kind), passkey_task=passkey_task, eval_lens=(512,)))
    if passkey_task is not None:  # the record's form: the kind with a file of that kind
        resolved = resolve_request(RunRequest(tasks=("babilong",), passkey_task=passkey_task, eval_lens=(512,)))
        assert resolved.tasks == ("babilong",) and resolved.passkey_task == "qa1"


def test_the_task_column_holds_the_task_files_name_and_the_kind_its_own_column(corpus, tmp_path):
    args = run_args(corpus, tmp_path / "out", "--eval-lens", "256")
    args[args.index("--tasks") + 1] = "perplexity,ruler-multikey"
    args.remove("--eval-len"), args.remove("64")
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert dict(zip(table["task"], table["kind"])) == {"perplexity": "perplexity", "ruler-multikey": "needle"}
    assert table.loc[table["task"] == "ruler-multikey", "protocol"].str.startswith("ruler-multikey-v1-").all()
    (samples,) = (tmp_path / "out" / "samples").glob("*.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert {line["task"] for line in lines} == {"perplexity", "ruler-multikey"}


def test_a_table_and_a_record_written_before_the_kind_column_read_as_written_now(tmp_path):
    from extrapolate.cli.config import from_record
    from extrapolate.report.samples import named_task
    from extrapolate.report.table import load_results

    row = {"run_id": "0123456789", "encoding": "rope", "train_len": 128, "eval_len": 128, "seed": 0, "value": 0.5}
    row |= {"status": "ok", "created_at": "2026-01-01T00:00:00Z", "metric": "accuracy", "depth": 0.5}
    row |= {"factor": 1.0, "n_tokens": 128, "params": 1000}
    rows = [
        {**row, "task": "passkey", "protocol": "ruler-multikey-v1-compact-f9950bad"},
        {**row, "task": "passkey", "protocol": "passkey-v2-compact-26b966f8", "eval_len": 256},
        {**row, "task": "ruler", "protocol": "vt-v3-ruler-b421d687+chat", "metric": "score", "depth": None},
        {**row, "task": "perplexity", "protocol": "full-window", "metric": "ppl", "depth": None, "value": 9.0},
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    table = load_results(tmp_path)
    named = dict(zip(table["protocol"], zip(table["task"], table["kind"])))
    assert named == {
        "ruler-multikey-v1-compact-f9950bad": ("ruler-multikey", "needle"),
        "passkey-v2-compact-26b966f8": ("passkey", "needle"),
        "vt-v3-ruler-b421d687+chat": ("vt", "ruler"),
        "full-window": ("perplexity", "perplexity"),
    }
    assert named_task({"task": "passkey", "protocol": "passkey-word-v2-compact-4e10e294"})["task"] == "passkey-word"
    # a record's "passkey" named the retrieval kind: given back, it asks for the record's own task file
    values = from_record({"tasks": ["perplexity", "passkey"], "passkey_task": "passkey-word"})
    assert values["tasks"] == ["perplexity", "retrieval"] and values["passkey_task"] == "passkey-word"


def test_a_second_task_of_one_kind_is_another_task_not_another_experiment(tmp_path, monkeypatch):
    """qa2 beside qa1 in one folder (as scripts/ruler_smollm2.sh adds task after task) needs no --append; the
    same task from a changed file is still another experiment."""
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    tiny = ["--model", "tiny", "--steps", "2", "--batch-size", "2", "--train-len", "32", "--eval-tokens", "128"]

    def run(task) -> object:
        return cli.invoke(
            app, ["run", "--encoding", "rope", *tiny, "--eval-lens", "512", "--tasks", str(task), "--out", str(out)]
        )

    for task in ("qa1-compact", "qa2-compact"):
        result = run(task)
        assert result.exit_code == 0, result.output
    assert set(pd.read_csv(out / "results.csv")["task"]) == {"qa1-compact", "qa2-compact"}
    changed = tmp_path / "qa1-compact.toml"
    source = (Path(__file__).parent.parent / "tasks" / "babilong" / "qa1-compact.toml").read_text()
    changed.write_text(source.replace("samples = 100", "samples = 3"))
    refused = run(changed)
    assert refused.exit_code == 2 and "holds another experiment (qa1-compact's protocol" in refused.output


@pytest.mark.parametrize("fraction", [None, "0"])
def test_a_retrieval_measured_on_a_model_that_never_saw_its_prompts_is_said(corpus, tmp_path, fraction):
    """At L = 32 no passkey prompt fits a training row, so none is mixed in: said, unless asked for (0)."""
    args = run_args(corpus, tmp_path / "out", *(["--passkey-fraction", fraction] if fraction else []))
    args[args.index("--tasks") + 1] = "perplexity,retrieval"
    args[args.index("--eval-len")] = "--eval-lens"
    args[args.index("--eval-lens") + 1] = "128"
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert ("warning: no passkey-word prompts in the training rows" in said) == (fraction is None), said
