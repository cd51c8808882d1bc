"""The released families the project's model computes, read from a transformers config: which families, what
each adds to a Llama block, the sliding and full layers, the RoPE a config states per layer type; and the
inverse, a project model config as a transformers `LlamaConfig`. What the model would compute differently is
refused by name."""

from __future__ import annotations

from dataclasses import dataclass

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.core.identity import stored
from extrapolate.data.hf_extra import require_transformers


@dataclass(frozen=True)
class Family:
    """What a released family adds to a Llama block (RMSNorm, SwiGLU, RoPE), as the project's model computes it."""

    description: str
    gemma_block: bool = False  # GeGLU, RMSNorm as 1 + w, embeddings scaled by √width
    layer_typed: bool = False  # sliding and full layers mixed, four norms per block
    partial_rotary: bool = False  # its attention rotates a part of each head where the config says so
    qkv_bias: bool = False  # biases on the query, key and value projections
    qk_norm: bool = False  # RMSNorm of every query and key head


# The decoder-only families whose checkpoints the project's model computes exactly, by transformers'
# model_type: one table. Any other family is refused by name, never loaded as another model.
FAMILIES = {
    "llama": Family("Llama 1–3.x"),
    "mistral": Family("Mistral (without a sliding window)"),
    "qwen2": Family("Qwen2 / Qwen2.5 (query, key and value biases)", qkv_bias=True),
    "qwen3": Family("Qwen3 (RMSNorm of queries and keys, wider heads)", qk_norm=True),
    "phi3": Family("Phi-3 / Phi-3.5 (fused qkv and gate-up projections)", partial_rotary=True),
    "gemma": Family("Gemma 1 (GeGLU, RMSNorm as 1 + w, embeddings scaled by √width, tied head)", gemma_block=True),
    "gemma2": Family(
        "Gemma 2 (sliding and full layers, norms after attention and MLP, attention-logit and final-logit "
        "soft-capping)",
        gemma_block=True,
        layer_typed=True,
    ),
    "gemma3_text": Family(
        "Gemma 3 text (sliding layers with their own local RoPE between full layers, query/key norms)",
        gemma_block=True,
        layer_typed=True,
        qk_norm=True,
    ),
}


def family_of(hf) -> Family | None:
    """The table's entry for a config's model_type (None: a family the native model does not compute)."""
    return FAMILIES.get(getattr(hf, "model_type", "llama"))


def config_from_hf(hf) -> ModelConfig:
    """The project's model config for a Hugging Face config of one of FAMILIES; a checkpoint whose attention
    the project's model would compute differently (windowed and full layers mixed outside Gemma, biases it has
    no place for, an activation other than its gated MLP's) is refused rather than evaluated as another model.
    Its RoPE, scaled or not, is read by `released_rope`; the part of each head it rotates by `partial_rotation`."""
    family = getattr(hf, "model_type", "llama")
    if family not in FAMILIES:
        raise UserError(f"{family!r} checkpoints are not computed here; the families that load: {', '.join(FAMILIES)}")
    heads = hf.num_attention_heads
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // heads
    window = sliding_window(hf)
    for flag in ("attention_bias", "mlp_bias"):  # Llama's optional biases (o_proj and the MLP too)
        if getattr(hf, flag, False):
            raise UserError(f"checkpoints with {flag} are not supported (biases the project's model has no place for)")
    mlp = gated_mlp(hf, family)
    params = rope_parameters(hf)
    gemma = gemma_fields(hf, family, head_dim) if FAMILIES[family].gemma_block else {}
    return ModelConfig(
        vocab_size=hf.vocab_size,
        d_model=hf.hidden_size,
        n_layers=hf.num_hidden_layers,
        n_heads=heads,
        n_kv_heads=getattr(hf, "num_key_value_heads", None) or heads,
        d_ff=hf.intermediate_size,
        norm="rmsnorm",
        mlp=mlp,
        tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
        norm_eps=float(hf.rms_norm_eps),
        encoding="rope",
        rope_base=float(params.get("rope_theta", getattr(hf, "rope_theta", 10000.0))),
        max_len=int(original_context(hf)),
        qkv_bias=stored("qkv_bias", FAMILIES[family].qkv_bias),
        head_size=stored("head_size", head_dim if head_dim * heads != hf.hidden_size else None),
        qk_norm=stored("qk_norm", FAMILIES[family].qk_norm),
        sliding_window=window,
        rotary_dim=partial_rotation(hf, family, head_dim, params),
        **gemma,
    )


