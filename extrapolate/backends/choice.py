"""Which backend computes a checkpoint, and the checkpoint loaded into it with its released encoding."""

from __future__ import annotations

from extrapolate.backends import BACKENDS
from extrapolate.core.errors import UserError
from extrapolate.core.registry import require_known

# released families whose positions are not RoPE, by transformers' model_type: what each is in the project's
# terms (a learned table of absolute positions, or ALiBi's linear biases)
LEARNED_POSITIONS = ("gpt2", "gpt_bigcode", "gpt_neo", "opt", "biogpt")
ALIBI = ("bloom", "mpt")


def chosen_backend(requested: str, hf_config) -> str:
    """native or transformers: `auto` takes the native model where it computes the family, transformers
    otherwise; `native` for a family it does not compute is refused with the reason and the way out."""
    from extrapolate.data.families import config_from_hf

    require_known("--backend choice", requested, BACKENDS)
    if requested in ("transformers", "vllm"):
        return requested
    try:
        config_from_hf(hf_config)
    except UserError as exc:
        if requested == "native":
            raise UserError(f"{exc} (--backend transformers computes it with transformers' own model)") from None
        return "transformers"
    return "native"


def released_kind(hf_model) -> str:
    """rope, learned or alibi: how the checkpoint encodes positions, refused by name where none of these."""
    from extrapolate.backends.hf import rotary_modules

    config = hf_model.config
    family = getattr(config, "model_type", "?")
    if family in ALIBI or (family == "falcon" and getattr(config, "alibi", False)):
        return "alibi"
    if family in LEARNED_POSITIONS:
        return "learned"
    if rotary_modules(hf_model):
        return "rope"
    raise UserError(
        f"{family!r} checkpoints encode positions in a way the project does not name (it knows RoPE, "
        f"{', '.join(LEARNED_POSITIONS)} as learned tables and {', '.join(ALIBI)} as ALiBi)"
    )


def stated_context(config) -> int | None:
    """The context a checkpoint's config states (None where it states none: BLOOM's)."""
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def as_released(hf_model):
    """(kind, ReleasedRope, AsReleased, sizes) of transformers' model as released: its RoPE where it rotates,
    else its learned table or ALiBi; `sizes` the project's ModelConfig of it."""
    from extrapolate.backends.hf import AsReleased, model_config
    from extrapolate.data.families import rope_parameters
    from extrapolate.data.rope_config import ReleasedRope, released_rope

    config = hf_model.config
    kind = released_kind(hf_model)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if kind == "rope":
        released = released_rope(config)
        params = rope_parameters(config)
        base = float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
        rotated = getattr(config, "rotary_dim", None) or int(head_dim * float(params.get("partial_rotary_factor", 1.0)))
        encoding = AsReleased(released.encoding, "rotary", released.original_len)
    else:
        context = stated_context(config)
        released = ReleasedRope(kind, None, (), context, context)
        base, rotated = 10000.0, None
        encoding = AsReleased(kind, "absolute" if kind == "learned" else "bias", context)
    return kind, released, encoding, model_config(config, kind, released.original_len, base, rotated)


def transformers_model(hf_model):
    """(the adapter, its ReleasedRope) of transformers' model, evaluated as released (`as_released`)."""
    from extrapolate.backends.hf import TransformersLM, check_head

    kind, released, encoding, sizes = as_released(hf_model)
    limit = released.released_len if kind == "learned" else None
    model = TransformersLM(hf_model, sizes, encoding, position_limit=limit)
    check_head(model)
    return model, released


def vllm_model(spec: str, hf_model, tokenizer, trust_remote_code: bool = False):
    """(the VLLMGenerator of a loaded checkpoint, its ReleasedRope): its sizes and released encoding read from
    transformers' model (`as_released`), its weights handed to vLLM through `engine_folder`."""
    from extrapolate.backends.vllm import VLLMGenerator, engine_folder, require_vllm

    require_vllm()
    _, released, encoding, sizes = as_released(hf_model)
    params = sum(p.numel() for p in hf_model.parameters())
    folder = engine_folder(spec, hf_model, tokenizer)
    return VLLMGenerator(folder, sizes, encoding, params, released.released_len, trust_remote_code), released


def load_pretrained(spec: str, backend: str = "auto", trust_remote_code: bool = False):
    """`spec` (a known name, a folder, a .gguf file or a hub id: `data.pretrained.load_transformers`) as a
    PretrainedModel in the backend that computes it, with its tokenizer and its encoding as released."""
    from extrapolate.data.pretrained import HFTokenizer, PretrainedModel, from_hf_model, load_transformers
    from extrapolate.data.rope_config import released_rope

    if backend == "vllm":
        from extrapolate.backends.vllm import require_vllm

        require_vllm()  # before the weights are read
    hf_model, tokenizer = load_transformers(spec, trust_remote_code)
    chosen = chosen_backend(backend, hf_model.config)
    if chosen == "vllm":
        model, released = vllm_model(spec, hf_model, tokenizer, trust_remote_code)
    elif chosen == "native":
        model, released = from_hf_model(hf_model), released_rope(hf_model.config)
    else:
        model, released = transformers_model(hf_model)
    # every id the run feeds must have a row: one past it would end the run in an index error mid-way
    rows = getattr(hf_model.get_input_embeddings(), "num_embeddings", None)
    return PretrainedModel(model, HFTokenizer(tokenizer, spec, rows), spec, released.original_len, released, chosen)
