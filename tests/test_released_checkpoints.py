"""Checkpoints as released: a tiny random checkpoint of each family × RoPE type, built and saved by transformers
itself (offline, seconds), loads into the project's model with its own scaling and gives transformers' logits
past its original context; any scaling applied instead replaces the released one exactly as a replaced
`rope_parameters` does in transformers; what the project cannot compute is refused by name."""

import json
import math

import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")

from extrapolate.core.errors import UserError  # noqa: E402
from extrapolate.data.pretrained import from_hf_model  # noqa: E402
from extrapolate.data.rope_config import hf_rope_parameters, released_rope  # noqa: E402
from extrapolate.encodings import encoding_for  # noqa: E402
from tests.helpers import make_corpus  # noqa: E402

ORIGINAL = 32  # the original (pretraining) context L of every checkpoint here
VOCAB = 320  # the test tokenizer's 300 ids and room for its special tokens
LONGROPE = {"short_factor": [1.0, 1.1, 1.2, 1.05], "long_factor": [1.0, 2.5, 5.0, 7.5]}  # 4 pairs: head size 8
LLAMA3 = {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": ORIGINAL}
YARN = {"factor": 4.0, "original_max_position_embeddings": ORIGINAL}

# (family, its rope_parameters besides rope_theta, other config fields, the encoding it is released with)
RELEASED = [
    ("llama", {"rope_type": "default"}, {}, "rope"),
    ("llama", {"rope_type": "linear", "factor": 4.0}, {}, "pi"),
    ("llama", {"rope_type": "dynamic", "factor": 4.0}, {}, "dynamic-ntk"),
    ("llama", {"rope_type": "llama3", **LLAMA3}, {}, "llama3"),
    ("llama", {"rope_type": "yarn", **YARN, "beta_fast": 16.0, "beta_slow": 2.0}, {}, "yarn"),
    ("llama", {"rope_type": "yarn", **YARN, "mscale": 0.707, "mscale_all_dim": 0.707}, {}, "yarn"),
    ("qwen2", {"rope_type": "yarn", **YARN}, {}, "yarn"),
    ("qwen3", {"rope_type": "default"}, {"head_dim": 16}, "rope"),  # heads 16 wide in a width of 32
    ("qwen3", {"rope_type": "yarn", **YARN}, {"head_dim": 16}, "yarn"),
    ("mistral", {"rope_type": "llama3", **LLAMA3}, {"sliding_window": None}, "llama3"),
    # a sliding window in every layer, under the released scaling: keys 16 or more tokens back are not seen
    ("mistral", {"rope_type": "default"}, {"sliding_window": 16}, "rope"),
    (
        "qwen2",
        {"rope_type": "yarn", **YARN},
        {"use_sliding_window": True, "sliding_window": 16, "max_window_layers": 0},
        "yarn",
    ),
    # Phi-3's long-context form: no factor (max_position_embeddings / original), L outside rope_parameters
    ("phi3", {"rope_type": "longrope", **LONGROPE}, {"original_max_position_embeddings": ORIGINAL}, "longrope"),
]
IDS = [
    f"{family}-{params['rope_type']}"
    + ("-mscale" if "mscale" in params else "")
    + ("-window" if "sliding_window" in extra else "")
    for family, params, extra, _ in RELEASED
]


def checkpoint(family: str, rope: dict, extra: dict, seed: int = 0, released: int = 4 * ORIGINAL):
    """A random checkpoint of `family` with RoPE `rope`, released for `released` tokens, weights large enough
    that positions matter in the logits."""
    config_class = transformers.AutoConfig.for_model(family).__class__
    model_class = transformers.AutoModelForCausalLM._model_mapping[config_class]
    fields = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=released,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        rope_parameters={"rope_theta": 500.0, **rope},
        attn_implementation="eager",
    )
    if family == "phi3":
        fields.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # Phi-3's own ids are past a vocab of 300
    torch.manual_seed(seed)
    model = model_class(config_class(**fields, **extra))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3) if p.dim() > 1 else torch.nn.init.normal_(p, mean=1.0, std=0.2)
    return model.eval()


def logits(model, tokens):
    with torch.no_grad():
        out = model(tokens)
    return getattr(out, "logits", out)


