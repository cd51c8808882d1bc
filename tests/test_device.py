"""The training dtype: `auto` trains in bf16 only where bf16 matmuls are fast, and the resolved dtype is part
of the model's identity (a float32-trained model is never mistaken for a bf16 one in the cache)."""

import pytest
import torch

from extrapolate.core.device import fast_bf16, training_dtype
from extrapolate.core.errors import UserError

CPU = torch.device("cpu")


@pytest.fixture(params=[True, False], ids=["fast-bf16", "no-fast-bf16"])
def cpu_bf16(request, monkeypatch):
    """Pretend the CPU has (or lacks) oneDNN's bf16 path."""
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: request.param, raising=False)
    return request.param


def test_auto_follows_the_cpu_bf16_path(cpu_bf16):
    assert fast_bf16(CPU) is cpu_bf16
    assert training_dtype(CPU, "auto") == ("bfloat16" if cpu_bf16 else "float32")


@pytest.mark.parametrize("asked", ["float32", "bfloat16"])
def test_an_explicit_dtype_is_kept(cpu_bf16, asked):
    assert training_dtype(CPU, asked) == asked


def test_mps_trains_in_float32():
    # autocast is off on MPS, so the model's recorded dtype says what it really trained in
    assert training_dtype(torch.device("mps"), "auto") == "float32"


def test_a_torch_without_onednn_trains_in_float32(monkeypatch):
    def missing():
        raise RuntimeError("mkldnn not built")

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", missing, raising=False)
    assert training_dtype(CPU, "auto") == "float32"


@pytest.mark.parametrize("bad", ["float16", "fp32", "", "AUTO"])
def test_unknown_dtype_is_a_user_error(bad):
    with pytest.raises(UserError, match="--train-dtype"):
        training_dtype(CPU, bad)


def test_resolved_dtype_is_part_of_the_model_identity(cpu_bf16, tmp_path, monkeypatch):
    """The same request gives a bf16 model on a CPU with fast bf16 and a float32 one without: two hashes."""
    from extrapolate.core.config import config_hash
    from extrapolate.run import RunRequest, resolve
    from extrapolate.run.resolved import train_config

    class Prepared:  # what train_config reads of a prepared run
        device = CPU
        corpus = type("C", (), {"name": "c"})()
        tokenizer = type("T", (), {"identity": "bytes", "vocab_size": 256})()
        passkey_fraction, passkey_identity = 0.0, None

    def config_for(**fields):
        return train_config(resolve(RunRequest(encoding="rope", model="tiny", train_len=32, **fields)), Prepared())

    config = config_for()
    assert config.dtype == ("bfloat16" if cpu_bf16 else "float32")
    explicit = config_for(train_dtype=config.dtype)
    assert config_hash(explicit) == config_hash(config)
    other = "float32" if cpu_bf16 else "bfloat16"
    flipped = config_for(train_dtype=other)
    assert config_hash(flipped) != config_hash(config)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_evaluation_without_a_fast_bf16_path_runs_either_dtype_and_trains_in_float32(
    tmp_path, monkeypatch, capsys, dtype
):
    """On a CPU without fast bf16, `--dtype bfloat16` evaluates on float32 kernels with bf16 rounding (no
    slower than float32 there, so nothing to warn about); the model itself trains in float32 (`auto`),
    recorded in its config."""
    import json

    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    from .helpers import make_corpus

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False, raising=False)
    out = tmp_path / "out"
    args = [
        "run",
        "--tasks",
        "perplexity",
        "--model",
        "tiny",
        "--steps",
        "2",
        "--batch-size",
        "2",
        "--train-len",
        "32",
        "--eval-lens",
        "32",
        "--eval-tokens",
        "64",
        "--corpus",
        str(make_corpus(tmp_path / "corpus")),
        "--device",
        "cpu",
        "--dtype",
        dtype,
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = result.output + capsys.readouterr().err
    assert "warning" not in text
    assert json.loads((out / "run.json").read_text())["train_config"]["dtype"] == "float32"
