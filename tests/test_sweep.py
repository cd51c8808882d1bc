"""Sweep: base models trained once and shared, finished cells skipped, resumed table equals a full run's;
report regenerated from the table alone; seed aggregation."""

import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.report.table import aggregate
from extrapolate.run import cell as cell_module

from .helpers import make_corpus, tiny_options

cli = CliRunner()
VOLATILE = ["created_at"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def sweep_args(corpus, out, encodings, seeds="0"):
    return [
        "sweep",
        "--encodings",
        encodings,
        "--seeds",
        seeds,
        *tiny_options(batch_size=2, eval_len=64, eval_tokens=128),
        "--tasks",
        "perplexity",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]


def stable(table):
    return table.drop(columns=VOLATILE).sort_values(["run_id", "eval_len", "metric"]).reset_index(drop=True)


def test_sweep_trains_each_base_model_once_and_resumes(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus")
    encodings = "sinusoidal,alibi,rope,pi,ntk,yarn"
    result = cli.invoke(app, sweep_args(corpus, tmp_path / "full", encodings))
    assert result.exit_code == 0, result.output
    models = list((tmp_path / "cache" / "models").iterdir())
    assert sorted(m.name.split("-L")[0] for m in models) == ["alibi", "rope", "sinusoidal"]
    full = pd.read_csv(tmp_path / "full" / "results.csv")
    assert set(full.encoding) == set(encodings.split(","))
    assert (tmp_path / "full" / "report.md").exists() and (tmp_path / "full" / "ratio.svg").exists()

    # an interrupted sweep: only part of the cells finished, one stopped after writing its rows but before
    # removing its depth logs
    assert cli.invoke(app, sweep_args(corpus, tmp_path / "resumed", "alibi,rope")).exit_code == 0
    alibi_id = pd.read_csv(tmp_path / "resumed" / "results.csv").query("encoding == 'alibi'").run_id.iloc[0]
    left = tmp_path / "resumed" / ".partial" / f"{alibi_id}-passkey-64-rank0.json"
    left.parent.mkdir()
    left.write_text("{}")

    evaluated = []
    original = cell_module.evaluate
    monkeypatch.setattr(
        cell_module,
        "evaluate",
        lambda resolved, *a, **k: evaluated.append(resolved.spec.name) or original(resolved, *a, **k),
    )
    again = cli.invoke(app, sweep_args(corpus, tmp_path / "resumed", encodings))
    assert again.exit_code == 0, again.output
    assert sorted(evaluated) == ["ntk", "pi", "sinusoidal", "yarn"]  # finished cells are not recomputed
    # and the user is told, with the cell's place in the sweep
    assert f"cell 1/{len(encodings.split(','))} alibi · seed 0 · in the table already: skipped" in again.output
    assert not left.parent.exists()  # its depth logs are done with
    resumed = pd.read_csv(tmp_path / "resumed" / "results.csv")
    pd.testing.assert_frame_equal(stable(resumed), stable(full))


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_a_sweep_asked_for_more_lengths_runs_only_what_is_missing(tmp_path, monkeypatch):
    """Cells finished at some lengths are not finished at new ones: retrieval runs the new lengths only;
    with perplexity the whole cell runs again (every length scores the same tokens)."""
    corpus = make_corpus(tmp_path / "corpus")

    def args(tasks, lengths):
        base = sweep_args(corpus, tmp_path / tasks, "rope,yarn")
        at = base.index("--eval-len")
        base[at : at + 2] = ["--eval-lens", lengths, "--factor", "2"]
        base[base.index("--train-len") + 1] = "128"  # room for a retrieval prompt
        base[base.index("--eval-tokens") + 1] = "512"
        base[base.index("--tasks") + 1] = "retrieval" if tasks == "passkey" else tasks
        return base + (["--passkey-task", "passkey-word"] if tasks == "passkey" else [])

    from extrapolate.tasks.files import load_task

    evaluated = []
    original = cell_module.evaluate
    monkeypatch.setattr(
        cell_module,
        "evaluate",
        lambda resolved, *a, **k: evaluated.append(resolved.lengths) or original(resolved, *a, **k),
    )
    for tasks in ("passkey", "perplexity"):
        assert cli.invoke(app, args(tasks, "128,256")).exit_code == 0
        if tasks == "passkey":
            stopped_part_way(tmp_path / tasks, 384)
        evaluated.clear()
        result = cli.invoke(app, args(tasks, "128,256,384"))
        assert result.exit_code == 0, result.output
        assert evaluated == ([(384,), (384,)] if tasks == "passkey" else [(128, 256, 384)] * 2)
        if tasks == "passkey":  # a line per depth as it finishes; the first one read back from its log
            depths = load_task("passkey-word").depths
            reported = [line.strip() for line in result.output.splitlines() if line.strip().startswith("depth ")]
            assert [line.split(":")[0] for line in reported] == [f"depth {d:g}" for d in depths] * 2
            first = f"depth {depths[0]:g}: greedy 100% · logged earlier · 1/{len(depths)} depths"
            assert sum(line == first for line in reported) == 2
        table = pd.read_csv(tmp_path / tasks / "results.csv")
        assert sorted(table.groupby("encoding")["eval_len"].unique().map(sorted).tolist()) == [[128, 256, 384]] * 2
        assert not table.duplicated(["run_id", "eval_len", "task", "metric", "depth", "seed"]).any()
        evaluated.clear()
        assert cli.invoke(app, args(tasks, "128,256,384")).exit_code == 0 and evaluated == []  # now finished
        assert not (tmp_path / tasks / ".partial").exists()  # a written cell's depth logs are removed
    table = pd.read_csv(tmp_path / "passkey" / "results.csv")
    resumed = table[(table.eval_len == 384) & (table.depth == load_task("passkey-word").depths[0])]
    # depth 0 at 384 came from the logs: every key found, none ranked first
    assert sorted(zip(resumed.metric, resumed.value)) == [("accuracy", 1.0)] * 2 + [("rank_accuracy", 0.0)] * 2


def stopped_part_way(folder, length):
    """Depth logs as a retrieval cell at `length` leaves them when stopped after its first depth, with a
    count no tiny model gives (every trial correct, none ranked first)."""
    from extrapolate.tasks.depth_log import DepthLog
    from extrapolate.tasks.files import load_task

    table = pd.read_csv(folder / "results.csv")
    trials = load_task("passkey-word").trials
    for run_id, protocol in table[["run_id", "protocol"]].drop_duplicates().itertuples(index=False):
        DepthLog.for_cell(folder, run_id, protocol, length, 0, 1).record(0, float(trials), 0.0)


def test_dry_run_plans_without_training(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    result = cli.invoke(app, sweep_args(corpus, tmp_path / "plan", "t5,rope,yarn", "0,1") + ["--dry-run"])
    assert result.exit_code == 0, result.output
    assert "4 model(s) to train" in result.output and "6 evaluation cell(s)" in result.output
    assert not (tmp_path / "cache" / "models").exists()
    # the plan comes first, then what is timed for the estimate and how long the timing took
    plan, timing, timed = (result.output.index(text) for text in ("plan →", "timing 3 training steps", "timed in"))
    assert plan < timing < timed < result.output.index("model(s) to train")


def test_a_long_dry_run_times_a_share_of_the_batch(tmp_path, monkeypatch):
    """At long L a full step takes minutes on a CPU: the estimate times a few rows and scales to the batch."""
    from extrapolate.run import estimate

    seen = []
    real = estimate.BatchSource
    monkeypatch.setattr(estimate, "TIMED_TOKENS", 32)  # one row of 32 tokens
    monkeypatch.setattr(
        estimate,
        "BatchSource",
        lambda stream, seq_len, rows, seed: seen.append(rows) or real(stream, seq_len, rows, seed),
    )
    corpus = make_corpus(tmp_path / "corpus")
    result = cli.invoke(app, sweep_args(corpus, tmp_path / "plan", "rope", "0") + ["--dry-run"])
    assert result.exit_code == 0, result.output
    assert seen == [1] and "timing 3 training steps of 1 × 32 tokens" in result.output


def test_report_regenerates_from_the_table(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    assert cli.invoke(app, sweep_args(corpus, tmp_path / "s", "alibi,rope,pi", "0,1")).exit_code == 0
    (tmp_path / "s" / "report.md").unlink()
    result = cli.invoke(app, ["report", str(tmp_path / "s")])
    assert result.exit_code == 0
    text = (tmp_path / "s" / "report.md").read_text()
    assert "± " in text and "alibi" in text and "Effective length" in text
    for name in ("perplexity", "ratio", "positions", "frequencies"):
        assert (tmp_path / "s" / f"{name}.png").exists() and (tmp_path / "s" / f"{name}.svg").exists()
    assert cli.invoke(app, ["report", str(tmp_path / "nothing")]).exit_code == 2


def test_report_of_a_table_without_later_columns_names_them_unrecorded(tmp_path):
    """A table written before `protocol`, `git_sha` and the other provenance columns existed (or with a cell
    blanked by hand) still reports: empty text cells are "unrecorded", never a NaN sorted among strings. A
    retrieval row without a depth is refused in one line."""
    row = dict(
        run_id="r",
        encoding="rope",
        factor=1.0,
        train_len=8,
        eval_len=16,
        task="perplexity",
        metric="ppl",
        value=3.0,
        depth=None,
        seed=0,
        n_tokens=100,
        status="ok",
        model="tiny",
        params=10,
        created_at="2026-01-01T00:00:00Z",
    )
    folder = tmp_path / "old"
    folder.mkdir()
    rows = [row, {**row, "eval_len": 8, "value": 2.0}, {**row, "encoding": "alibi", "run_id": "a"}]
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    result = cli.invoke(app, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    assert "protocols: `unrecorded`" in (folder / "report.md").read_text()
    pd.DataFrame([*rows, {**row, "task": "passkey", "metric": "accuracy"}]).to_csv(folder / "results.csv", index=False)
    result = cli.invoke(app, ["report", str(folder)])
    assert result.exit_code == 2 and "a kind 'needle' row has no depth" in result.output.strip().splitlines()[-1]


def test_report_setup_names_every_commit_device_and_model_of_a_grown_table():
    """A table grown by calls at two commits on two devices: the setup lines name both, not the first row's."""
    from extrapolate.report.setup import setup_lines

    row = dict(
        model="small",
        params=1000,
        train_len=256,
        corpus="shakespeare",
        seed=0,
        protocol="p",
        encoding="rope",
        kernel="sdpa",
        device="cpu",
        dtype="float32",
        package_version="0.1.0",
        git_sha="aaaa",
    )
    table = pd.DataFrame([row, {**row, "git_sha": "bbbb", "device": "cuda"}, {**row, "model": "tiny", "params": 10}])
    text = "\n".join(setup_lines(table))
    assert "(commit aaaa, bbbb)" in text and "device `cpu`, `cuda`" in text
    assert "`small` (1,000 parameters), `tiny` (10 parameters)" in text
    assert "- machine: unrecorded" in text  # a table written before rows named their machine
    machines = table.assign(
        machine=["AMD EPYC (avx2), 2 threads", "Xeon (amx_bf16), 2 threads", "AMD EPYC (avx2), 2 threads"]
    )
    assert "- machine: `AMD EPYC (avx2), 2 threads`, `Xeon (amx_bf16), 2 threads`" in "\n".join(setup_lines(machines))


def test_aggregate_mean_and_interval():
    rows = [
        dict(
            encoding="a",
            train_len=8,
            eval_len=16,
            task="perplexity",
            metric="ppl",
            depth=None,
            value=v,
            status="ok",
            seed=s,
        )
        for s, v in enumerate([10.0, 12.0, 14.0])
    ]
    rows.append(
        dict(
            encoding="b",
            train_len=8,
            eval_len=16,
            task="perplexity",
            metric="ppl",
            depth=None,
            value=float("nan"),
            status="unsupported",
            seed=0,
        )
    )
    agg = aggregate(pd.DataFrame(rows))
    a = agg[agg.encoding == "a"].iloc[0]
    assert a["mean"] == 12.0 and a["n_seeds"] == 3
    assert math.isclose(a["ci95"], 4.302653 * 2.0 / math.sqrt(3), rel_tol=1e-6)  # t(0.975, 2 df) = 4.302653
    assert agg[agg.encoding == "b"].iloc[0]["status"] == "unsupported"


def test_tables_follow_the_registry_order_of_encodings():
    """Reports list encodings in the registry's order whatever order the cells ran in; unknown names last."""
    from extrapolate.encodings import sweep_order

    names = ["zz-custom", "t5", "alibi", "rope", "sinusoidal", "learned", "aa-custom"]
    rows = [
        dict(
            encoding=e,
            train_len=8,
            eval_len=n,
            task="perplexity",
            metric="ppl",
            depth=None,
            value=1.0,
            status="ok",
            seed=0,
        )
        for e in names
        for n in (32, 16)
    ]
    order = list(dict.fromkeys(aggregate(pd.DataFrame(rows))["encoding"]))
    known = [e for e in sweep_order() if e in names]
    assert order == known + ["aa-custom", "zz-custom"]
    assert known.index("sinusoidal") < known.index("t5") < known.index("alibi") < known.index("rope")


def test_estimate_of_a_pretrained_sweep_times_evaluation_only(monkeypatch):
    """A pretrained model trains nothing: the dry-run estimate is the evaluation at its measured forward rate
    (it used to build a training config from the model name and fail with 'unknown model')."""
    from pathlib import Path
    from types import SimpleNamespace

    import torch

    from extrapolate.core.config import ModelConfig
    from extrapolate.model import TransformerLM
    from extrapolate.run.estimate import estimate_seconds

    model = TransformerLM(ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=2, max_len=64))
    prepared = SimpleNamespace(
        heldout=[torch.zeros(300, dtype=torch.int64)] * 2,
        lengths=[64, 128],
        device=torch.device("cpu"),
        checkpoint=SimpleNamespace(model=model),
        passkey_builder=None,
        tokenizer=SimpleNamespace(bos_id=None),
    )
    request = SimpleNamespace(
        tasks=("perplexity",),
        model="some-checkpoint",
        protocol="full",
        stride=256,
        bos="never",
        dtype="float32",
        longppl_short=4096,
        longppl_window=1024,
        evaluator=None,
    )
    cell = SimpleNamespace(
        request=request, is_pretrained=True, budget=256, bucket_width=16, model_folder=Path("some-checkpoint")
    )
    one = estimate_seconds([cell], {cell.model_folder: True}, prepared)
    assert 0 < one < float("inf")  # measured on the real model
    from extrapolate.run import estimate

    # no timing noise
    cost = estimate.timed_cost_model(model, torch.device("cpu"), "float32")
    monkeypatch.setattr(estimate, "timed_cost_model", lambda *args: cost)
    one = estimate_seconds([cell], {cell.model_folder: True}, prepared)
    assert estimate_seconds([cell] * 3, {cell.model_folder: True}, prepared) == pytest.approx(
        3 * one
    )  # every cell counts


def test_rows_record_the_commit_the_process_started_from(monkeypatch):
    """A long run records the code it ran: a commit made while it runs does not change its git_sha, which
    the command reads when it starts."""
    import subprocess

    from typer.testing import CliRunner

    from extrapolate.cli.app import app
    from extrapolate.core import source

    source.git_sha.cache_clear()
    CliRunner().invoke(app, ["tasks", "--json"])
    assert source.git_sha.cache_info().currsize == 1  # any command reads it when it starts
    started = source.git_sha()
    edits = ""

    def git(args, **kwargs):  # a commit made meanwhile, and then the package edited
        return subprocess.CompletedProcess(args, 0, "ffffffffffff\n" if "rev-parse" in args else edits, "")

    monkeypatch.setattr(subprocess, "run", git)
    assert source.git_sha() == started
    source.git_sha.cache_clear()
    assert source.git_sha() == "ffffffffffff"
    source.git_sha.cache_clear()
    edits = " M extrapolate/model.py\n"  # code that is not the commit's: the commit alone does not name it
    assert source.git_sha() == "ffffffffffff+dirty"
    source.git_sha.cache_clear()


def test_each_write_records_its_own_time():
    """Rows written an hour apart by one process carry their own created_at (only the commit is read once)."""
    from datetime import datetime
    from unittest import mock

    from extrapolate.report import table

    with mock.patch.object(table, "datetime") as clock:
        clock.now.return_value = datetime(2026, 1, 1, 10, 0, 0)
        first = table.provenance()["created_at"]
        clock.now.return_value = datetime(2026, 1, 1, 11, 0, 0)
        second = table.provenance()["created_at"]
    assert (first, second) == ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z")


def test_a_task_file_changed_in_place_runs_its_cells_again(tmp_path, monkeypatch):
    """A run id holds a task file by its path; a file changed there (more prompts, another version) keeps the id,
    so the sweep must see from the rows' protocol (the task's identity) that the cell is not done."""
    from extrapolate.tasks.files import TASKS_DIR

    corpus = make_corpus(tmp_path / "corpus", documents=8, words=1500)
    task = tmp_path / "mine.toml"
    task.write_text((TASKS_DIR / "passkey-word.toml").read_text().replace("trials = 20", "trials = 2"))
    args = sweep_args(corpus, tmp_path / "out", "rope")
    args[args.index("--tasks") + 1] = str(task)
    args[args.index("--train-len") + 1], args[args.index("--eval-len") + 1] = "128", "128"
    args += ["--passkey-fraction", "0"]  # no training prompts: the model, and so the run id, ignore the file
    assert cli.invoke(app, args).exit_code == 0
    before = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(before["n"]) == {2}
    unchanged = cli.invoke(app, args)
    assert "in the table already: skipped" in " ".join(unchanged.output.split())
    task.write_text(task.read_text().replace("trials = 2", "trials = 3"))
    refused = cli.invoke(app, args)  # rows measured another way are never replaced in silence
    assert refused.exit_code == 2 and "measured another way (passkey-word's protocol" in refused.output
    assert "--overwrite" in refused.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / "results.csv"), before)
    again = cli.invoke(app, [*args, "--overwrite"])
    assert again.exit_code == 0 and "skipped" not in again.output, again.output
    after = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(after["run_id"]) == set(before["run_id"]) and set(after["n"]) == {3}
    assert set(after["protocol"]) != set(before["protocol"])
