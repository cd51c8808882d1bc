"""scripts/recover_samples.py: a run whose predictions were not kept gets them back by measuring its retrieval
cells again (its model trained again from scratch where it is not cached), byte for byte what the run wrote;
a row that does not come back, or a request that resolves to another run id, writes nothing."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from tests.helpers import load_script, make_corpus


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A tiny run with perplexity and passkey rows, its samples file and the cache it trained into."""
    root = tmp_path_factory.mktemp("recover")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
        corpus = make_corpus(root / "corpus", documents=8, words=1500)
        args = ["run", "--model", "tiny", "--steps", "20", "--train-len", "128", "--eval-lens", "128,256"]
        args += ["--corpus", str(corpus), "--tasks", "perplexity,passkey-word", "--out", str(root / "out")]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    (samples,) = (root / "out" / "samples").glob("*.jsonl")
    return root, samples


def without_samples(made, tmp_path) -> tuple[Path, Path]:
    """A copy of the run's folder as a run made before predictions were kept: no samples/."""
    root, samples = made
    folder = tmp_path / "folder"
    shutil.copytree(root / "out", folder)
    shutil.rmtree(folder / "samples")
    return folder, folder / "samples" / samples.name


INTERVAL = ["n", "ci_low", "ci_high", "ci_method"]


def prompt_lines(path: Path) -> list[str]:
    """A samples file's prompt lines, as written (a perplexity cell's document lines left out: a recovery of
    answers measures no perplexity)."""
    return [line for line in path.read_text().splitlines() if '"nll_sum"' not in line]


def blank_perplexity_intervals(folder: Path, shift_first_value: float = 0.0) -> pd.Series:
    """Rows as written before perplexity recorded its interval (optionally one value changed); returns which
    rows are perplexity's."""
    rows = pd.read_csv(folder / "results.csv")
    perplexity = rows["task"] == "perplexity"
    rows.loc[perplexity, INTERVAL] = None
    rows.loc[rows.index[perplexity][0], "value"] += shift_first_value
    rows.to_csv(folder / "results.csv", index=False)
    return perplexity


def test_the_samples_come_back_exactly_from_a_model_trained_again(made, tmp_path, monkeypatch, capsys):
    root, samples = made
    cache = tmp_path / "cache"  # the corpus and tokenizer as cached, the model not: it is trained again
    shutil.copytree(
        root / "cache", cache, ignore=lambda folder, names: ["models"] if folder == str(root / "cache") else []
    )
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(cache))
    folder, target = without_samples(made, tmp_path)
    load_script("recover_samples").main([str(folder)])
    assert "samples written" in capsys.readouterr().out
    assert prompt_lines(target) == prompt_lines(samples)
    assert any((cache / "models").iterdir())  # it was trained again, not found
    load_script("recover_samples").main([str(folder)])  # resumes: a run with its samples is left alone
    assert "nothing to recover" in capsys.readouterr().out


def test_a_row_that_does_not_come_back_writes_nothing(made, tmp_path, monkeypatch, capsys):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    changed_row(folder, "accuracy")  # a committed greedy value its model does not give
    load_script("recover_samples").main([str(folder)])
    out = capsys.readouterr().out
    assert "not given back, no samples written" in out and "256" in out
    assert not target.exists()


def changed_row(folder: Path, metric: str) -> tuple:
    """Change the first passkey row of `metric` at 256 to a value its model does not give; returns its cell."""
    rows = pd.read_csv(folder / "results.csv")
    changed = rows.index[(rows["kind"] == "needle") & (rows["eval_len"] == 256) & (rows["metric"] == metric)][0]
    rows.loc[changed, "value"] = 1.0 - rows.loc[changed, "value"]
    rows.to_csv(folder / "results.csv", index=False)
    return rows.loc[changed, "protocol"], 256, float(rows.loc[changed, "depth"])


def test_a_refused_run_keeps_its_measurement_and_is_decided_again_without_measuring(
    made, tmp_path, monkeypatch, capsys
):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    changed_row(folder, "accuracy")
    recover = load_script("recover_samples")
    recover.main([str(folder)])
    assert "no samples written" in capsys.readouterr().out
    assert any((folder / ".recover").rglob("results.csv"))  # its rows and answers, to read

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr("extrapolate.run.cell.run_cell", no_measuring)
    recover.main([str(folder)])
    assert "no samples written" in capsys.readouterr().out and not target.exists()