def partial_rotation(hf, family: str, head_dim: int, params: dict) -> int | None:
    """The features of each head the checkpoint's RoPE rotates, int(head_dim · partial_rotary_factor) as
    transformers computes it; None where it rotates the whole head. A partial rotation is refused in a family
    whose transformers attention rotates whole heads whatever the factor says, and where the part is not an
    even number of features (RoPE rotates pairs)."""
    fraction = float(params.get("partial_rotary_factor", getattr(hf, "partial_rotary_factor", None) or 1.0))
    rotated = int(head_dim * fraction)
    if rotated == head_dim:
        return None
    if not FAMILIES[family].partial_rotary:
        rotating = [name for name, entry in FAMILIES.items() if entry.partial_rotary]
        raise UserError(
            f"the checkpoint sets partial_rotary_factor {fraction:g}, which transformers' {family} attention does "
            f"not apply (only {', '.join(rotating)} rotates a part of each head)"
        )
    if rotated < 2 or rotated % 2:
        raise UserError(
            f"the checkpoint rotates {rotated} features of each head (partial_rotary_factor {fraction:g} of "
            f"{head_dim}); RoPE rotates pairs, an even number of at least 2"
        )
    return rotated


def gated_mlp(hf, family: str) -> str:
    """The project's gated MLP computing the checkpoint's: SwiGLU (silu) for the Llama-block families, GeGLU
    (tanh-approximated GELU, read where each Gemma's MLP reads it) for Gemma's; any other activation refused."""
    if not FAMILIES[family].gemma_block:
        activation = getattr(hf, "hidden_act", "silu")
        if activation != "silu":
            raise UserError(f"the checkpoint's MLP activation is {activation!r}; the project's SwiGLU computes silu")
        return "swiglu"
    activation = getattr(hf, "hidden_act" if family == "gemma" else "hidden_activation")
    if activation != "gelu_pytorch_tanh":
        raise UserError(
            f"the checkpoint's MLP activation is {activation!r}; the project's GeGLU computes gelu_pytorch_tanh"
        )
    return "geglu"


def gemma_fields(hf, family: str, head_dim: int) -> dict:
    """What a Gemma block adds to the config: embeddings scaled by √width, RMSNorm as 1 + w, and for Gemma 2
    and 3 the norms after attention and MLP, the attention scale 1/√query_pre_attn_scalar, the sliding and
    full layers with the sliding layers' own RoPE, the final-logit soft-capping and Gemma 2's attention-logit
    soft-capping (a tanh of every score, which the capped attention kernels compute). Bidirectional attention
    is refused: the project's attention is causal."""
    fields = {"embed_multiplier": float(hf.hidden_size) ** 0.5, "norm_unit_offset": True}
    if not FAMILIES[family].layer_typed:
        return fields
    if getattr(hf, "use_bidirectional_attention", None):
        raise UserError("the checkpoint attends bidirectionally, which the project's causal attention does not compute")
    # Gemma 3's attention never applies its attn_logit_softcapping (transformers passes it on for Gemma 2 only)
    cap = getattr(hf, "attn_logit_softcapping", None) if family == "gemma2" else None
    scalar = float(hf.query_pre_attn_scalar)
    final_cap = getattr(hf, "final_logit_softcapping", None)
    kinds = layer_types(hf)
    return {
        **fields,
        "post_norms": True,
        "attention_scalar": None if scalar == head_dim else scalar,
        "logit_softcap": None if final_cap is None else float(final_cap),
        "attention_softcap": None if cap is None else float(cap),
        "layer_types": kinds,
        "sliding_rope_base": sliding_rope_base(hf) if kinds else None,  # no sliding layer: no local RoPE to read
    }


LAYER_TYPES = {"sliding_attention": "sliding", "full_attention": "full"}  # transformers' names: the project's


ROPE_KEYS = ("rope_type", "type", "rope_theta")  # what every RoPE type has besides its own parameters


