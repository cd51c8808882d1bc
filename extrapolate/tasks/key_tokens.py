"""The key-token signal LongPPL and LongCE share (Fang et al., ICLR 2025): each target's loss with the whole
context and with a short one, scored in pieces as the authors' `find_key_token` and `loss_weight` do; a key
token's loss falls by more than α with the whole context, to below −β."""

from __future__ import annotations

import torch

from extrapolate.core.device import autocast

ALPHA = 2.0  # a key token's loss drops by more than this with the whole context …
BETA = -2.0  # … and is below −β with it (the authors' defaults)


def key_mask(full: torch.Tensor, short: torch.Tensor) -> torch.Tensor:
    """Which targets are key: losses (T,) with the whole context and with the short one (NaN where not scored)."""
    return ((short - full) > ALPHA) & (full < -BETA)


def short_losses(model, texts: torch.Tensor, short: int, window: int, device, dtype: str) -> torch.Tensor:
    """texts (B, N) -> (B, N - 1) on `device`: the loss of each target t = 1 … N - 1 given at most the `short`
    tokens before the piece it is scored in (NaN for targets below `short`, which have no shorter context).
    LongPPL's key tokens and LongCE's weights (training/longce.py) both read it."""
    rows, length = texts.shape
    losses = torch.full((rows, length - 1), float("nan"), device=device)
    for start in range(0, length - short, window):
        end = min(start + short + window, length)  # the authors' last piece is cut at the text's end
        piece = texts[:, start:end].to(device)  # (B, end - start)
        with autocast(device, dtype):
            nll = model.token_nll(piece[:, :-1], piece[:, 1:]).float()  # (B, end - start - 1): targets start + 1 …
        losses[:, start + short - 1 : end - 1] = nll[:, short - 1 :]  # targets start + short … end - 1
    return losses