def test_replace_puts_the_measurement_in_place_of_rows_that_did_not_come_back(made, tmp_path, monkeypatch, capsys):
    root, samples = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    changed_row(folder, "accuracy")
    stale = pd.read_csv(folder / "results.csv")
    stale.loc[stale["task"] != "perplexity", "git_sha"] = "0123456"  # made at another commit
    stale.to_csv(folder / "results.csv", index=False)
    load_script("recover_samples").main([str(folder), "--replace"])
    out = capsys.readouterr().out
    assert "retrieval rows replaced by the measurement, samples written" in out and "committed" in out
    assert prompt_lines(target) == prompt_lines(samples)
    now, made_rows = pd.read_csv(folder / "results.csv"), pd.read_csv(root / "out" / "results.csv")
    assert now["value"].tolist() == made_rows["value"].tolist()  # each row in its place, the value measured
    retrieval = now["task"] != "perplexity"
    assert "0123456" not in set(now.loc[retrieval, "git_sha"].astype(str))  # the measurement's provenance
    assert set(now.loc[~retrieval, "git_sha"].astype(str)) == set(made_rows.loc[~retrieval, "git_sha"].astype(str))
    assert not (folder / ".recover").exists()  # decided


def test_only_rank_rows_that_turned_write_the_answers_without_those_cells_rank(made, tmp_path, monkeypatch, capsys):
    root, samples = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    protocol, length, depth = changed_row(folder, "rank_accuracy")
    load_script("recover_samples").main([str(folder)])
    out = capsys.readouterr().out
    assert "every greedy row given back, 1 rank rows otherwise" in out and "margins now" in out
    written = [json.loads(line) for line in prompt_lines(target)]
    original = [json.loads(line) for line in prompt_lines(samples)]
    assert len(written) == len(original)
    for mine, theirs in zip(written, original):
        turned = (mine["protocol"], mine["eval_len"], mine["depth"]) == (protocol, length, depth)
        assert mine["prediction"] == theirs["prediction"] and mine["score"] == theirs["score"]
        if turned:
            assert mine["ranked_first"] is None and mine["rank_margin"] is None
        else:
            assert mine == theirs
    assert sum((r["protocol"], r["eval_len"], r["depth"]) == (protocol, length, depth) for r in written) > 0
    assert not (folder / ".recover").exists()


def test_a_request_that_resolves_to_another_id_is_skipped(made, tmp_path, monkeypatch, capsys):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    (record_path,) = (folder / "runs").glob("*.json")
    record = json.loads(record_path.read_text())
    record["request"]["seed"] = 7  # not the request the rows were made with
    record_path.write_text(json.dumps(record))
    load_script("recover_samples").main([str(folder), "--dry-run"])
    assert "now (model, task file or default changed); skipped" in capsys.readouterr().out
    assert not target.exists()


def test_perplexity_rows_without_an_interval_get_theirs_back(made, tmp_path, monkeypatch, capsys):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    perplexity = blank_perplexity_intervals(folder)
    rows = pd.read_csv(folder / "results.csv")
    rows["ci_method"] = None  # as before any row recorded an interval: the column reads back as floats
    rows.to_csv(folder / "results.csv", index=False)
    load_script("recover_samples").main([str(folder), "--perplexity"])
    assert "intervals written" in capsys.readouterr().out and target.exists()
    again = pd.read_csv(folder / "results.csv")
    original = pd.read_csv(root / "out" / "results.csv")
    pd.testing.assert_frame_equal(again[perplexity][INTERVAL], original[perplexity][INTERVAL], check_dtype=False)
    assert (again["value"] == original["value"]).all()


def test_a_perplexity_value_back_to_the_tables_six_digits_gets_its_interval(made, tmp_path, monkeypatch, capsys):
    """A committed perplexity one unit off in its sixth significant digit is the re-measured value rounded
    across a boundary: the interval is written; two units off is another value, and none is."""
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    for units, written in ((1, True), (2.5, False)):
        folder, _ = without_samples(made, tmp_path / str(units))
        rows = pd.read_csv(folder / "results.csv")
        first = rows.index[rows["task"] == "perplexity"][0]
        unit = 10.0 ** (math.floor(math.log10(abs(rows.loc[first, "value"]))) - 5)
        perplexity = blank_perplexity_intervals(folder, shift_first_value=units * unit)
        load_script("recover_samples").main([str(folder), "--perplexity"])
        assert ("intervals written" in capsys.readouterr().out) is written
        assert bool(pd.read_csv(folder / "results.csv")["n"][perplexity].notna().all()) is written


