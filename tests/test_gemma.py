"""Gemma checkpoints in the project's model: tiny random Gemma 1, 2 and 3 checkpoints built by transformers give
transformers' logits past the sliding window and past their released context, as released and with a scaling
applied to the full layers (the sliding layers keep their own local RoPE), and from the KV cache; Gemma 2's
attention-logit soft-capping through the capped kernels, forward and backward; what the project's attention
does not compute (bidirectional attention) is refused by name."""

import contextlib
import json

import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.gemma3")

from extrapolate.core.config import canonical_json, config_hash, model_config_from_dict  # noqa: E402
from extrapolate.core.errors import UserError  # noqa: E402
from extrapolate.data.families import config_from_hf  # noqa: E402
from extrapolate.data.pretrained import from_hf_model  # noqa: E402
from extrapolate.data.rope_config import hf_rope_parameters, released_rope  # noqa: E402
from extrapolate.encodings import encoding_for  # noqa: E402
from extrapolate.kernels.attention import causal_attention  # noqa: E402
from tests.helpers import make_corpus  # noqa: E402

ORIGINAL = 32  # the original (pretraining) context L of every checkpoint here
WINDOW = 16  # the sliding layers' window, shorter than every length tested
LOCAL_BASE = 50.0  # Gemma 3's sliding layers rotate with their own base
VOCAB = 320
# sliding layers before, between and after the full ones
LAYERS = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]
YARN = {"factor": 4.0, "original_max_position_embeddings": ORIGINAL}


@contextlib.contextmanager
def transformers_can_build():
    """Early transformers 5 releases fail to validate a scaled RoPE set per layer type (Gemma 3's), reading
    original_max_position_embeddings from the outer dict: there the reference cannot be built, so the test
    skips, naming the release."""
    try:
        yield
    except KeyError as exc:
        pytest.skip(f"transformers {transformers.__version__} cannot build this Gemma 3 config (KeyError {exc})")


def checkpoint(family: str, rope: dict, extra: dict | None = None, seed: int = 0, released: int = 4 * ORIGINAL):
    """A random Gemma checkpoint of `family`, `rope` its full layers' RoPE besides rope_theta (every layer's for
    Gemma 1 and 2), released for `released` tokens; norm weights (stored as w, scaling by 1 + w) and the
    attention scale (query_pre_attn_scalar 24, not the head size 16) far enough from the defaults to matter."""
    config_class = transformers.AutoConfig.for_model(family).__class__
    model_class = transformers.AutoModelForCausalLM._model_mapping[config_class]
    full = {"rope_theta": 500.0, **rope}
    fields = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=len(LAYERS),
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=released,
        rms_norm_eps=1e-6,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
        attn_implementation="eager",
    )
    if family == "gemma3_text":
        local = {"rope_type": "default", "rope_theta": LOCAL_BASE}
        fields.update(rope_parameters={"full_attention": full, "sliding_attention": local})
    else:
        fields.update(rope_parameters=full)
    if family != "gemma":
        fields.update(layer_types=LAYERS, sliding_window=WINDOW, query_pre_attn_scalar=24)
    if family == "gemma2":  # the final soft-capping small enough to cap these logits
        fields.update(attn_logit_softcapping=None, final_logit_softcapping=3.0)
    torch.manual_seed(seed)
    with transformers_can_build():
        config = config_class(**{**fields, **(extra or {})})
    model = model_class(config)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return model.eval()


def logits(model, tokens):
    with torch.no_grad():
        out = model(tokens)
    return getattr(out, "logits", out)


# (family, its full layers' rope_parameters besides rope_theta, the encoding it is released with)
RELEASED = [
    ("gemma3_text", {"rope_type": "default"}, "rope"),
    ("gemma3_text", {"rope_type": "linear", "factor": 4.0}, "pi"),  # Gemma 3 4B and up: linear s = 8 on the full
    ("gemma3_text", {"rope_type": "yarn", **YARN}, "yarn"),
    ("gemma2", {"rope_type": "default"}, "rope"),
    ("gemma", {"rope_type": "default"}, "rope"),
]


