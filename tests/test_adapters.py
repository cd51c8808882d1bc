"""Fine-tuning through low-rank adapters (peft): LoRA trains the attention projections' adapters alone, LongLoRA
also the embeddings and norms, with S²-attention while training (its port: tests/test_shifted_sparse.py);
a merged model computes what the adapted one does; a fine-tune with adapters resumes, continues a shorter one
exactly, is reused from the cache merged; a request that cannot use them is one line."""

import importlib.util

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.encodings.base import ShiftedSparse
from extrapolate.kernels.attention import attention_plan
from extrapolate.model import TransformerLM
from extrapolate.training.adapters import adapter_config, merged, trainable_parameters, with_adapters
from extrapolate.training.finetune import finetune_config, starting_model
from tests.test_finetune import base_model, run, same, weights

# The adapters train through peft; a request's refusal and a report's labels need none, so they run without it
needs_peft = pytest.mark.skipif(
    importlib.util.find_spec("peft") is None, reason="peft is not installed (pip install 'extrapolate[lora]')"
)


def tiny():
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, max_len=64)).eval()


@needs_peft
def test_lora_trains_its_adapters_alone_and_longlora_the_embeddings_and_norms_too():
    tokens = torch.randint(0, 64, (2, 20))
    plain = tiny()
    with torch.no_grad():
        before = plain(tokens)
    lora = with_adapters(tiny(), adapter_config("lora", 4))
    with torch.no_grad():
        assert torch.equal(lora(tokens), before)  # B starts at zero: the same model
    names = {n for n, p in lora.named_parameters() if p.requires_grad}
    assert names and all("lora_" in n for n in names)
    assert trainable_parameters(lora) == 2 * 4 * (2 * 4 * 32)  # layers · projections · (A and B: r·d each)
    longlora = with_adapters(tiny(), adapter_config("longlora", 4))
    extra = {n for n, p in longlora.named_parameters() if p.requires_grad and "lora_" not in n}
    assert extra == {"embed.weight", "norm.weight"} | {
        f"blocks.{i}.{k}.weight" for i in (0, 1) for k in ("attn_norm", "mlp_norm")
    }


@needs_peft
def test_a_merged_model_computes_what_the_adapted_one_does():
    model = with_adapters(tiny(), adapter_config("lora", 4))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.2)
    tokens = torch.randint(0, 64, (2, 20))
    with torch.no_grad():
        adapted = model(tokens)
        plain = merged(model)
        assert torch.allclose(plain(tokens), adapted, atol=1e-5)
    assert sorted(plain.state_dict()) == sorted(tiny().state_dict())  # no adapter left


@needs_peft
def test_longlora_trains_in_shifted_groups_and_evaluates_in_full(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    config, base = base_model(tmp_path)
    ft = finetune_config(config, "yarn", 4.0, 128, 4, adapter=adapter_config("longlora", 4))
    training = starting_model(ft, base, torch.device("cpu"))
    assert isinstance(training.encoding, ShiftedSparse) and training.encoding.sparse_group == 32
    assert attention_plan(training.encoding, "auto", "cpu", torch.float32, 128, 128, True).name == "shifted-sparse"
    assert attention_plan(training.encoding, "auto", "cuda", torch.bfloat16, 128, 128, True).name == "shifted-sparse"
    result = run(ft, base)
    assert result.summary["trainable_params"] < result.summary["params"]
    assert not any("lora_" in name for name in result.model.state_dict())  # evaluated merged


@needs_peft
def test_a_fine_tune_with_adapters_continues_a_shorter_one_and_is_reused_merged(tmp_path, monkeypatch):
    config, base = base_model(tmp_path)
    lora = adapter_config("lora", 4)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "direct"))
    direct = weights(run(finetune_config(config, "pi", 4.0, 128, 12, lr=3e-2, adapter=lora), base).model)
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "stepped"))
    run(finetune_config(config, "pi", 4.0, 128, 5, lr=3e-2, adapter=lora), base, stop_after=3)  # killed at 3
    run(finetune_config(config, "pi", 4.0, 128, 5, lr=3e-2, adapter=lora), base)  # resumed to 5
    stepped = run(finetune_config(config, "pi", 4.0, 128, 12, lr=3e-2, adapter=lora), base)  # continues 5
    assert same(weights(stepped.model), direct)
    reused = run(finetune_config(config, "pi", 4.0, 128, 12, lr=3e-2, adapter=lora), base)  # from the cache
    assert reused.reused and same(weights(reused.model), direct)
    assert not same(direct, weights(base))  # the adapters trained and were merged in


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"finetune_adapter": "lora"}, "--finetune-adapter lora trains a fine-tune: give --finetune-steps"),
        ({"finetune_adapter": "qlora", "finetune_steps": 2}, "unknown --finetune-adapter"),
        ({"finetune_adapter": "longlora", "finetune_steps": 2, "encoding": "alibi"}, "LongLoRA fine-tunes RoPE models"),
        ({"finetune_adapter": "lora", "finetune_steps": 2, "lora_rank": 0}, "--lora-rank must be in"),
    ],
)
def test_a_request_that_cannot_use_adapters_is_one_line(fields, message):
    from extrapolate.core.errors import UserError
    from extrapolate.run.request import RunRequest
    from extrapolate.run.resolution import check_adapter as check

    with pytest.raises(UserError, match=message):
        check(RunRequest(train_len=64, **fields))


def test_a_report_keeps_fine_tunes_through_adapters_apart_from_full_ones():
    import pandas as pd

    from extrapolate.report.finetune import finetune_section
    from extrapolate.report.labels import encoding_of, label_variants

    rows = [
        dict(encoding="yarn", finetune_steps=s, finetune_adapter=a, finetune_len=1024, value=v)
        for s, a, v in [(0, None, 60.0), (100, None, 50.0), (100, "lora", 55.0), (100, "longlora", 52.0)]
    ]
    common = dict(run_id="r", train_len=256, eval_len=1024, task="perplexity", metric="ppl", status="ok", seed=0)
    table = pd.DataFrame([{**common, **row, "run_id": f"r{i}"} for i, row in enumerate(rows)])
    labels = sorted(label_variants(table)["encoding"])
    assert labels == ["yarn", "yarn+ft100", "yarn+longlora+ft100", "yarn+lora+ft100"]
    assert {encoding_of(label) for label in labels} == {"yarn"}
    section = "\n".join(finetune_section(label_variants(table), {"yarn": 46.0}))
    assert "| yarn+lora |  | 55.000 | 46.000 |" in section and "| yarn | 60.000 | 50.000 | 46.000 |" in section
