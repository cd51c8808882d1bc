"""LongCE (Fang et al., ICLR 2025, "What is wrong with perplexity for long-context language modeling?"): a
fine-tuning loss that weighs each target by how much the long context helps the model predict it, the signal
LongPPL selects key tokens by. As the authors' `loss_weight` (PKU-ML/LongPPL at 1decd2a, finetune/finetune.py):
the model scores each row whole (the loss that trains) and, without gradients, again in pieces that see only
the `short` tokens before them (LongPPL's passes, tasks/key_tokens.py); a target's weight is
min(exp(short loss − whole-row loss), max_weight), targets below `short` weighing 1 (capped too), and the
loss is the weighted mean."""

from __future__ import annotations

import torch

from extrapolate.core.config import LongCEConfig
from extrapolate.core.errors import UserError
from extrapolate.tasks.key_tokens import short_losses


def longce_weights(
    model, inputs: torch.Tensor, targets: torch.Tensor, full_nll: torch.Tensor, config: LongCEConfig, device, dtype: str
) -> torch.Tensor:
    """(B, T) weights, no gradient, of the targets of rows inputs, targets (B, T) whose whole-row losses are
    `full_nll` (B, T), under the model as it is now (in training mode, as the authors')."""
    if not torch.equal(inputs[:, 1:], targets[:, :-1]):
        raise UserError("LongCE weighs a language model's rows: each target the next input")
    texts = torch.cat([inputs[:, :1], targets], dim=1)  # (B, T + 1)
    with torch.no_grad():
        short = short_losses(model, texts, config.short, config.window, device, dtype)  # (B, T), NaN below short
        ratio = torch.exp(short - full_nll.detach().float())  # (B, T)
        weights = torch.where(short.isnan(), torch.ones_like(ratio), ratio)
    return weights.clamp(max=config.max_weight)


LOSSES = ("ce", "longce")


def longce_config(
    loss: str, short: int | None, window: int | None, max_weight: float, train_len: int, length: int
) -> LongCEConfig | None:
    """The weights of a fine-tune at L' = `length` of a model trained at L = `train_len` under `loss`, None for
    cross-entropy. Defaults: the short context L (the authors' 4096 is Llama 2's training length) and a window
    of a quarter of it (their 1024)."""
    if loss == "ce":
        return None
    short = short or train_len
    if not short < length:
        raise UserError(
            f"LongCE's short context ({short}) must be below the fine-tune length L' = {length}: no target would "
            "see more than it (give a shorter --longce-short)"
        )
    return LongCEConfig(short, window or max(1, short // 4), max_weight)