@pytest.mark.parametrize(
    "family,rope,encoding", RELEASED, ids=[f"{family}-{rope['rope_type']}" for family, rope, _ in RELEASED]
)
def test_a_gemma_checkpoint_computes_what_transformers_computes_past_its_window_and_context(family, rope, encoding):
    theirs = checkpoint(family, rope)
    assert released_rope(theirs.config).encoding == encoding
    ours = from_hf_model(theirs)
    tokens = torch.randint(0, VOCAB, (2, 5 * ORIGINAL))  # past the window, L and the released context
    expected = logits(theirs, tokens)
    assert expected.abs().max() > 1  # a scale at which 1e-4 is a tight bound
    assert torch.allclose(logits(ours, tokens), expected, atol=1e-4, rtol=0)


def test_gemma3_is_read_as_its_layers_compute():
    config = from_hf_model(checkpoint("gemma3_text", {"rope_type": "linear", "factor": 4.0})).config
    assert config.layer_types == ("sliding", "full", "sliding", "sliding", "full")
    assert (config.sliding_window, config.sliding_rope_base, config.rope_base) == (WINDOW, LOCAL_BASE, 500.0)
    assert (config.mlp, config.norm_unit_offset, config.post_norms, config.qk_norm) == ("geglu", True, True, True)
    assert config.attention_scalar == 24.0 and config.embed_multiplier == pytest.approx(32**0.5)
    assert config.tie_embeddings and config.logit_softcap is None
    # the config as JSON (a fine-tune's checkpoint) reads back as the same model
    assert model_config_from_dict(json.loads(canonical_json(config))) == config


SCALINGS = [("rope", 1.0), ("pi", 4.0), ("dynamic-ntk", 4.0), ("ntk", 4.0), ("yarn", 4.0), ("llama3", 8.0)]


@pytest.mark.parametrize("family", ["gemma3_text", "gemma2"])
@pytest.mark.parametrize("encoding,factor", SCALINGS, ids=[name for name, _ in SCALINGS])
def test_a_scaling_applied_replaces_the_full_layers_rope(family, encoding, factor):
    """The scaling replaces Gemma 3's full layers' RoPE (its sliding layers keep their local one) and Gemma 2's
    one RoPE, as a replaced `rope_parameters` does in transformers; the factor counts from L."""
    theirs = checkpoint(family, {"rope_type": "linear", "factor": 4.0})
    ours = from_hf_model(theirs)
    config = ours.config
    ours.set_encoding(encoding_for(config, encoding, factor=factor, original_len=ORIGINAL))
    replaced = hf_rope_parameters(encoding, config.rope_base, factor, ORIGINAL, head_dim=config.head_dim)
    # transformers' dynamic NTK counts from max_position_embeddings: written as L, as `extrapolate export` does
    reference = checkpoint(family, replaced, released=ORIGINAL if encoding == "dynamic-ntk" else 4 * ORIGINAL)
    reference.load_state_dict(theirs.state_dict())
    tokens = torch.randint(0, VOCAB, (1, 3 * ORIGINAL))
    assert torch.allclose(logits(ours, tokens), logits(reference, tokens), atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", ["gemma3_text", "gemma2"])
def test_a_kv_cache_continuation_equals_the_full_forward(family):
    """Each layer caches the keys its own RoPE rotated; a prompt past the window, a continuation and single
    decoding steps from the cache give the hidden states of one full forward."""
    ours = from_hf_model(checkpoint(family, {"rope_type": "yarn", **YARN}))
    tokens = torch.randint(0, VOCAB, (1, 3 * ORIGINAL))
    with torch.no_grad():
        full = ours.hidden_states(tokens)  # (1, T, D)
        cache = ours.new_cache()
        pieces = [ours.hidden_states(tokens[:, :70], cache=cache), ours.hidden_states(tokens[:, 70:90], cache=cache)]
        pieces += [ours.hidden_states(tokens[:, i : i + 1], cache=cache) for i in range(90, tokens.shape[1])]
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-4, rtol=0)


def test_the_recorded_kernel_names_what_the_sliding_and_full_layers_ran(monkeypatch):
    from extrapolate.kernels.attention import recorded_kernel
    from tests.test_attention import spy_kernels

    ours = from_hf_model(checkpoint("gemma3_text", {"rope_type": "default"}))
    ran = spy_kernels(monkeypatch)
    with torch.no_grad():
        ours(torch.randint(0, VOCAB, (1, 64)))
    recorded = recorded_kernel(ours.attention_encodings(), "auto", "cpu", torch.float32, [(64, 64)])
    assert recorded == "+".join(dict.fromkeys(ran)) == "blocked+sdpa"  # the windowed layers first, as they run


