"""The transformers backend: any causal LM transformers loads runs through transformers' own model behind the
project's interface. Tiny random checkpoints of families the native model does not compute (GPT-2, BLOOM,
GPT-NeoX, GPT-J's RoPE table, mixtures of experts, a RoPE/NoPE hybrid, OLMo 2, DeepSeek-V3's latent attention,
gpt-oss's sinks) give transformers' own logits through it, from a cache too; where both backends apply they
agree; scalings apply as transformers computes them."""

import json

import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from extrapolate.backends.choice import chosen_backend, transformers_model  # noqa: E402
from extrapolate.backends.hf import rotary_modules  # noqa: E402
from extrapolate.core.errors import PositionOutOfRange, UserError  # noqa: E402
from extrapolate.data.pretrained import from_hf_model  # noqa: E402
from extrapolate.encodings import encoding_for  # noqa: E402
from extrapolate.model import token_cross_entropy  # noqa: E402
from tests.helpers import make_corpus  # noqa: E402

VOCAB = 320  # the test tokenizer's 300 ids and room for its special tokens
CONTEXT = 64
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # the families' own ids are past a vocabulary of 320

# family -> its config fields besides the vocabulary: one of each kind of released model the backend opens
NEW_FAMILIES = {
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=CONTEXT),  # learned absolute positions
    "bloom": dict(hidden_size=32, n_layer=2, n_head=4),  # ALiBi
    "gpt_neox": dict(**SIZES, max_position_embeddings=CONTEXT),  # partial rotary, parallel blocks
    "mixtral": dict(**SIZES, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),  # experts
    "qwen3_moe": dict(**SIZES, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16),
    "smollm3": dict(**SIZES, num_key_value_heads=2, no_rope_layers=[1, 0], **IDS),  # a NoPE layer, a RoPE layer
    "olmo2": dict(**SIZES, **IDS),
    "gptj": dict(n_embd=32, n_layer=2, n_head=4, n_positions=CONTEXT, rotary_dim=4, **IDS),  # RoPE as a table
    # multi-head latent attention (DeepSeek-V3's shapes: low-rank keys and values, a rotary part of each head)
    "deepseek_v3": dict(
        **SIZES,
        num_key_value_heads=4,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        **IDS,
    ),
    # gpt-oss: experts, a learned attention sink per head, sliding and full layers
    "gpt_oss": dict(
        **SIZES,
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        **IDS,
    ),
}
NATIVE_FAMILIES = {
    "llama": dict(**SIZES, num_key_value_heads=2),
    "qwen2": dict(**SIZES, num_key_value_heads=2),
    "qwen3": dict(**SIZES, num_key_value_heads=2, head_dim=16),
    "gemma3_text": dict(
        **SIZES,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
    ),
}


def checkpoint(family: str, fields: dict, seed: int = 0):
    """transformers' random model of `family`, weights large enough that positions matter in the logits."""
    config = transformers.AutoConfig.for_model(family, vocab_size=VOCAB, **fields)
    if hasattr(config, "max_position_embeddings") and family not in ("gpt2", "gpt_neox"):
        config.max_position_embeddings = CONTEXT
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3) if p.dim() > 1 else torch.nn.init.normal_(p, mean=1.0, std=0.2)
    return model.eval()


def their_logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens).logits.float()