@pytest.mark.parametrize("family,rope,extra,encoding", RELEASED, ids=IDS)
def test_a_released_checkpoint_computes_what_transformers_computes_past_its_context(family, rope, extra, encoding):
    theirs = checkpoint(family, rope, extra)
    released = released_rope(theirs.config)
    # L: original_max_position_embeddings where the checkpoint names one, else the context it is released for
    named = "original_max_position_embeddings" in {**rope, **extra}
    assert released.encoding == encoding and released.original_len == (ORIGINAL if named else 4 * ORIGINAL)
    assert released.released_len == 4 * ORIGINAL
    ours = from_hf_model(theirs)
    tokens = torch.randint(0, VOCAB, (2, 5 * ORIGINAL))  # past L and past the released context
    expected = logits(theirs, tokens)
    assert expected.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    assert torch.allclose(logits(ours, tokens), expected, atol=1e-4, rtol=0)


def test_a_factor_left_out_is_the_released_context_over_the_original():
    phi = released_rope(checkpoint("phi3", {"rope_type": "longrope", **LONGROPE}, RELEASED[-1][2]).config)
    assert phi.factor == 4.0 and dict(phi.options) == LONGROPE
    llama3 = released_rope(checkpoint("llama", {"rope_type": "llama3", **LLAMA3}, {}).config)
    assert llama3.factor == 4.0 and dict(llama3.options) == {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    assert released_rope(checkpoint("llama", {"rope_type": "default"}, {}).config).factor is None


def test_mscale_becomes_the_attention_factor_transformers_derives_from_it():
    params = {"rope_type": "yarn", **YARN, "mscale": 1.0, "mscale_all_dim": 0.5}
    released = released_rope(checkpoint("llama", params, {}).config)
    expected = (0.1 * 1.0 * math.log(4.0) + 1) / (0.1 * 0.5 * math.log(4.0) + 1)
    assert dict(released.options)["attention_factor"] == pytest.approx(expected, rel=1e-12)


SCALINGS = [("rope", 1.0), ("pi", 4.0), ("dynamic-ntk", 4.0), ("ntk", 4.0), ("yarn", 4.0), ("llama3", 8.0)]


@pytest.mark.parametrize(
    "family,rope,extra",
    [RELEASED[3][:3], RELEASED[8][:3], RELEASED[10][:3]],
    ids=["llama3", "qwen3-yarn", "mistral-window"],
)
@pytest.mark.parametrize("encoding,factor", SCALINGS, ids=[name for name, _ in SCALINGS])
def test_a_scaling_applied_replaces_the_released_one(family, rope, extra, encoding, factor):
    """The factor counts from the original context L, as transformers reads a replaced rope_parameters."""
    theirs = checkpoint(family, rope, extra)
    ours = from_hf_model(theirs)
    config = ours.config
    ours.set_encoding(encoding_for(config, encoding, factor=factor, original_len=ORIGINAL))
    replaced = hf_rope_parameters(encoding, config.rope_base, factor, ORIGINAL, head_dim=config.head_dim)
    # transformers' dynamic NTK counts from max_position_embeddings, the other types from the L they are given:
    # a replaced dynamic scaling is written with max_position_embeddings = L (as `extrapolate export` writes it)
    reference = checkpoint(family, replaced, extra, released=ORIGINAL if encoding == "dynamic-ntk" else 4 * ORIGINAL)
    reference.load_state_dict(theirs.state_dict())
    tokens = torch.randint(0, VOCAB, (1, 3 * ORIGINAL))
    assert torch.allclose(logits(ours, tokens), logits(reference, tokens), atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "family,rope,extra,message",
    [
        (
            "qwen2",
            {"rope_type": "default"},
            {"use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1},
            "mixes layers with a sliding window of 16",
        ),
        ("llama", {"rope_type": "default"}, {"attention_bias": True}, "attention_bias"),
        ("llama", {"rope_type": "default"}, {"hidden_act": "gelu"}, "activation is 'gelu'"),
    ],
    ids=["mixed-windows", "attention-bias", "activation"],
)
def test_what_the_project_cannot_compute_is_refused_by_name(family, rope, extra, message):
    with pytest.raises(UserError, match=message):
        from_hf_model(checkpoint(family, rope, extra))


# ---- through the command line


@pytest.fixture(scope="module")
def llama3_folder(tmp_path_factory):
    """A Llama 3.x-shaped checkpoint (llama3 RoPE, s = 4 from L = 32) with a tokenizer, as transformers saves it."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("llama3")
    checkpoint("llama", {"rope_type": "llama3", **LLAMA3}, {}).save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    return folder


def run_cli(folder, corpus, out, *extra):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    args = ["run", "--model", str(folder), "--corpus", str(corpus), "--eval-lens", "32,96", "--eval-tokens", "96"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "results.csv"), json.loads((out / "run.json").read_text())


def test_run_without_an_encoding_evaluates_the_checkpoint_as_released(tmp_path, llama3_folder, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    table, _ = run_cli(llama3_folder, corpus, tmp_path / "released")
    assert set(table.encoding) == {"llama3"} and set(table.factor) == {4.0} and set(table.train_len) == {ORIGINAL}
    explicit, _ = run_cli(
        llama3_folder,
        corpus,
        tmp_path / "explicit",
        *("--encoding", "llama3", "--factor", "4"),
        *("--encoding-option", "low_freq_factor=1", "--encoding-option", "high_freq_factor=4"),
    )
    assert list(explicit.run_id) == list(table.run_id)  # as released is that scaling, named: the same cell


def test_an_extension_replaces_the_released_scaling_from_the_original_context(tmp_path, llama3_folder, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    table, _ = run_cli(llama3_folder, corpus, tmp_path / "yarn", "--encoding", "yarn", "--factor", "2")
    assert set(table.encoding) == {"yarn"} and set(table.factor) == {2.0} and set(table.train_len) == {ORIGINAL}
    released, _ = run_cli(llama3_folder, corpus, tmp_path / "released")
    ppl = table[table.metric == "ppl"].set_index("eval_len").value
    assert not ppl.equals(released[released.metric == "ppl"].set_index("eval_len").value)


# ---- BOS as the field puts it


@pytest.fixture(scope="module")
def bos_folder(tmp_path_factory):
    """A plain-RoPE checkpoint whose tokenizer puts a BOS first by default (as Llama's does)."""
    from tokenizers import processors

    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("bos")
    checkpoint("llama", {"rope_type": "default"}, {}, released=ORIGINAL).save_pretrained(folder)
    tokenizer = load_tokenizer("bpe:300", small_corpus()).to_transformers()
    tokenizer.add_special_tokens({"bos_token": "<s>"})
    bos = tokenizer.bos_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", bos)]
    )
    tokenizer.save_pretrained(folder)
    return folder


def test_bos_auto_follows_the_tokenizer_and_is_recorded_in_the_protocol(tmp_path, bos_folder, monkeypatch):
    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    auto, run = run_cli(bos_folder, corpus, tmp_path / "auto", "--tasks", "perplexity,passkey", "--eval-lens", "96")
    assert run["request"]["bos"] == "always"
    protocols = set(auto.protocol)  # the perplexity protocol and the retrieval task's identity, each marked
    assert "full-window+bos" in protocols and len(protocols) == 2 and all(p.endswith("+bos") for p in protocols)
    never, _ = run_cli(bos_folder, corpus, tmp_path / "never", "--tasks", "perplexity", "--bos", "never")
    assert set(never.protocol) == {"full-window"}
    with_bos = auto[auto.metric == "nll"].set_index("eval_len").value
    without = never[never.metric == "nll"].set_index("eval_len").value
    assert with_bos[96] != without[96] and set(auto.run_id).isdisjoint(set(never.run_id))


def test_a_tokenizer_without_bos_keeps_its_run_ids_and_refuses_always(tmp_path, llama3_folder, monkeypatch):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    auto, run = run_cli(llama3_folder, corpus, tmp_path / "auto")
    never, _ = run_cli(llama3_folder, corpus, tmp_path / "never", "--bos", "never")
    assert run["request"]["bos"] == "never" and list(auto.run_id) == list(never.run_id)
    assert set(auto.protocol) == {"full-window"}
    args = ["run", "--model", str(llama3_folder), "--corpus", str(corpus), "--bos", "always"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "always")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "has no BOS token" in lines[0]


# ---- export: a checkpoint stretched here, as transformers loads it


@pytest.mark.parametrize(
    "extra",
    [(), ("--encoding", "yarn", "--factor", "2"), ("--encoding", "dynamic-ntk", "--factor", "2")],
    ids=["as-released", "yarn", "dynamic-ntk"],
)
def test_a_stretched_checkpoint_exports_to_what_transformers_loads_with_the_same_logits(
    tmp_path, llama3_folder, monkeypatch, extra
):
    from typer.testing import CliRunner

    from extrapolate.backends.choice import load_pretrained
    from extrapolate.cli.app import app

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    _, run = run_cli(llama3_folder, make_corpus(tmp_path / "corpus"), tmp_path / "run", *extra)
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    ours = load_pretrained(str(llama3_folder)).model
    scaling = run["encoding"]
    options = {k: v for k, v in scaling.items() if k not in ("name", "base", "factor", "original_len")}
    ours.set_encoding(
        encoding_for(ours.config, scaling["name"], factor=scaling["factor"], original_len=ORIGINAL, options=options)
    )
    tokens = torch.randint(0, VOCAB, (1, 5 * ORIGINAL))
    assert torch.allclose(logits(exported, tokens), logits(ours, tokens), atol=1e-4, rtol=0)
    reloaded = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert (
        reloaded("the sky").input_ids == transformers.AutoTokenizer.from_pretrained(llama3_folder)("the sky").input_ids
    )


# ---- GGUF files: the scaling transformers' GGUF loader drops


def gguf_file(path, arch="llama", scaling=None, tensors=None):
    """A GGUF file holding RoPE metadata and factor tensors only (what `gguf_rope_parameters` reads)."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in (scaling or {}).items():
        if isinstance(value, str):
            writer.add_string(f"{arch}.rope.scaling.{key}", value)
        elif isinstance(value, int):
            writer.add_uint32(f"{arch}.rope.scaling.{key}", value)
        else:
            writer.add_float32(f"{arch}.rope.scaling.{key}", value)
    for name, values in (tensors or {}).items():
        writer.add_tensor(name, np.asarray(values, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_rope_freqs_compute_what_the_llama3_scaling_they_were_written_from_computes(tmp_path):
    """llama.cpp writes Llama 3.1's scaling as per-pair factors (`rope_freqs`: θ_j / factor_j); read back, the
    checkpoint gives transformers' llama3 logits."""
    pytest.importorskip("gguf")
    from extrapolate.data.gguf_rope import gguf_rope_parameters
    from extrapolate.encodings.frequencies import llama3, rope

    theirs = checkpoint("llama", {"rope_type": "llama3", **LLAMA3}, {})
    head_dim = theirs.config.head_dim
    plain, _ = rope(head_dim, 500.0, 1.0, ORIGINAL, ORIGINAL)
    scaled, _ = llama3(head_dim, 500.0, 4.0, ORIGINAL, ORIGINAL)
    path = gguf_file(tmp_path / "llama3.gguf", tensors={"rope_freqs.weight": (plain / scaled).tolist()})
    params = gguf_rope_parameters(path, 500.0, 4 * ORIGINAL)
    assert params["rope_type"] == "longrope" and params["attention_factor"] == 1.0
    as_read = checkpoint("llama", params, {})
    as_read.load_state_dict(theirs.state_dict())
    tokens = torch.randint(0, VOCAB, (1, 5 * ORIGINAL))
    assert torch.allclose(logits(from_hf_model(as_read), tokens), logits(theirs, tokens), atol=1e-4, rtol=0)


def test_gguf_scaling_keys_become_rope_parameters(tmp_path):
    pytest.importorskip("gguf")
    from extrapolate.data.gguf_rope import gguf_rope_parameters

    yarn = {"type": "yarn", "factor": 4.0, "original_context_length": 32, "yarn_beta_fast": 16.0}
    assert gguf_rope_parameters(gguf_file(tmp_path / "yarn.gguf", scaling=yarn), 500.0, 128) == {
        "rope_type": "yarn",
        "rope_theta": 500.0,
        "factor": 4.0,
        "original_max_position_embeddings": 32,
        "beta_fast": 16.0,
    }
    linear = gguf_file(tmp_path / "linear.gguf", scaling={"type": "linear", "factor": 2.0})
    assert gguf_rope_parameters(linear, 500.0, 128) == {"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}
    assert gguf_rope_parameters(gguf_file(tmp_path / "plain.gguf"), 500.0, 128) is None
    odd = gguf_file(tmp_path / "odd.gguf", scaling={"type": "su"})
    with pytest.raises(UserError, match="'su' has no counterpart"):
        gguf_rope_parameters(odd, 500.0, 128)


def test_a_gguf_file_is_parsed_once_and_again_when_it_changes(tmp_path, monkeypatch):
    """One load reads a file's header several times (checked, its RoPE, the config): parsed once; a file
    written again at the same path is parsed again, never answered from the old parse."""
    gguf = pytest.importorskip("gguf")
    from extrapolate.data import gguf_rope

    parses = []
    real = gguf.GGUFReader
    monkeypatch.setattr(gguf, "GGUFReader", lambda path: parses.append(path) or real(path))
    path = gguf_file(tmp_path / "model.gguf", scaling={"type": "linear", "factor": 2.0})
    assert gguf_rope.gguf_rope_parameters(path, 500.0, 128)["factor"] == 2.0
    assert gguf_rope.gguf_rope_parameters(path, 500.0, 128)["factor"] == 2.0
    assert len(parses) == 1
    gguf_file(path, scaling={"type": "yarn", "factor": 4.0, "original_context_length": 32})
    assert gguf_rope.gguf_rope_parameters(path, 500.0, 128)["rope_type"] == "yarn"
    assert len(parses) == 2


# ---- instruct checkpoints: prompts in the chat template

CHAT = (
    "{% for m in messages %}<|user|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    """A checkpoint whose tokenizer has a chat template (an instruct checkpoint's)."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("chat")
    checkpoint("llama", {"rope_type": "default"}, {}, released=ORIGINAL).save_pretrained(folder)
    tokenizer = load_tokenizer("bpe:300", small_corpus()).to_transformers()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|end|>", "<|assistant|>"]})
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(folder)
    return folder


def test_a_chat_prompt_is_the_user_turn_then_the_assistant_start_and_keeps_its_length(chat_folder):
    from extrapolate.data.pretrained import HFTokenizer
    from extrapolate.tasks.files import load_task
    from extrapolate.tasks.prompt import PromptBuilder

    tokenizer = HFTokenizer(transformers.AutoTokenizer.from_pretrained(chat_folder), "chat")
    head, tail = tokenizer.chat_parts()
    assert tokenizer.decode(head) == "<|user|>" and tokenizer.decode(tail) == "<|end|><|assistant|>"
    builder = PromptBuilder(load_task("passkey"), tokenizer, chat=(head, tail))
    plain = PromptBuilder(load_task("passkey"), tokenizer)
    for depth in (0.0, 0.5, 1.0):
        prompt, without = builder.trial(600, depth, 0), plain.trial(600, depth, 0)
        assert len(prompt.ids) == 600 and prompt.ids[: len(head)] == head and prompt.ids[-len(tail) :] == tail
        assert prompt.key == without.key
        question = tokenizer.encode(" " + load_task("passkey").question)
        assert prompt.ids[-len(tail) - len(question) : -len(tail)] == question  # the question ends the user turn


def test_chat_template_auto_wraps_where_a_template_exists_and_is_recorded(tmp_path, chat_folder, monkeypatch):
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    lengths = ("--tasks", "passkey", "--eval-lens", "256")
    wrapped, run = run_cli(chat_folder, corpus, tmp_path / "auto", *lengths, "--chat-template", "auto")
    plain, _ = run_cli(chat_folder, corpus, tmp_path / "none", *lengths)
    assert run["request"]["chat_template"] == "template"
    assert all(p.endswith("+chat") for p in wrapped.protocol) and not any("+chat" in p for p in plain.protocol)
    assert set(wrapped.run_id).isdisjoint(set(plain.run_id))
    args = ["run", "--model", str(chat_folder), "--corpus", str(corpus), *lengths]
    result = CliRunner().invoke(app, [*args, "--chat-template", "nonsense", "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2 and "--chat-template" in result.output


# ---- sliding windows in the kernels


@pytest.mark.parametrize("window", [1, 5, 16, 200])
@pytest.mark.parametrize("cached", [0, 24])
def test_a_sliding_window_equals_the_reference_in_blocks_and_from_a_cache(window, cached):
    """The blocked kernel skips the keys a whole block cannot see and masks the rest: the same output as the full
    score matrix, with several blocks, grouped-query heads and queries continuing a cache."""
    from extrapolate.encodings import build_encoding
    from extrapolate.encodings.window import SlidingWindow
    from extrapolate.kernels.attention import blocked_attention, causal_attention, reference_attention

    torch.manual_seed(window)
    rope = build_encoding("rope", d_model=32, n_heads=4, head_dim=8, max_len=64)
    windowed = SlidingWindow(rope, window)
    q = torch.randn(2, 4, 40, 8)
    k, v = torch.randn(2, 2, 40 + cached, 8), torch.randn(2, 2, 40 + cached, 8)
    expected = reference_attention(q, k, v, windowed)
    assert torch.allclose(blocked_attention(q, k, v, windowed, block_elements=2 * 4 * 64 * 8), expected, atol=1e-5)
    assert torch.allclose(causal_attention(q, k, v, windowed), expected, atol=1e-5)
    if window < 40 + cached:  # the window changes the output: keys out of it were really dropped
        assert not torch.allclose(reference_attention(q, k, v, rope), expected, atol=1e-3)