@pytest.mark.parametrize(
    "family,rope,extra,message",
    [
        ("gemma2", {"rope_type": "default"}, {"hidden_activation": "gelu"}, "activation is 'gelu'"),
        ("gemma3_text", {"rope_type": "default"}, {"use_bidirectional_attention": True}, "attends bidirectionally"),
    ],
    ids=["activation", "bidirectional"],
)
def test_what_the_project_cannot_compute_is_refused_by_name(family, rope, extra, message):
    with pytest.raises(UserError, match=message):
        from_hf_model(checkpoint(family, rope, extra))


def test_a_scaled_local_rope_and_the_multimodal_gemma3_are_refused_by_name():
    hf = checkpoint("gemma3_text", {"rope_type": "default"}).config
    hf.rope_parameters["sliding_attention"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": LOCAL_BASE}
    with pytest.raises(UserError, match="sliding layers rotate with RoPE 'linear'"):
        config_from_hf(hf)
    with pytest.raises(UserError, match="'gemma3' checkpoints are not computed here"):
        config_from_hf(transformers.Gemma3Config())


# ---- through the command line: evaluated with a scaling, recorded, exported


@pytest.fixture(scope="module")
def gemma3_folder(tmp_path_factory):
    """A Gemma 3-shaped checkpoint (linear s = 4 on the full layers) with a tokenizer, as transformers saves it."""
    from extrapolate.data.tokenizers import load_tokenizer
    from tests.test_tokenizers import small_corpus

    folder = tmp_path_factory.mktemp("gemma3")
    checkpoint("gemma3_text", {"rope_type": "linear", "factor": 4.0}).save_pretrained(folder)
    load_tokenizer("bpe:300", small_corpus()).to_transformers().save_pretrained(folder)
    return folder


def test_a_gemma3_run_records_both_kernels_and_exports_the_scaling_it_ran(tmp_path, gemma3_folder, monkeypatch):
    from typer.testing import CliRunner

    from extrapolate.backends.choice import load_pretrained
    from extrapolate.cli.app import app

    monkeypatch.setenv("EXTRAPOLATE_CACHE", str(tmp_path / "cache"))
    corpus = make_corpus(tmp_path / "corpus")
    args = [
        "run",
        "--model",
        str(gemma3_folder),
        "--corpus",
        str(corpus),
        "--eval-lens",
        "32,96",
        "--tasks",
        "perplexity",
    ]
    args += ["--eval-tokens", "96", "--encoding", "yarn", "--factor", "2", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(table.kernel) == {"blocked+sdpa"}  # the sliding layers' window is a bias: the blocked kernel
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    with transformers_can_build():
        exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert exported.config.rope_parameters["sliding_attention"]["rope_theta"] == LOCAL_BASE  # kept as it was
    ours = load_pretrained(str(gemma3_folder)).model
    scaling = json.loads((tmp_path / "run" / "run.json").read_text())["encoding"]
    ours.set_encoding(encoding_for(ours.config, "yarn", factor=scaling["factor"], original_len=scaling["original_len"]))
    tokens = torch.randint(0, VOCAB, (1, 5 * ORIGINAL))
    assert torch.allclose(logits(exported, tokens), logits(ours, tokens), atol=1e-4, rtol=0)


def test_an_unset_gemma_field_leaves_every_other_models_hash_alone():
    """Gemma's fields are set only for Gemma: a Llama checkpoint's config hashes as before they existed."""
    from tests.test_released_checkpoints import checkpoint as llama_checkpoint

    config = config_from_hf(llama_checkpoint("llama", {"rope_type": "default"}, {}).config)
    assert "layer_types" not in canonical_json(config) and "embed_multiplier" not in canonical_json(config)
    assert config_hash(config) == config_hash(model_config_from_dict(json.loads(canonical_json(config))))


# ---- Gemma 2's attention-logit soft-capping: the capped kernels, then the model

CAP = 50.0  # every Gemma 2 release's attn_logit_softcapping


def capped_encoding(name: str, cap: float, window: int | None):
    """`name` (4 heads of 16) with scores capped at `cap`, behind a sliding window of `window` tokens (as the
    model composes them); its ALiBi a bias, so the order of cap and bias shows."""
    from extrapolate.encodings import build_encoding
    from extrapolate.encodings.softcap import capped
    from extrapolate.encodings.window import windowed

    return windowed(capped(build_encoding(name, d_model=64, n_heads=4, head_dim=16, max_len=64), cap), window)


def attention_inputs(queries: int, keys: int, seed: int = 0):
    """q (2, 4, Tq, 16); k, v (2, 2, Tk, 16), grouped-query, Tk - Tq positions cached before the queries; q and k
    large enough that scores reach the cap (5 here) and capping changes the softmax."""
    torch.manual_seed(seed)
    q = 3 * torch.randn(2, 4, queries, 16)
    k, v = torch.randn(2, 2, 2, keys, 16).unbind(0)
    return q.requires_grad_(), (3 * k).requires_grad_(), v.requires_grad_()


@pytest.mark.parametrize("window", [None, 24], ids=["full", "window"])
@pytest.mark.parametrize("name", ["rope", "alibi"])
def test_the_capped_blocked_kernel_equals_the_capped_reference_forward_and_backward(name, window):
    """Several query blocks (16 rows each) continuing a cache of 30 positions, grouped-query heads, the keys
    past a window skipped: the capped blocked kernel gives the reference's output and gradients."""
    from extrapolate.kernels.attention import capped_blocked_attention

    encoding = capped_encoding(name, 5.0, window)
    q, k, v = attention_inputs(70, 100)
    expected = causal_attention(q, k, v, encoding, "reference")
    assert not torch.allclose(expected, causal_attention(q, k, v, capped_encoding(name, 1e6, window), "reference"))
    got = capped_blocked_attention(q, k, v, encoding, block_elements=2 * 4 * 16 * 100, backward=True)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    weights = torch.randn_like(expected)  # a loss whose gradient differs per output element
    for ours, theirs in zip(
        torch.autograd.grad((got * weights).sum(), (q, k, v)),
        torch.autograd.grad((expected * weights).sum(), (q, k, v)),
    ):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, 40], ids=["full", "window"])
