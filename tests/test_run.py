"""`extrapolate run` end to end on a tiny model and a local corpus; training determinism and resume."""

import json

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.config import PRESETS, ModelConfig, TrainConfig
from extrapolate.data.batches import BatchSource
from extrapolate.model import TransformerLM
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.train import train

from .helpers import make_corpus, tiny_options

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))


def tiny_args(corpus, out, encoding="alibi", *extra):
    return [
        "run",
        "--tasks",
        "perplexity",
        "--encoding",
        encoding,
        *tiny_options(steps=6),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        *extra,
    ]


def test_run_end_to_end_writes_table_plot_and_summary(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    result = runner.invoke(app, tiny_args(corpus, tmp_path / "out"))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    from extrapolate.report.table import COLUMNS

    assert list(table.columns) == COLUMNS
    ppl = table[table.metric == "ppl"]
    assert sorted(ppl.eval_len) == [32, 64, 128]
    assert (ppl.status == "ok").all() and (ppl.value > 1).all() and (ppl.value < 256).all()
    assert set(ppl.kernel) == {"fused-bias"} and set(ppl.protocol) == {"full-window"}
    # every length scores the same number of tokens: only the context changes
    assert ppl.n_tokens.nunique() == 1
    assert (tmp_path / "out" / "perplexity.png").read_bytes()[:4] == b"\x89PNG"
    assert "alibi" in (tmp_path / "out" / "summary.md").read_text()
    positions = pd.read_csv(tmp_path / "out" / "positions.csv")
    assert positions[positions.eval_len == 128].bucket_end.max() == 128
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["request"]["encoding"] == "alibi" and run["train_config"]["seq_len"] == 32
    # the record sits in its folder: the folder it was asked for (here absolute, this machine's) is not in it
    assert "out" not in run["request"] and str(tmp_path / "out") not in json.dumps(run)
    # the default tokenizer: a BPE learned from the corpus, its identity in every row and in the model's config
    (identity,) = set(table.tokenizer)
    assert identity.startswith("bpe2048-") and run["train_config"]["tokenizer"] == identity
    assert 256 < run["model_config"]["vocab_size"] <= 2048
    # where it was measured, in every row and the record: CPUs round bf16 differently, so a rerun elsewhere
    # differs, and the table says where each row came from
    from extrapolate.core.machine import cpu_model

    (where,) = set(table.machine)
    assert where.startswith(f"{cpu_model()} (") and run["machine"] == where
    assert f"- machine: `{where}`" in (tmp_path / "out" / "summary.md").read_text()


def test_rope_scaling_reuses_the_rope_model_and_learned_is_unsupported_past_L(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    assert runner.invoke(app, tiny_args(corpus, tmp_path / "a", "rope")).exit_code == 0
    models = list((tmp_path / "cache" / "models").iterdir())
    result = runner.invoke(app, tiny_args(corpus, tmp_path / "b", "yarn"))
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "cache" / "models").iterdir()) == models  # no second training
    yarn = pd.read_csv(tmp_path / "b" / "results.csv")
    assert set(yarn.base_encoding) == {"rope"} and set(yarn.factor) == {4.0}
    assert runner.invoke(app, tiny_args(corpus, tmp_path / "c", "learned")).exit_code == 0
    learned = pd.read_csv(tmp_path / "c" / "results.csv")
    status = dict(zip(learned[learned.metric == "ppl"].eval_len, learned[learned.metric == "ppl"].status))
    assert status == {32: "ok", 64: "unsupported", 128: "unsupported"}


def small_config(steps=8, **changes):
    model = ModelConfig(**PRESETS["tiny"], encoding="rope", max_len=32)
    return TrainConfig(
        model=model, corpus="test", seq_len=32, batch_size=4, steps=steps, warmup_steps=2, checkpoint_every=3, **changes
    )


def source(config):
    torch.manual_seed(0)
    stream = torch.randint(0, 256, (5000,))
    return BatchSource(stream, config.seq_len, config.batch_size, config.seed)


def test_same_seed_same_loss_curve_and_resume_equals_uninterrupted(tmp_path):
    config = small_config()
    device = torch.device("cpu")
    full = train(config, source(config), device, folder=tmp_path / "a")
    again = train(config, source(config), device, folder=tmp_path / "b")
    assert full.summary["losses"] == again.summary["losses"]
    # stop after 5 steps (last checkpoint at step 3), then resume: identical curve and weights
    partial = train(config, source(config), device, folder=tmp_path / "c", stop_after=5)
    assert not ckpt.is_complete(tmp_path / "c")
    assert len(partial.summary["losses"]) == 5
    resumed = train(config, source(config), device, folder=tmp_path / "c")
    assert resumed.summary["losses"] == full.summary["losses"]
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    # a finished model is reused, never retrained
    reused = train(config, source(config), device, folder=tmp_path / "c")
    assert reused.reused


