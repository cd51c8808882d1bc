"""Fine-tuning through low-rank adapters (peft, the optional `lora` extra), the way most context-extension work
fine-tunes at L' instead of training every weight:

- LoRA (Hu et al. 2022): rank-r adapters on the attention projections q, k, v, o, every other weight frozen;
- LongLoRA (Chen et al., ICLR 2024): the same adapters, the embeddings and every norm trained too, and attention
  during training in shifted groups (S²-attention, `kernels/shifted_sparse.py`); evaluation attends in full.

As LongLoRA's `fine-tune.py` (dvlab-research/LongLoRA): r = 8, α = 16, no dropout, no bias; `trainable_params`
"embed,norm" (every parameter whose name holds one; the project's tied output head is the embedding, so it
trains with it). A checkpoint keeps the adapters apart from the weights they adapt (so a fine-tune resumes, and a
longer one continues a shorter one, adapters and optimizer state included); a finished model is merged
(W + (α/r)·B·A) into the plain model that every evaluation runs.
"""

from __future__ import annotations

from torch import nn

from extrapolate.core.config import AdapterConfig
from extrapolate.core.errors import UserError

LONGLORA_GROUP_RATIO = 0.25  # S²-attention's groups: a quarter of the length (LongLoRA's `group_size_ratio`)
LONGLORA_TRAINABLE = ("embed", "norm")  # LongLoRA's default `trainable_params`
METHODS = ("lora", "longlora")


def adapter_config(method: str, rank: int) -> AdapterConfig:
    """The adapters of `--finetune-adapter METHOD` at rank `rank` (α = 2r, as LongLoRA's 8 and 16)."""
    if method == "lora":
        return AdapterConfig("lora", rank, 2.0 * rank)
    if method == "longlora":
        return AdapterConfig(
            "longlora", rank, 2.0 * rank, trainable=LONGLORA_TRAINABLE, group_ratio=LONGLORA_GROUP_RATIO
        )
    raise ValueError(f"unknown adapter method {method!r}")


def require_peft():
    try:
        import peft
    except ImportError:
        raise UserError(
            "--finetune-adapter trains through peft, which is not installed: pip install 'extrapolate[lora]'"
        ) from None
    return peft


def with_adapters(model: nn.Module, adapter: AdapterConfig) -> nn.Module:
    """`model` with rank-r adapters on its attention projections, trainable alone (with LongLoRA's embeddings and
    norms); the adapters' B starts at zero, so the model computes what it did."""
    peft = require_peft()
    config = peft.LoraConfig(
        r=adapter.rank,
        lora_alpha=adapter.alpha,
        target_modules=list(adapter.targets),
        lora_dropout=0.0,
        bias="none",
    )
    model = peft.inject_adapter_in_model(config, model)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name or any(part in name for part in adapter.trainable))
    return model


def merged(model: nn.Module) -> nn.Module:
    """`model` with every adapter merged into the weight it adapts and removed: the plain model, all trainable."""
    from peft.tuners.lora import LoraLayer

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, LoraLayer):
                child.merge()
                setattr(parent, name, child.get_base_layer())
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return model


def trainable_parameters(model: nn.Module) -> int:
    """Parameters that train (each tied tensor once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())