def test_flex_caps_scores_as_the_reference_does(window):
    """flex_attention's score modification (run eagerly here, compiled on CUDA) caps, then adds the bias."""
    import warnings

    from extrapolate.kernels.attention import flex_attention_of

    encoding = capped_encoding("alibi", 5.0, window)
    q, k, v = (t.detach() for t in attention_inputs(200, 333))  # the CPU build of flex has no backward
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        got = flex_attention_of(q, k, v, encoding, compiled=False)
        torch.testing.assert_close(got, causal_attention(q, k, v, encoding, "reference"), atol=2e-6, rtol=0)


def test_capped_scores_plan_the_capped_kernels(monkeypatch):
    """Whatever is asked for, capped scores never reach a kernel that cannot cap them: flex where flex would run
    (CUDA, or asked for), the capped blocked kernel for everything else (the CPU, training on the CPU, a few
    queries, flex failed), the reference by name."""
    from extrapolate.kernels import attention
    from extrapolate.kernels.attention import attention_plan

    encoding = capped_encoding("rope", CAP, None)
    f32 = torch.float32

    def plan(requested, device, queries=256, keys=256, backward=False):
        return attention_plan(encoding, requested, device, f32, queries, keys, backward).name

    for requested in ("auto", "sdpa", "fused-bias", "blocked"):
        assert plan(requested, "cpu") == plan(requested, "cpu", backward=True) == "blocked-capped"
    assert plan("flex", "cpu") == "flex-capped" and plan("flex", "cpu", backward=True) == "blocked-capped"
    assert plan("auto", "cuda") == plan("auto", "cuda", backward=True) == "flex-capped"
    assert plan("auto", "cuda", queries=1, keys=4097) == "blocked-capped"  # decoding: no SDPA call caps
    assert plan("blocked", "cuda") == "blocked-capped" and plan("reference", "cuda") == "reference"
    monkeypatch.setattr(attention, "FLEX_STATUS", attention.FlexStatus(failed="no compiler"))
    assert plan("auto", "cuda") == "blocked-capped"


