"""The names of a transformers Llama-block state dict in the project's model and back; fused projections
(Phi-3's) split. A tensor with no place is an error, never dropped."""

from __future__ import annotations

import torch

from extrapolate.core.config import ModelConfig
from extrapolate.core.errors import UserError

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
