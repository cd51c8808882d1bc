"""The GPU-scale comparison's command (scripts/gpu_showcase.sh), rehearsed end to end at tiny size on the CPU:
options given to it replace its own, a corpus in PG-19's layout (train/ and test/ folders) is read with its
split, the report says whether held-out perplexity fell through training, and `extrapolate report`
re-derives that report byte for byte."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import make_corpus

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # end to end, tens of seconds: run by .ci/run's slow step
def test_the_gpu_showcase_rehearses_at_tiny_size(tmp_path):
    corpus = tmp_path / "books"
    make_corpus(corpus / "train", documents=8, words=1500)
    make_corpus(corpus / "test", documents=2, words=1500, seed=1)
    out = tmp_path / "showcase"
    tiny = [
        "--model",
        "tiny",
        "--train-len",
        "128",
        "--eval-len",
        "256",
        "--steps",
        "20",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--tokenizer",
        "bytes",
        "--encodings",
        "rope,alibi",
        "--eval-tokens",
        "256",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_showcase.sh"), *tiny],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "run.json").read_text())
    assert record["request"]["model"] == "tiny" and record["request"]["lr"] == 1e-3  # ours replaced, its kept
    assert record["train_config"]["corpus"].endswith(":test")  # the folder's own split
    report = (out / "report.md").read_text()
    assert "## Held-out perplexity during training" in report and "| rope |" in report
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".md", ".svg")}
    subprocess.run([sys.executable, "-m", "extrapolate", "report", str(out)], check=True, capture_output=True, env=env)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".md", ".svg")} == before