def rope_parameters(hf) -> dict:
    """The `rope_parameters` of the checkpoint's full layers: its one dict, or, where it sets RoPE per layer
    type (Gemma 3), the full layers' own (`sliding_rope_base` reads the sliding layers'). RoPE set per any
    other grouping of layers is refused, as the project's model has no place for it."""
    params = dict(getattr(hf, "rope_parameters", None) or {})
    per_layer = sorted(key for key, value in params.items() if isinstance(value, dict))
    if not per_layer:
        return params
    family = family_of(hf)
    if family is None or not family.layer_typed or set(params) != set(LAYER_TYPES):
        raise UserError(f"the checkpoint sets its RoPE per layer type ({', '.join(per_layer)}), not computed here")
    return dict(params["full_attention"])


def sliding_rope_base(hf) -> float | None:
    """The base of the sliding layers' own RoPE where the checkpoint sets RoPE per layer type (Gemma 3's local
    RoPE, plain); None where every layer rotates alike (Gemma 2). A scaled local RoPE is refused by name."""
    params = dict(getattr(hf, "rope_parameters", None) or {})
    local = params.get("sliding_attention")
    if not isinstance(local, dict):
        return None
    rope_type = local.get("rope_type", local.get("type", "default"))
    unknown = sorted(set(local) - set(ROPE_KEYS))
    if rope_type != "default" or unknown:
        raise UserError(
            f"the checkpoint's sliding layers rotate with RoPE {rope_type!r}"
            + (f" ({', '.join(unknown)})" if unknown else "")
            + "; the project's model gives them plain RoPE only"
        )
    return float(local["rope_theta"])


def layer_types(hf) -> tuple[str, ...] | None:
    """Which layers are the sliding ones and which attend to the whole prefix, in the project's names, for the
    families that mix them (Gemma 2 and 3); None where every layer is full."""
    kinds = getattr(hf, "layer_types", None) or ()
    unknown = sorted(set(kinds) - set(LAYER_TYPES))
    if unknown:
        raise UserError(f"the checkpoint has layers of type {', '.join(unknown)}, which are not computed here")
    if "sliding_attention" not in kinds:
        return None
    return tuple(LAYER_TYPES[kind] for kind in kinds)


def sliding_window(hf) -> int | None:
    """The window every layer of the checkpoint attends through (Mistral v0.1; Qwen2 with use_sliding_window),
    None when every layer attends to the whole prefix. Windowed and full layers mixed (Qwen2's
    max_window_layers, Gemma's alternation) are refused: the project's model attends alike in every layer."""
    window = getattr(hf, "sliding_window", None)
    if not window or getattr(hf, "use_sliding_window", True) is False:
        return None
    layer_types = getattr(hf, "layer_types", None)
    if layer_types is None:
        return int(window)
    kinds = set(layer_types)
    if kinds == {"full_attention"}:
        return None
    family = family_of(hf)
    if kinds == {"sliding_attention"} or (family is not None and family.layer_typed):
        return int(window)  # Gemma's sliding layers: the config's `layer_types` says which they are
    raise UserError(
        f"the checkpoint mixes layers with a sliding window of {window} tokens and full layers, which the "
        "project's model (one attention for every layer) does not compute"
    )


def original_context(hf) -> int:
    params = rope_parameters(hf)
    return int(params.get("original_max_position_embeddings") or hf.max_position_embeddings)


def llama_config(config: ModelConfig, rope_parameters: dict | None = None, max_positions: int | None = None, **extra):
    """The transformers `LlamaConfig` of a project model config (the inverse of `config_from_hf`); a RoPE
    scaling's `rope_parameters` (`hf_rope_parameters`) replace plain RoPE's; `max_positions`: the
    `max_position_embeddings` to write, the model's length by default."""
    if config.qkv_bias:
        raise UserError("models with query/key/value biases (Qwen2) do not export to Llama checkpoints")
    if config.rotary_dim is not None:  # transformers' Llama rotates whole heads
        raise UserError("models that rotate a part of each head (Phi-4-mini) do not export to Llama checkpoints")
    return require_transformers().LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        intermediate_size=config.ff_dim,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.kv_heads,
        max_position_embeddings=max(max_positions or config.max_len, 2),
        rms_norm_eps=config.norm_eps,
        tie_word_embeddings=config.tie_embeddings,
        head_dim=config.head_dim,
        attention_bias=False,
        mlp_bias=False,
        rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": config.rope_base},
        **extra,
    )