def test_a_perplexity_value_that_does_not_come_back_gets_no_interval(made, tmp_path, monkeypatch, capsys):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, _ = without_samples(made, tmp_path)
    perplexity = blank_perplexity_intervals(folder, shift_first_value=0.5)
    load_script("recover_samples").main([str(folder), "--perplexity"])
    assert "perplexity rows not given back, no interval written" in capsys.readouterr().out
    assert pd.read_csv(folder / "results.csv")["n"][perplexity].isna().all()


def test_a_run_without_its_record_is_skipped(made, tmp_path, monkeypatch, capsys):
    root, _ = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    shutil.rmtree(folder / "runs")  # a run made before each run's record was kept
    load_script("recover_samples").main([str(folder)])
    assert "no record in runs/" in capsys.readouterr().out and not target.exists()


def test_perplexity_intervals_come_back_for_a_run_that_has_its_samples(made, tmp_path, monkeypatch, capsys):
    root, samples = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder = tmp_path / "folder"
    shutil.copytree(root / "out", folder)  # answers kept: only the perplexity is measured again
    kept = folder / "samples" / samples.name
    kept.write_text("".join(line + "\n" for line in prompt_lines(kept)))  # as before documents were kept
    perplexity = blank_perplexity_intervals(folder)
    load_script("recover_samples").main([str(folder), "--perplexity"])
    out = capsys.readouterr().out
    assert "intervals written" in out and "samples written" not in out
    assert pd.read_csv(folder / "results.csv")["n"][perplexity].notna().all()
    assert kept.read_text().count('"nll_sum"') == samples.read_text().count('"nll_sum"') > 0  # documents back


def test_a_stopped_recovery_resumes_from_its_finished_depths(made, tmp_path, monkeypatch, capsys):
    from extrapolate.tasks.depth_log import DepthLog

    root, samples = made
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(root / "cache"))
    folder, target = without_samples(made, tmp_path)
    record, measured = DepthLog.record, []

    def record_then_stop_at(stop):
        def recording(self, depth, *args, **kwargs):
            record(self, depth, *args, **kwargs)
            measured.append((self.path.name, depth))
            if len(measured) == stop:
                raise KeyboardInterrupt  # as a user's Ctrl-C, or a session's end, between two depths

        return recording

    monkeypatch.setattr(DepthLog, "record", record_then_stop_at(2))
    with pytest.raises(KeyboardInterrupt):
        load_script("recover_samples").main([str(folder)])
    assert not target.exists() and any((folder / ".recover").rglob("*.json"))  # the two depths are kept
    first = list(measured)
    monkeypatch.setattr(DepthLog, "record", record_then_stop_at(None))
    load_script("recover_samples").main([str(folder)])
    assert "samples written" in capsys.readouterr().out
    assert prompt_lines(target) == prompt_lines(samples)  # the resumed run's answers are the whole run's
    assert not set(first) & set(measured[2:])  # the finished depths were not measured again
    assert not (folder / ".recover").exists()


def test_run_options_are_the_records_request_evaluated_at_l_only():
    retrain = load_script("retrain_at_commit")
    request = {"encoding": "rope", "train_len": 256, "eval_lens": [256, 512], "tasks": ["perplexity", "passkey"]}
    request |= {"factor": None, "encoding_options": [["base", "500"]], "width": 64, "new_knob": 3, "out": "x"}
    known = {"--encoding", "--train-len", "--tasks", "--encoding-option", "--width", "--eval-lens", "--out"}
    options = retrain.run_options(request, known, Path("elsewhere"))
    assert options == [
        *("--encoding", "rope", "--train-len", "256", "--tasks", "perplexity,passkey"),
        *("--encoding-option", "base=500", "--width", "64"),  # a knob the old command lacks is left out
        *("--eval-lens", "256", "--device", "cpu", "--out", "elsewhere"),
    ]


