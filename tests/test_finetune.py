"""Fine-tuning at an extended length: the prefix property (N steps of a longer fine-tune are the N-step one),
resume after a kill, the scaling set while training, a learned table stretched to L' rows."""

import dataclasses
import json

import pytest
import torch

from extrapolate.core.config import ModelConfig, TrainConfig
from extrapolate.data.batches import BatchSource
from extrapolate.training.finetune import finetune, finetune_config, finetune_folder, read_lineage, starting_model
from extrapolate.training.train import train

STREAM = torch.arange(6000) % 97


def base_model(tmp_path, encoding="rope"):
    config = TrainConfig(
        model=ModelConfig(d_model=32, n_layers=1, n_heads=2, vocab_size=97, encoding=encoding, max_len=32),
        seq_len=32,
        batch_size=4,
        steps=8,
        warmup_steps=2,
        checkpoint_every=4,
        dtype="float32",
    )
    return config, train(config, BatchSource(STREAM, 32, 4, 0), torch.device("cpu"), folder=tmp_path / "base").model


def run(config, base, stop_after=None):
    source = BatchSource(STREAM, config.length, config.phase.batch_size, config.phase.seed)
    return finetune(config, base, source, torch.device("cpu"), stop_after=stop_after)


def weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_longer_fine_tune_continues_the_shorter_one_exactly(tmp_path, monkeypatch):
    config, base = base_model(tmp_path)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "direct"))
    direct = weights(run(finetune_config(config, "yarn", 4.0, 128, 14), base).model)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "stepped"))
    run(finetune_config(config, "yarn", 4.0, 128, 6), base)
    longer = finetune_config(config, "yarn", 4.0, 128, 14)
    stepped = run(longer, base)
    assert same(weights(stepped.model), direct)
    assert stepped.summary["steps"] == 14 and len(stepped.summary["losses"]) == 14  # the first 6 came from the cache
    assert read_lineage(finetune_folder(longer))["base"] == config_hash_of(config)


def config_hash_of(config):
    from extrapolate.core.config import config_hash

    return config_hash(config)


def test_a_killed_fine_tune_resumes_to_the_same_model(tmp_path, monkeypatch):
    config, base = base_model(tmp_path)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "whole"))
    whole = weights(run(finetune_config(config, "pi", 4.0, 128, 10), base).model)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "killed"))
    ft = finetune_config(config, "pi", 4.0, 128, 10)
    ft = dataclasses.replace(ft, phase=dataclasses.replace(ft.phase, checkpoint_every=5))
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "whole5"))
    whole5 = weights(run(ft, base).model)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "killed"))
    run(ft, base, stop_after=5)  # a kill right after the checkpoint at step 5
    assert same(weights(run(ft, base).model), whole5)
    assert same(whole5, whole)  # how often it checkpoints does not change the weights


def test_the_scaling_is_what_the_model_trains_with(tmp_path):
    config, base = base_model(tmp_path)
    yarn = starting_model(finetune_config(config, "yarn", 4.0, 128, 5), base, torch.device("cpu"))
    rope = starting_model(finetune_config(config, "rope", 1.0, 128, 5), base, torch.device("cpu"))
    assert yarn.encoding.name == "yarn" and rope.encoding.name == "rope"
    tokens = torch.randint(0, 97, (1, 128))
    assert not torch.allclose(yarn(tokens), rope(tokens))  # same weights, different positions
    assert same(weights(yarn), weights(rope))


def test_a_learned_table_is_stretched_to_the_new_length(tmp_path):
    config, base = base_model(tmp_path, "learned")
    model = starting_model(finetune_config(config, "learned", 1.0, 128, 5), base, torch.device("cpu"))
    old, new = base.encoding.table.weight, model.encoding.table.weight  # (32, D), (128, D)
    assert new.shape == (128, old.shape[1])
    assert torch.allclose(new[0], old[0]) and torch.allclose(new[-1], old[-1])
    # row r of the new table sits at old position r·31/127, between its two neighbours
    r = 64
    x = r * 31 / 127
    lo = int(x)
    expected = old[lo] + (x - lo) * (old[lo + 1] - old[lo])
    assert torch.allclose(new[r], expected, atol=1e-6)


