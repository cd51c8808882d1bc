"""Sweeps as cluster jobs: the results table equals the in-process sweep's, and submitting again submits
nothing. With submitit's local executor in every test run; against a real SLURM (scripts/slurm-single-node.sh)
in the slow checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.run import RunRequest
from extrapolate.run.cluster import SlurmOptions
from extrapolate.run.sweep import submit_job, sweep_job
from tests.helpers import make_corpus, tiny_options, wait_for

pytest.importorskip("submitit")

KEY = ["run_id", "task", "metric", "eval_len"]


def template(corpus, out) -> RunRequest:
    return RunRequest(
        model="tiny",
        steps=6,
        batch_size=4,
        train_len=32,
        eval_len=128,
        eval_tokens=256,
        corpus=str(corpus),
        tasks=["perplexity"],
        out=out,
    )


def table(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "results.csv").sort_values(KEY).reset_index(drop=True)


def same_tables(a, b) -> None:
    assert len(a) == len(b) and (a[KEY] == b[KEY]).all().all()
    assert a["value"].tolist() == pytest.approx(b["value"].tolist(), rel=1e-6)  # same seed, same device


@pytest.mark.slow  # end to end, tens of seconds: run by .ci/run's slow step
def test_a_sweep_through_submitit_equals_the_local_sweep_and_resubmits_nothing(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus")
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache-local"))
    sweep_job(template(corpus, tmp_path / "local"), "rope,pi,alibi", [0])
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache-jobs"))  # the jobs train their own models
    options = SlurmOptions(cluster="local")
    _, first = submit_job(template(corpus, tmp_path / "jobs"), "rope,pi,alibi", [0], options)
    assert len(first.submitted) == 3 and first.report_job is not None
    same_tables(table(tmp_path / "jobs"), table(tmp_path / "local"))
    assert (tmp_path / "jobs" / "report.md").exists()
    _, second = submit_job(template(corpus, tmp_path / "jobs"), "rope,pi,alibi", [0], options)
    assert second.submitted == {} and sorted(second.done) == sorted(first.submitted)


def slurm_ready() -> bool:
    if shutil.which("sinfo") is None:
        return False
    states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.split()
    return any(s.startswith(("idle", "mixed")) for s in states)


@pytest.mark.slow
@pytest.mark.skipif(not slurm_ready(), reason="no SLURM cluster here (scripts/slurm-single-node.sh makes one)")
def test_a_sweep_on_a_real_slurm_cluster_equals_the_local_sweep(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = [
        "sweep",
        "--encodings",
        "rope,pi,alibi",
        *tiny_options(steps=6),
        "--corpus",
        str(corpus),
        "--tasks",
        "perplexity",
    ]
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache-local"))
    assert runner.invoke(app, args + ["--out", "local"]).exit_code == 0
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache-slurm"))  # exported to the jobs by sbatch
    submitted = runner.invoke(app, args + ["--out", "slurm", "--executor", "slurm", "--cpus-per-task", "1"])
    assert submitted.exit_code == 0, submitted.output
    assert "3 job(s) submitted" in submitted.output
    jobs = json.loads((tmp_path / "slurm" / ".slurm" / "jobs.json").read_text())
    report = submitted.output.split("report job")[-1].strip()
    everything = ",".join([*jobs.values(), report])

    def left_the_queue() -> bool:
        queued = subprocess.run(["squeue", "-h", "-j", everything, "-o", "%i"], capture_output=True, text=True)
        return not queued.stdout.split()

    wait_for(left_the_queue, "the sweep's SLURM jobs finishing", poll=2)
    same_tables(table(tmp_path / "slurm"), table(tmp_path / "local"))
    again = runner.invoke(app, args + ["--out", "slurm", "--executor", "slurm", "--cpus-per-task", "1"])
    assert again.exit_code == 0 and "0 job(s) submitted" in again.output


def slurm_sweep(tmp_path):
    """A two-step sweep of one cell submitted to SLURM, into tmp_path / "s"."""
    corpus = make_corpus(tmp_path / "corpus")
    return CliRunner().invoke(
        app,
        [
            "sweep",
            "--encodings",
            "rope",
            "--model",
            "tiny",
            "--steps",
            "2",
            "--train-len",
            "32",
            "--eval-len",
            "64",
            "--corpus",
            str(corpus),
            "--tasks",
            "perplexity",
            "--executor",
            "slurm",
            "--out",
            str(tmp_path / "s"),
        ],
    )


def test_a_refused_submission_is_one_line_and_submits_nothing_twice(tmp_path, monkeypatch):
    """sbatch that cannot reach its controller: one line and exit code 2, not submitit's traceback; nothing
    went in, so the new output folder is not left behind (nor its submission scripts)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "squeue", "srun"):
        script = bin_dir / tool
        script.write_text("#!/bin/sh\necho 'sbatch: error: Unable to contact slurm controller' >&2\nexit 1\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    result = slurm_sweep(tmp_path)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output  # sbatch's own words are in the line, not printed above it
    assert "SLURM refused the job" in lines[0] and "controller" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("absent", [("srun",), ("sbatch", "srun")])
def test_no_slurm_client_is_one_line_before_anything_is_submitted(tmp_path, monkeypatch, absent):
    """A machine without srun (submitit's own check raises a bare RuntimeError) or sbatch: one line, exit 2."""
    import extrapolate.run.cluster as cluster

    real_which = cluster.shutil.which
    monkeypatch.setattr(cluster.shutil, "which", lambda tool: None if tool in absent else real_which(tool) or "/x")
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    result = slurm_sweep(tmp_path)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "needs a SLURM client" in result.output
    assert " and ".join(absent) in result.output and "--executor local" in result.output
    assert not (tmp_path / "s" / "results.csv").exists()