@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_a_family_the_native_model_lacks_gives_transformers_logits_whole_and_from_a_cache(family):
    theirs = checkpoint(family, NEW_FAMILIES[family])
    assert chosen_backend("auto", theirs.config) == "transformers"
    ours, _ = transformers_model(theirs)
    tokens = torch.randint(3, VOCAB, (1, 40))
    expected = their_logits(theirs, tokens)  # (1, 40, V)
    assert expected.std() > 0.5  # a scale at which 1e-4 is a tight bound
    with torch.no_grad():
        whole = ours(tokens).float()
        nll = ours.token_nll(tokens[:, :-1], tokens[:, 1:], chunk=7)  # chunks that do not divide the length
        # a shared prefix of batch 1, then three continuations of it (as the retrieval tasks decode)
        cache = ours.new_cache()
        ours.hidden_states(tokens[:, :30], cache=cache)
        continued = ours.lm_head(ours.hidden_states(tokens[:, 30:].expand(3, -1), cache=[dict(c) for c in cache]))
        again = ours.lm_head(ours.hidden_states(tokens[:, 30:31], cache=cache))  # the prefix's cache is intact
    assert torch.allclose(whole, expected, atol=1e-4, rtol=0)
    assert torch.allclose(nll, token_cross_entropy(expected[:, :-1], tokens[:, 1:]), atol=1e-4, rtol=0)
    for row in continued:
        assert torch.allclose(row.float(), expected[0, 30:], atol=1e-4, rtol=0)
    assert torch.allclose(again[0].float(), expected[0, 30:31], atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "family,fields",
    [
        ("gptj", NEW_FAMILIES["gptj"]),
        ("codegen", dict(n_embd=32, n_layer=2, n_head=4, n_positions=CONTEXT, n_ctx=CONTEXT, rotary_dim=4, **IDS)),
    ],
)
def test_a_rope_table_of_the_context_is_continued_past_it(family, fields):
    """GPT-J and CodeGen hold RoPE as a table of n_positions rows, indexed by position in transformers' model,
    which fails past it. The adapter builds the table again with more rows, so 200 tokens (whole, and 150 then
    50 from a cache) give the logits of the same weights in a model whose table has 512 rows."""
    theirs = checkpoint(family, fields)
    config = transformers.AutoConfig.for_model(family, vocab_size=VOCAB, **{**fields, "n_positions": 512})
    wider = transformers.AutoModelForCausalLM.from_config(config).eval()
    wider.load_state_dict(theirs.state_dict())  # the table is a buffer outside the weights
    ours, released = transformers_model(theirs)
    assert released.encoding == "rope" and ours.config.rotated_dim == 4  # GPT-J rotates 4 of each head's 8
    tokens = torch.randint(3, VOCAB, (1, 200))
    expected = their_logits(wider, tokens)
    with torch.no_grad():
        whole = ours(tokens).float()
        cache = ours.new_cache()
        ours.hidden_states(tokens[:, :150], cache=cache)
        continued = ours.lm_head(ours.hidden_states(tokens[:, 150:], cache=cache)).float()
    torch.testing.assert_close(whole, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(continued, expected[:, 150:], atol=1e-4, rtol=0)
    ours.hf.to(torch.bfloat16)  # a model cast to bf16 keeps its table in bf16 as it grows (CodeGen rotates in it)
    with torch.no_grad():
        ours.hidden_states(torch.randint(3, VOCAB, (1, 450)))  # past the 200 rows the table has now
    assert {m.embed_positions.dtype for _, _, m in rotary_modules(ours.hf)} == {torch.bfloat16}
    ours.hf.float()
    ours.set_encoding(encoding_for(ours.config, "rope"))  # plain RoPE at its base is the release
    with pytest.raises(UserError, match=f"{family} builds its RoPE without rope_parameters .* not yarn"):
        ours.set_encoding(encoding_for(ours.config, "yarn", factor=2.0, original_len=CONTEXT))
    with pytest.raises(UserError, match="not logn"):
        ours.set_encoding(encoding_for(ours.config, "logn", original_len=CONTEXT))


@pytest.mark.parametrize("family", NATIVE_FAMILIES)
def test_both_backends_read_skipped_position_ids_alike(family):
    """PoSE's ids (a skip after the first chunk) reach the transformers backend as its `position_ids`."""
    theirs = checkpoint(family, NATIVE_FAMILIES[family])
    native, (adapter, _) = from_hf_model(theirs), transformers_model(theirs)
    tokens = torch.randint(3, VOCAB, (2, 24))
    ids = torch.cat([torch.arange(5), torch.arange(5, 24) + 17])  # below the context of 48
    with torch.no_grad():
        a = native.token_nll(tokens[:, :-1], tokens[:, 1:], positions=ids[:-1])
        b = adapter.token_nll(tokens[:, :-1], tokens[:, 1:], positions=ids[:-1])
        plain = adapter.token_nll(tokens[:, :-1], tokens[:, 1:])
    assert torch.allclose(a, b, atol=1e-4, rtol=0) and not torch.allclose(b, plain, atol=1e-3)


@pytest.mark.parametrize("family", NATIVE_FAMILIES)
def test_both_backends_agree_where_both_apply(family):
    theirs = checkpoint(family, NATIVE_FAMILIES[family])
    assert chosen_backend("auto", theirs.config) == "native"
    native, (adapter, _) = from_hf_model(theirs), transformers_model(theirs)
    tokens = torch.randint(3, VOCAB, (2, 48))
    with torch.no_grad():
        a, b = native.token_nll(tokens[:, :-1], tokens[:, 1:]), adapter.token_nll(tokens[:, :-1], tokens[:, 1:])
    assert abs(float(a.mean()) / float(b.mean()) - 1) < 1e-4  # perplexity to 1e-4 relative
    assert greedy(native, tokens[:1, :20]) == greedy(adapter, tokens[:1, :20])


def greedy(model, prompt, steps: int = 12) -> list[int]:
    """Greedy decoding from a cache, as the retrieval tasks answer."""
    cache, out = model.new_cache(), []
    with torch.no_grad():
        hidden = model.hidden_states(prompt, cache=cache)
        for _ in range(steps):
            token = model.lm_head(hidden[:, -1]).float().argmax(-1, keepdim=True)  # (1, 1)
            out.append(int(token))
            hidden = model.hidden_states(token, cache=cache)
    return out


@pytest.mark.parametrize("encoding,factor", [("pi", 4.0), ("yarn", 4.0), ("dynamic-ntk", 4.0), ("llama3", 8.0)])
def test_a_scaling_on_the_transformers_backend_computes_what_the_native_model_computes(encoding, factor):
    theirs = checkpoint("llama", NATIVE_FAMILIES["llama"])
    native, (adapter, _) = from_hf_model(theirs), transformers_model(theirs)
    scaled = encoding_for(native.config, encoding, factor=factor, original_len=CONTEXT)
    native.set_encoding(scaled)
    adapter.set_encoding(scaled)
    tokens = torch.randint(3, VOCAB, (1, 3 * CONTEXT))  # past L, where the scalings differ from RoPE
    with torch.no_grad():
        expected, got = native(tokens), adapter(tokens)
        plain = their_logits(checkpoint("llama", NATIVE_FAMILIES["llama"]), tokens)
    assert not torch.allclose(got, plain, atol=1e-2)  # the scaling changed what transformers computes
    assert torch.allclose(got, expected, atol=1e-4, rtol=0)
    adapter.set_encoding(adapter.released)  # as released again: transformers' plain RoPE
    with torch.no_grad():
        assert torch.allclose(adapter(tokens), plain, atol=1e-4, rtol=0)


@pytest.mark.parametrize("encoding", ["yarn", "longrope", "llama3"])
def test_a_scaling_reads_the_same_original_length_on_both_backends_where_phi3_keeps_its_own(encoding):
    """Phi-3 keeps `original_max_position_embeddings` outside its RoPE parameters (4096 by default), and
    transformers gives that copy priority for the scalings that read L: the backend writes its L there too, so
    both backends scale from the same L (here the context, 64), and as released again the copy is the file's."""
    theirs = checkpoint("phi3", dict(**SIZES, num_key_value_heads=2, partial_rotary_factor=0.5, **IDS))
    assert theirs.config.original_max_position_embeddings == 4096  # the class default, not this model's L
    native, (adapter, _) = from_hf_model(theirs), transformers_model(theirs)
    scaled = encoding_for(native.config, encoding, factor=4.0, original_len=CONTEXT)
    native.set_encoding(scaled)
    adapter.set_encoding(scaled)
    tokens = torch.randint(3, VOCAB, (1, 3 * CONTEXT))
    with torch.no_grad():
        torch.testing.assert_close(adapter(tokens).float(), native(tokens).float(), atol=1e-4, rtol=0)
    adapter.set_encoding(adapter.released)
    assert adapter.hf.config.original_max_position_embeddings == 4096


def test_a_partial_rotation_is_scaled_as_transformers_scales_it():
    """GPT-NeoX rotates a quarter of each head: PI on the backend equals transformers' own linear scaling."""
    fields = NEW_FAMILIES["gpt_neox"]
    ours, _ = transformers_model(checkpoint("gpt_neox", fields))
    ours.set_encoding(encoding_for(ours.config, "pi", factor=4.0, original_len=CONTEXT))
    linear = checkpoint("gpt_neox", fields)
    linear.config.rope_parameters = {**linear.config.rope_parameters, "rope_type": "linear", "factor": 4.0}
    linear.gpt_neox.rotary_emb = type(linear.gpt_neox.rotary_emb)(linear.config)
    tokens = torch.randint(3, VOCAB, (1, 2 * CONTEXT))
    with torch.no_grad():
        assert torch.allclose(ours(tokens), their_logits(linear, tokens), atol=1e-4, rtol=0)


def test_learned_positions_past_their_table_are_unsupported_not_an_index_error():
    ours, released = transformers_model(checkpoint("gpt2", NEW_FAMILIES["gpt2"]))
    assert (released.encoding, released.original_len) == ("learned", CONTEXT)
    cache = ours.new_cache()
    ours.hidden_states(torch.ones(1, CONTEXT - 1, dtype=torch.int64), cache=cache)
    with pytest.raises(PositionOutOfRange):
        ours.hidden_states(torch.ones(1, 2, dtype=torch.int64), cache=cache)


def test_native_refuses_a_family_it_does_not_compute_and_names_the_way_out():
    with pytest.raises(UserError, match="--backend transformers"):
        chosen_backend("native", checkpoint("gpt2", NEW_FAMILIES["gpt2"]).config)
    with pytest.raises(UserError, match="--backend choice"):
        chosen_backend("onnx", checkpoint("gpt2", NEW_FAMILIES["gpt2"]).config)


# ---- through the command line


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Saved checkpoints with a tokenizer, as transformers saves them."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    tokenizer = load_tokenizer("bpe:300", small_corpus()).to_transformers()
    out = {}
    for family, fields in [*NEW_FAMILIES.items(), ("llama", NATIVE_FAMILIES["llama"])]:
        folder = tmp_path_factory.mktemp(family)
        checkpoint(family, {**fields, **({"n_positions": 512} if family == "gpt2" else {})}).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        out[family] = folder
    return out


def run_cli(folder, corpus, out, *extra, code=0, lengths="128,256"):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    args = ["run", "--model", str(folder), "--corpus", str(corpus), "--eval-lens", lengths, "--eval-tokens", "1024"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), *extra])
    assert result.exit_code == code, result.output
    if code:
        return result.output
    return pd.read_csv(out / "results.csv"), json.loads((out / "run.json").read_text())