def ppl_rows(encoding, base, steps, values, finetune_len=1024, L=256):
    """Perplexity rows of one (encoding, fine-tune steps) cell: values = {eval_len: ppl}."""
    return [
        {
            "run_id": f"{encoding}{steps}",
            "encoding": encoding,
            "base_encoding": base,
            "train_len": L,
            "eval_len": n,
            "task": "perplexity",
            "metric": "ppl",
            "value": v,
            "depth": None,
            "seed": 0,
            "status": "ok",
            "finetune_steps": steps,
            "finetune_len": finetune_len,
        }
        for n, v in values.items()
    ]


def test_report_divides_by_the_base_model_at_L_and_tabulates_fine_tune_steps():
    import pandas as pd

    from extrapolate.report.finetune import finetune_section
    from extrapolate.report.labels import label_variants
    from extrapolate.report.pages import perplexity_at_L, perplexity_matrix
    from extrapolate.report.retrieval import base_encodings
    from extrapolate.report.table import aggregate

    table = pd.DataFrame(
        ppl_rows("rope", "rope", 0, {256: 50.0, 1024: 100.0})
        + ppl_rows("pi", "rope", 0, {256: 130.0, 1024: 128.0})
        + ppl_rows("pi", "rope", 100, {256: 60.0, 1024: 55.0})
    )
    table = label_variants(table)
    assert list(dict.fromkeys(table["encoding"])) == ["rope", "pi", "pi+ft100"]
    agg, bases = aggregate(table), base_encodings(table)
    assert perplexity_at_L(agg, bases) == {"rope": 50.0, "pi": 50.0, "pi+ft100": 50.0}
    ratios = perplexity_matrix(agg, ratio=True, bases=bases)
    assert "| pi | 256 | 2.60× | 2.56× |" in ratios  # PI's cost at L shows, instead of 1.00×
    section = "\n".join(finetune_section(table, perplexity_at_L(agg, bases)))
    assert "| pi | 128.000 | 55.000 | 50.000 |" in section  # at L': 0 steps, 100 steps, base model at L
    assert "| pi | 130.000 | 60.000 | 50.000 |" in section  # at L


@pytest.mark.parametrize("encoding", ["yarn", "pi", "ntk", "dynamic-ntk"])
def test_an_exported_fine_tune_gives_transformers_the_same_logits(tmp_path, monkeypatch, encoding):
    """The fine-tuned model, exported from its cache folder, loads in transformers with the scaling it was
    fine-tuned with (`rope_parameters`), and its logits at L' equal ours with that scaling (1e-4)."""
    transformers = pytest.importorskip("transformers")
    from extrapolate.encodings import encoding_for
    from extrapolate.run.export import export_run

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    config, base = base_model(tmp_path)
    ft = finetune_config(config, encoding, 4.0, 128, 3)
    tuned = run(ft, base).model
    export_run(finetune_folder(ft), tmp_path / "hf")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    tuned.set_encoding(encoding_for(tuned.config, encoding, factor=4.0, original_len=32))
    tokens = torch.randint(0, 97, (1, 128))
    with torch.no_grad():
        assert torch.allclose(theirs(tokens).logits, tuned(tokens), atol=1e-4, rtol=0)


