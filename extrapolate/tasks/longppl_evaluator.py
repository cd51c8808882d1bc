"""LongPPL's key tokens chosen by another model, the evaluator (the authors' `evaluator_model`, `--evaluator`):
the evaluator scores the window's text with the whole context and with the short one, and its key tokens
become the evaluated model's by their text (PKU-ML/LongPPL at 1decd2a, longppl/longppl.py).

With the evaluated model's tokenizer, a key token is the window's own token. With another tokenizer, the
window's tokens are decoded to text, the evaluator reads that text in its tokens, its key tokens' character
spans are merged where they touch (`merge_intervals`), and an evaluated token is key where its span lies inside
one (`cal_overlap`). Both sides' spans come from decoding, a token's span being what it adds to the text after
the token before it (the authors' `compute_offsets`; they take the evaluator's from its tokenizer's offset
mapping, which agrees wherever decoding adds token by token)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from extrapolate.core.device import autocast
from extrapolate.tasks import key_tokens

Span = tuple[int, int]  # [start, end) in characters of the window's text


@dataclass(frozen=True)
class Evaluator:
    """The model whose losses choose the key tokens, with its tokenizer and the name it was asked for by."""

    model: object  # a TransformerLM in the encoding it is released with
    tokenizer: object
    name: str
    # the evaluated model's tokenizer, whose windows it reads as text; None: the same, a key token the window's own
    window_tokenizer: object | None = None


def char_spans(tokenizer, ids: list[int]) -> list[Span]:
    """Each token's span in tokenizer.decode(ids): what it adds to the text after the token before it."""
    spans, pointer = [], 0
    for i in range(len(ids)):
        if i == 0:
            size = len(tokenizer.decode(ids[:1]))
        else:
            size = len(tokenizer.decode(ids[i - 1 : i + 1])) - len(tokenizer.decode(ids[i - 1 : i]))
        spans.append((pointer, pointer + size))
        pointer += size
    return spans


def merged(spans: list[Span]) -> list[Span]:
    """Spans in order, those that touch (one's end the next one's start) joined: `merge_intervals`."""
    out: list[list[int]] = []
    for start, end in spans:
        if out and out[-1][1] == start:
            out[-1][1] = end
        else:
            out.append([start, end])
    return [(start, end) for start, end in out]


def tokens_inside(spans: list[Span], keys: list[Span]) -> list[int]:
    """The indices of the tokens whose span lies inside one of `keys` (both in order): `cal_overlap`'s walk."""
    inside, i, j = [], 0, 0
    while i < len(spans) and j < len(keys):
        (a_start, a_end), (b_start, b_end) = spans[i], keys[j]
        if a_start >= b_start and a_end <= b_end:
            inside.append(i)
            i += 1
        elif a_start < b_start:
            i += 1
        else:
            j += 1
    return inside


def evaluator_keys(
    evaluator: Evaluator,
    text: torch.Tensor,
    short: int,
    window: int,
    device,
    dtype: str,
    full: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    """For a window text (n + 1,) of the evaluated tokenizer: which of its n targets are key (n,) by the
    evaluator, and how many targets lie past the evaluator's short context (the key tokens' candidates).
    `full`: the evaluator's losses (n,) with the whole window, where it has them already (it is the model)."""

    tokenizer, lead = evaluator.window_tokenizer, []
    if tokenizer is None:
        ids = text
    else:  # the window's text in the evaluator's tokens, its BOS first where its tokenizer puts one by default
        lead = [evaluator.tokenizer.bos_id] if getattr(evaluator.tokenizer, "adds_bos", False) else []
        ids = torch.tensor(lead + evaluator.tokenizer.encode(tokenizer.decode(text.tolist())), dtype=torch.long)
    targets = text.numel() - 1
    if ids.numel() <= short + 1:  # no target of the evaluator's has a context longer than the short one
        return torch.zeros(targets, dtype=torch.bool), 0
    model = evaluator.model
    if full is None:
        with autocast(device, dtype):
            full = model.token_nll(ids[None, :-1].to(device), ids[None, 1:].to(device))[0].float().cpu()  # (N_e - 1,)
    reduced = key_tokens.short_losses(model, ids[None], short, window, device, dtype)[0].cpu()  # (N_e - 1,)
    key = key_tokens.key_mask(full, reduced)  # target j is the evaluator's token j + 1
    if tokenizer is None:
        return key, int((~reduced.isnan()).sum())
    own = char_spans(tokenizer, text.tolist())
    theirs = [(0, 0)] * len(lead) + char_spans(evaluator.tokenizer, ids.tolist()[len(lead) :])
    chosen = tokens_inside(own, merged([theirs[j + 1] for j in key.nonzero().flatten().tolist()]))
    mask = torch.zeros(targets, dtype=torch.bool)
    mask[[i - 1 for i in chosen if i >= 1]] = True  # token i is target i - 1 (the first token is no target)
    first = theirs[short][0]  # where the evaluator's first target with a shorter context starts
    return mask, sum(1 for start, _ in own[1:] if start >= first)