def capped_gemma2(rope: dict, released: int = 4 * ORIGINAL):
    return checkpoint("gemma2", rope, {"attn_logit_softcapping": CAP}, released=released)


def test_a_capped_gemma2_computes_what_transformers_computes_past_its_window_and_context(monkeypatch):
    from extrapolate.kernels import attention
    from extrapolate.kernels.attention import recorded_kernel

    theirs = capped_gemma2({"rope_type": "default"})
    ours = from_hf_model(theirs)
    assert ours.config.attention_softcap == CAP
    assert model_config_from_dict(json.loads(canonical_json(ours.config))) == ours.config
    uncapped = checkpoint("gemma2", {"rope_type": "default"})
    uncapped.load_state_dict(theirs.state_dict())
    tokens = torch.randint(0, VOCAB, (2, 5 * ORIGINAL))  # past the window, L and the released context
    expected = logits(theirs, tokens)
    assert (expected - logits(uncapped, tokens)).abs().max() > 1e-2  # the cap changes the logits
    ran = []
    capped_kernel = attention.capped_blocked_attention
    monkeypatch.setattr(attention, "capped_blocked_attention", lambda *args: ran.append(1) or capped_kernel(*args))
    assert torch.allclose(logits(ours, tokens), expected, atol=1e-4, rtol=0)
    assert len(ran) == len(LAYERS)  # every layer, sliding and full, ran the capped kernel
    shapes = [(5 * ORIGINAL, 5 * ORIGINAL)]
    assert recorded_kernel(ours.attention_encodings(), "auto", "cpu", torch.float32, shapes) == "blocked-capped"


def test_a_scaling_applied_to_a_capped_gemma2_keeps_the_cap():
    theirs = capped_gemma2({"rope_type": "default"})
    ours = from_hf_model(theirs)
    config = ours.config
    ours.set_encoding(encoding_for(config, "yarn", factor=4.0, original_len=ORIGINAL))
    assert [encoding.score_cap for encoding in ours.layer_encodings()] == [CAP] * len(LAYERS)
    reference = capped_gemma2(hf_rope_parameters("yarn", config.rope_base, 4.0, ORIGINAL, head_dim=config.head_dim))
    reference.load_state_dict(theirs.state_dict())
    tokens = torch.randint(0, VOCAB, (1, 5 * ORIGINAL))
    assert torch.allclose(logits(ours, tokens), logits(reference, tokens), atol=1e-4, rtol=0)


def test_a_capped_gemma2_continues_its_kv_cache_and_trains_with_transformers_gradients():
    """Decoding from the cache equals one full forward; a training loss's gradient (the tied embedding's,
    through every layer's capped attention) equals transformers'."""
    theirs = capped_gemma2({"rope_type": "default"})
    ours = from_hf_model(theirs)
    tokens = torch.randint(0, VOCAB, (1, 3 * ORIGINAL))
    with torch.no_grad():
        full = ours.hidden_states(tokens)  # (1, T, D)
        cache = ours.new_cache()
        pieces = [ours.hidden_states(tokens[:, :70], cache=cache)]
        pieces += [ours.hidden_states(tokens[:, i : i + 1], cache=cache) for i in range(70, tokens.shape[1])]
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-4, rtol=0)

    def embedding_gradient(model, weight):
        out = model(tokens)
        out = getattr(out, "logits", out)  # (1, T, V)
        loss = torch.nn.functional.cross_entropy(out[0, :-1], tokens[0, 1:])
        return torch.autograd.grad(loss, weight)[0]

    expected = embedding_gradient(theirs, theirs.model.embed_tokens.weight)
    assert expected.abs().max() > 1e-3
    torch.testing.assert_close(embedding_gradient(ours, ours.embed.weight), expected, atol=1e-5, rtol=1e-4)


def test_gemma3_ignores_its_attention_softcapping_as_transformers_does():
    config = from_hf_model(checkpoint("gemma3_text", {"rope_type": "default"}, {"attn_logit_softcapping": CAP})).config
    assert config.attention_softcap is None