def test_checkpoint_round_trip(tmp_path):
    config = small_config(steps=2)
    trained = train(config, source(config), torch.device("cpu"), folder=tmp_path / "m")
    model = TransformerLM(ckpt.read_config(tmp_path / "m").model)
    ckpt.load_weights(tmp_path / "m", model, expected=config)
    tokens = torch.randint(0, 256, (2, 40))
    assert torch.equal(model.eval()(tokens), trained.model(tokens))


def test_untied_gqa_layernorm_gelu_variants_round_trip(tmp_path):
    model_config = ModelConfig(
        d_model=32,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        norm="layernorm",
        mlp="gelu",
        tie_embeddings=False,
        encoding="alibi",
        max_len=16,
    )
    config = TrainConfig(model=model_config, corpus="t", seq_len=16, batch_size=2, steps=1, warmup_steps=1)
    trained = train(config, source(config), torch.device("cpu"), folder=tmp_path / "m")
    loaded = TransformerLM(model_config)
    ckpt.load_weights(tmp_path / "m", loaded)
    tokens = torch.randint(0, 256, (1, 20))
    assert torch.equal(loaded.eval()(tokens), trained.model(tokens))


def test_corrupt_checkpoint_is_a_user_error(tmp_path):
    from extrapolate.core.errors import UserError

    config = small_config(steps=1)
    train(config, source(config), torch.device("cpu"), folder=tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(UserError, match="corrupt"):
        ckpt.load_weights(tmp_path / "m", TransformerLM(config.model))


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "sinusoidal", "learned", "dynamic-ntk", "yarn"])
def test_cached_continuation_equals_one_pass(encoding):
    from extrapolate.encodings import build_encoding

    torch.manual_seed(0)
    config = ModelConfig(
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        encoding="rope" if encoding in ("dynamic-ntk", "yarn") else encoding,
        max_len=64,
    )
    model = TransformerLM(config).eval()
    if encoding in ("dynamic-ntk", "yarn"):
        model.set_encoding(
            build_encoding(encoding, d_model=32, n_heads=4, head_dim=8, max_len=16, factor=4.0, original_len=16)
        )
    if encoding == "t5":
        torch.nn.init.normal_(model.encoding.table.weight)
    tokens = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        full = model.hidden_states(tokens, seq_len=40)
        cache = model.new_cache()
        first = model.hidden_states(tokens[:, :33], cache=cache, seq_len=40)
        rest = [model.hidden_states(tokens[:, i : i + 1], cache=cache, seq_len=40) for i in range(33, 40)]
    assert torch.allclose(torch.cat([first] + rest, 1), full, atol=1e-5)


def test_out_of_memory_at_one_length_is_recorded_and_the_rest_continues(tmp_path, monkeypatch):
    from extrapolate.tasks import perplexity as perplexity_module

    corpus = make_corpus(tmp_path / "corpus")
    original = perplexity_module.evaluate_perplexity

    def flaky(model, docs, length, **kwargs):
        if length == 64:
            # CUDA's own wording (torch 2.x), as a card that runs out raises it
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
                "3.21 GiB is free. Including non-PyTorch memory, this process has 75.97 GiB memory in use."
            )
        return original(model, docs, length, **kwargs)

    monkeypatch.setattr(perplexity_module, "evaluate_perplexity", flaky)
    result = runner.invoke(app, tiny_args(corpus, tmp_path / "o", "rope"))
    assert result.exit_code == 0 and "Traceback" not in result.output
    said = [line for line in result.output.splitlines() if "out of memory" in line]
    assert len(said) == 1 and "rope at 64 tokens" in said[0]
    assert "asked for 20.00 GiB, 3.21 GiB free of 79.19 GiB" in said[0]
    table = pd.read_csv(tmp_path / "o" / "results.csv")
    status = dict(zip(table[table.metric == "ppl"].eval_len, table[table.metric == "ppl"].status))
    assert status == {32: "ok", 64: "oom", 128: "ok"}


def test_what_an_out_of_memory_error_asked_for():
    from extrapolate.run.evaluate import memory_asked

    cpu = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
        "to allocate 17179869184 bytes."
    )
    assert memory_asked(cpu) == "asked for 16.00 GiB"
    assert (
        memory_asked(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB."))
        == "asked for 512.00 MiB"
    )
    assert memory_asked(MemoryError()) == ""