@pytest.mark.parametrize("family", ["gpt2", "bloom", "gpt_neox", "mixtral", "smollm3"])
def test_run_measures_perplexity_passkey_and_a_ruler_task_on_a_released_family(tmp_path, folders, family, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    extra = ("--train-len", "512") if family == "bloom" else ()  # BLOOM's config states no context
    for tasks in ("perplexity,passkey", "vt-compact"):  # one retrieval task file a run: passkey's, then RULER's
        table, record = run_cli(folders[family], corpus, tmp_path / "out", "--tasks", tasks, *extra, lengths="512,1024")
    assert set(table.task) == {"perplexity", "passkey", "vt-compact"}
    assert set(table.kind) == {"perplexity", "needle", "ruler"}
    # the row says which backend computed it, and with which of transformers' attention implementations
    assert set(table.kernel) == {"transformers:eager" if family == "bloom" else "transformers:sdpa"}
    assert record["training"]["backend"] == "transformers" and record["request"]["backend"] == "transformers"
    expected = {"gpt2": "learned", "bloom": "alibi"}.get(family, "rope")
    assert set(table.encoding) == {expected}
    ppl = table[table.metric == "ppl"].set_index("eval_len")
    assert ppl.loc[512, "status"] == "ok"
    # GPT-2's table has 512 rows: past them a position has no representation, as for a learned table here
    assert set(table[table.eval_len == 1024].status) == {"unsupported" if family == "gpt2" else "ok"}


@pytest.mark.slow  # end to end, tens of seconds: run by the CI's slow step
def test_quiet_silences_transformers_loading_bars(tmp_path, folders):
    """`--quiet` leaves warnings and errors alone: transformers' bar over a checkpoint's weights goes too."""
    import os
    import subprocess
    import sys

    corpus = make_corpus(tmp_path / "corpus")
    env = {**os.environ, "EXTRAPOLATE_CACHE": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "extrapolate", "run", "--model", str(folders["gpt2"]), "--corpus", str(corpus)]
    args += ["--eval-lens", "128", "--eval-tokens", "256", "--tasks", "perplexity"]
    loud = subprocess.run([*args, "--out", str(tmp_path / "a")], env=env, capture_output=True, text=True)
    quiet = subprocess.run([*args, "--out", str(tmp_path / "b"), "--quiet"], env=env, capture_output=True, text=True)
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "Loading weights" in loud.stderr and "Loading weights" not in quiet.stderr + quiet.stdout


def test_the_backend_enters_a_run_id_only_when_it_is_transformers(tmp_path, folders, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    auto, _ = run_cli(folders["llama"], corpus, tmp_path / "auto", "--tasks", "perplexity")
    native, _ = run_cli(folders["llama"], corpus, tmp_path / "native", "--tasks", "perplexity", "--backend", "native")
    hf, _ = run_cli(folders["llama"], corpus, tmp_path / "hf", "--tasks", "perplexity", "--backend", "transformers")
    assert list(auto.run_id) == list(native.run_id) and not any(auto.kernel.str.startswith("transformers"))
    assert set(hf.run_id).isdisjoint(auto.run_id)
    ppl = [t[t.metric == "ppl"].value.to_numpy() for t in (auto, hf)]
    assert abs(ppl[0] / ppl[1] - 1).max() < 1e-4


@pytest.mark.parametrize(
    "family,extra,message",
    [
        ("gpt2", ("--encoding", "yarn"), "encodes positions with learned"),
        ("bloom", (), "states no training context"),
        ("gpt_neox", ("--encoding", "self-extend"), "self-extend needs the native model"),
        ("gpt_neox", ("--encoding", "dual-chunk"), "dual-chunk needs the native model"),
        ("llama", ("--encoding", "ssmax"), "ssmax learns parameters of its own in training"),
        ("gpt_neox", ("--backend", "native"), "--backend transformers"),
        ("gpt_neox", ("--finetune-steps", "2"), "transformers backend evaluates only"),
        ("gptj", ("--encoding", "yarn", "--factor", "2"), "gptj builds its RoPE without rope_parameters"),
    ],
)
def test_what_a_backend_cannot_do_is_one_line(tmp_path, folders, family, extra, message, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    output = run_cli(folders[family], make_corpus(tmp_path / "corpus"), tmp_path / "out", *extra, code=2)
    assert message in output and "Traceback" not in output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--encoding", "alibi"), "uses RoPE: --encoding must be rope or a RoPE scaling, not alibi"),
        (("--encoding", "ssmax"), "ssmax learns parameters of its own in training"),
        (("--encoding", "pi", "--factor", "0.5"), "--factor is s = L'/L, a finite number ≥ 1"),
        (("--encoding", "longrope", "--encoding-option", "long_factor=1,2"), "long factors: need 4 (head_dim/2)"),
        (("--encoding", "yarn", "--encoding-option", "beta_fast=-1"), "beta_fast must be > 0"),
    ],
)
def test_an_encoding_a_checkpoint_cannot_take_is_refused_before_its_weights_are_read(
    tmp_path, folders, extra, message, monkeypatch
):
    """The config decides it; a large checkpoint's weights take minutes to read."""
    import transformers

    def unread(*args, **kwargs):
        raise AssertionError("the weights were read")

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", unread)
    output = run_cli(folders["llama"], make_corpus(tmp_path / "corpus"), tmp_path / "out", *extra, code=2)
    assert message in output and "Traceback" not in output and "weights were read" not in output


def test_a_tokenizer_with_ids_past_the_embedding_is_one_line(tmp_path, monkeypatch):
    """A tokenizer of another model in the folder: refused at the first id fed past the embedding, in one line
    naming it, not an index error (tests/test_vocabulary.py: an unused extra id is no refusal)."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "small-vocab"
    model = checkpoint("llama", NATIVE_FAMILIES["llama"])
    model.resize_token_embeddings(200)
    model.save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    output = run_cli(folder, make_corpus(tmp_path / "corpus"), tmp_path / "out", code=2)
    assert "past the 200 rows of its embedding" in output and "Traceback" not in output


def test_a_checkpoint_that_needs_its_own_code_is_refused_naming_the_flag(tmp_path, folders, monkeypatch):
    from safetensors.torch import save_file

    folder = tmp_path / "custom"
    folder.mkdir()
    config = {
        "model_type": "my-own-lm",
        "auto_map": {"AutoConfig": "code.MyConfig", "AutoModelForCausalLM": "code.MyLM"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    save_file({"weight": torch.zeros(1)}, str(folder / "model.safetensors"))  # a folder with its weights
    (folder / "code.py").write_text("raise SystemExit('the checkpoint code ran')\n")
    output = run_cli(folder, make_corpus(tmp_path / "corpus"), tmp_path / "out", code=2)
    assert "--trust-remote-code" in output and "code ran" not in output


def test_a_config_missing_its_sizes_is_one_line_that_says_so(tmp_path, folders, monkeypatch):
    """Without hidden_size transformers builds its default width, and its error points to a report the run
    does not show: the line says what is wrong instead."""
    import shutil

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    shutil.copytree(folders["gpt_neox"], folder)
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    output = run_cli(folder, make_corpus(tmp_path / "corpus"), tmp_path / "out", code=2)
    assert "its weights have other shapes than its config gives" in output
    assert "above report" not in output and "Traceback" not in output


def test_a_report_keeps_one_encoding_on_two_models_or_backends_apart():
    """Rows of one encoding from two checkpoints, or one checkpoint through both backends, are not seeds of one
    cell: each gets its own label, so no table averages them."""
    from extrapolate.report.labels import encoding_of, label_variants
    from extrapolate.report.table import aggregate

    def rows(model, kernel, value):
        return {"encoding": "rope", "model": model, "kernel": kernel, "seed": 0, "train_len": 8, "eval_len": 8}, value

    table = pd.DataFrame(
        [
            {**r, "task": "perplexity", "metric": "ppl", "depth": None, "value": v, "status": "ok", "n": 1}
            for r, v in (
                rows("hub/gpt2", "transformers:sdpa", 30.0),
                rows("./ckpt/smollm2/", "sdpa", 20.0),
                rows("./ckpt/smollm2/", "transformers:sdpa", 20.5),
                rows("./ckpt/smollm2/", "vllm:cuda", 20.4),
            )
        ]
    )
    labels = list(label_variants(table)["encoding"])
    expected = ["rope @gpt2 (transformers)", "rope @smollm2", "rope @smollm2 (transformers)", "rope @smollm2 (vllm)"]
    assert labels == expected
    assert {encoding_of(label) for label in labels} == {"rope"}
    assert sorted(aggregate(label_variants(table))["n_seeds"]) == [1, 1, 1, 1]
    same = table.assign(model="small", kernel="sdpa")  # one model: the labels are the encoding's own name
    assert list(label_variants(same)["encoding"]) == ["rope"] * 4


def test_two_runs_of_one_encoding_on_one_cell_are_labelled_apart_and_others_are_not():
    """Runs that measured the same cell (one encoding, other options) get their run id in the label; runs of
    one encoding that measured different tasks (a perplexity run, then a passkey run) keep the plain name."""
    from extrapolate.report.labels import label_variants

    def row(run_id, task, metric):
        cell = {"encoding": "longrope", "model": "small", "kernel": "sdpa", "seed": 0, "eval_len": 64, "depth": None}
        return {**cell, "run_id": run_id, "task": task, "metric": metric, "protocol": "p", "value": 1.0}

    clash = pd.DataFrame([row("aaaaaa1", "perplexity", "ppl"), row("bbbbbb2", "perplexity", "ppl")])
    assert list(label_variants(clash)["encoding"]) == ["longrope #aaaaaa", "longrope #bbbbbb"]
    apart = pd.DataFrame([row("aaaaaa1", "perplexity", "ppl"), row("bbbbbb2", "passkey", "accuracy")])
    assert list(label_variants(apart)["encoding"]) == ["longrope", "longrope"]