def test_a_pretrained_checkpoint_fine_tunes_through_run(tmp_path, monkeypatch):
    """A local Llama checkpoint (exported from a tiny model with its BPE) is fine-tuned at L' = 2L with YaRN,
    one row per step and activations recomputed, then evaluated; the rows carry the lineage."""
    pytest.importorskip("transformers")
    import pandas as pd
    from typer.testing import CliRunner

    from extrapolate.cli.app import app
    from extrapolate.core.config import ModelConfig
    from extrapolate.data.tokenizers import load_tokenizer
    from extrapolate.model import TransformerLM
    from extrapolate.run.export import export_hf

    from .helpers import make_corpus

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus", documents=4, words=600)
    from extrapolate.data.corpora import load_corpus

    tokenizer = load_tokenizer("bpe:300", load_corpus(str(corpus)))
    torch.manual_seed(0)
    model = TransformerLM(
        ModelConfig(d_model=32, n_layers=2, n_heads=2, vocab_size=tokenizer.vocab_size, encoding="rope", max_len=64)
    )
    export_hf(model, tmp_path / "llama", tokenizer)
    out = tmp_path / "out"
    args = [
        "run",
        "--tasks",
        "perplexity",
        "--model",
        str(tmp_path / "llama"),
        "--encoding",
        "yarn",
        "--eval-lens",
        "64,128",
        "--finetune-steps",
        "2",
        "--corpus",
        str(corpus),
        "--eval-tokens",
        "256",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["finetune_steps"]) == {2} and set(rows["finetune_len"]) == {128} and set(rows["factor"]) == {2.0}
    lineage = json.loads((out / "run.json").read_text())["finetune"]
    assert lineage["phase"]["batch_size"] == 1 and lineage["phase"]["seq_len"] == 128 and lineage["original_len"] == 64

    # exported: transformers loads the fine-tuned model with its tokenizer and its YaRN scaling, same logits
    import transformers

    from extrapolate.encodings import encoding_for
    from extrapolate.training.train import load_trained

    assert CliRunner().invoke(app, ["export", str(out), "--out", str(tmp_path / "hf")]).exit_code == 0
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    text = "the quiet river where old ships sail"
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "hf").encode(
        text, add_special_tokens=False
    ) == tokenizer.encode(text)
    record = json.loads((out / "run.json").read_text())
    ours = load_trained(tmp_path / "cache" / "models" / record["model_folder"], torch.device("cpu")).model
    ours.set_encoding(encoding_for(ours.config, "yarn", factor=2.0, original_len=64))
    ids = torch.randint(0, tokenizer.vocab_size, (1, 128))
    with torch.no_grad():
        assert torch.allclose(theirs(ids).logits, ours(ids), atol=1e-4, rtol=0)


def test_one_encoding_at_two_factors_is_two_rows_of_the_report_not_their_mean():
    import pandas as pd

    from extrapolate.report.labels import label_variants, split_label
    from extrapolate.report.pages import perplexity_matrix
    from extrapolate.report.table import aggregate

    rows = (
        ppl_rows("rope", "rope", 0, {256: 50.0, 1024: 100.0})
        + [r | {"factor": 2.0} for r in ppl_rows("yarn", "rope", 0, {256: 51.0, 1024: 60.0})]
        + [r | {"factor": 4.0, "run_id": "yarn4"} for r in ppl_rows("yarn", "rope", 0, {256: 53.0, 1024: 56.0})]
        + [r | {"factor": 4.0, "run_id": "yarn4ft"} for r in ppl_rows("yarn", "rope", 10, {256: 52.0, 1024: 54.0})]
    )
    table = label_variants(pd.DataFrame(rows).assign(factor=lambda t: t["factor"].fillna(1.0)))
    assert list(dict.fromkeys(table["encoding"])) == ["rope", "yarn s=2", "yarn s=4", "yarn s=4+ft10"]
    assert split_label(table["encoding"])[0].tolist() == ["rope"] * 2 + ["yarn"] * 6
    matrix = perplexity_matrix(aggregate(table))
    assert "| yarn s=2 | 256 | 51.000 | 60.000 |" in matrix and "| yarn s=4 | 256 | 53.000 | 56.000 |" in matrix
    one_factor = label_variants(pd.DataFrame(rows[:4]).assign(factor=[1.0, 1.0, 2.0, 2.0]))
    assert list(dict.fromkeys(one_factor["encoding"])) == [
        "rope",
        "yarn",
    ]  # the factor shows only where it tells rows apart