def test_the_training_dtype_is_the_one_auto_chose_where_the_model_was_trained():
    retrain = load_script("retrain_at_commit")
    record = {"request": {"train_dtype": "auto"}, "train_config": {"dtype": "float32"}}
    assert retrain.trained_request(record)["train_dtype"] == "float32"  # an AVX2-only CPU's choice, here bf16's
    record = {"request": {"train_dtype": "bfloat16"}, "train_config": {"dtype": "bfloat16"}}
    assert retrain.trained_request(record)["train_dtype"] == "bfloat16"


def head_checkout() -> tuple[Path, str]:
    """(this checkout, its HEAD commit), for a test that runs a commit's code: skipped where the checkout's code
    is not its HEAD commit's (not a git checkout, or the package edited)."""
    here = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "extrapolate"], cwd=here, capture_output=True, text=True)
    if head.returncode != 0 or dirty.stdout.strip():
        pytest.skip("needs a git checkout whose code is its HEAD commit")
    return here, head.stdout.strip()


@pytest.mark.slow  # end to end, tens of seconds: run by .ci/run's slow step
def test_a_model_trained_again_at_its_commit_is_kept_only_with_the_records_fingerprint(tmp_path, capsys):
    """A run made by this checkout's code at HEAD, in a process of its own as the script's is (a test process's
    torch may have been set to other threads by the tests before): trained again there, its fingerprint is the
    record's; against a record it does not match, the model is removed."""
    here, head = head_checkout()
    folder, corpus = tmp_path / "folder", make_corpus(tmp_path / "corpus", documents=8, words=1500)
    args = ["--model", "tiny", "--steps", "20", "--train-len", "128", "--eval-lens", "128", "--corpus", str(corpus)]
    env = {**os.environ, "EXTRAPOLATE_CACHE": str(tmp_path / "made")}
    made = [
        sys.executable,
        "-m",
        "extrapolate",
        "run",
        *args,
        "--tasks",
        "perplexity,passkey-word",
        "--out",
        str(folder),
    ]
    subprocess.run(made, cwd=here, env=env, check=True, capture_output=True)
    (record_path,) = (folder / "runs").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["git_sha"] == head
    retrain = load_script("retrain_at_commit")
    cache, run_id = tmp_path / "cache", record_path.stem
    retrain.main([str(folder), "--runs", run_id, "--cache", str(cache)])
    assert "its fingerprint the record's" in capsys.readouterr().out
    model = cache / "models" / Path(record["model_folder"]).name
    assert (model / "complete.json").is_file()
    record["training"]["final_loss"] += 0.001  # a record of another training
    record_path.write_text(json.dumps(record))
    retrain.main([str(folder), "--runs", run_id, "--cache", str(cache)])
    assert "another model, removed" in capsys.readouterr().out and not model.exists()


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_answers_logged_at_a_commit_are_the_samples_that_commit_keeps(tmp_path, capsys):
    """answers_at_commit.py at HEAD, whose code keeps its own samples: the answers its hook writes down are, line
    for line, the samples file the run wrote (which is removed before, as if the run had not kept it)."""
    here, _ = head_checkout()
    folder, corpus = tmp_path / "folder", make_corpus(tmp_path / "corpus", documents=8, words=1500)
    cache = tmp_path / "cache"
    args = ["--model", "tiny", "--steps", "20", "--train-len", "128", "--eval-lens", "128,256", "--corpus", str(corpus)]
    made = [sys.executable, "-m", "extrapolate", "run", *args, "--tasks", "passkey-word", "--out", str(folder)]
    subprocess.run(made, cwd=here, env={**os.environ, "EXTRAPOLATE_CACHE": str(cache)}, check=True, capture_output=True)
    (samples,) = (folder / "samples").glob("*.jsonl")
    kept = sorted(samples.read_text().splitlines())
    samples.unlink()
    answers = load_script("answers_at_commit")
    answers.main([str(folder), "--runs", samples.stem, "--cache", str(cache)])
    assert "samples written" in capsys.readouterr().out
    assert sorted(samples.read_text().splitlines()) == kept
    assert len(kept) == 2 * 5 * 20  # two lengths, five depths, twenty prompts a depth

    results = folder / "results.csv"  # a committed row the command does not give back: nothing is written
    table = pd.read_csv(results)
    table.loc[table["metric"] == "accuracy", "value"] += 0.01  # no count of ten prompts gives it
    table.to_csv(results, index=False)
    samples.unlink()
    answers.main([str(folder), "--runs", samples.stem, "--cache", str(cache)])
    assert "rows not given back, nothing written" in capsys.readouterr().out and not samples.exists()
