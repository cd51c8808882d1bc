"""LongPPL (Fang et al., ICLR 2025, "What is wrong with perplexity for long-context language modeling?"):
perplexity over the key tokens only — those whose loss drops by more than α = 2 nats when the model sees the
whole context rather than a short one, and which it then predicts well (loss below −β = 2) — with the evaluated
model as its own evaluator.

Each perplexity window of n tokens (the `full` protocol's windows of the held-out documents) is one text of
the authors' `find_key_token` (PKU-ML/LongPPL at 1decd2a, longppl/longppl.py): the window's n + 1 tokens are
scored once whole, and again in pieces that each see only the `short` tokens before them (trunc_len, default
4096 as the paper's): for start = 0, w, 2w, … below n + 1 − short, the targets start + short … start + short +
w − 1 (w = `window`, default 1024, the last piece cut at the window's end) with the tokens from `start` as
their context. A key token's loss is its loss with the whole window. The row's value is exp of the mean key
loss over the documents' key tokens (token-weighted, as perplexity and as the authors' script aggregates its
per-text values), its interval the perplexity's over documents, and `key_share` the key tokens' share of the
targets past the short context."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from extrapolate.core.device import autocast
from extrapolate.core.errors import UserError
from extrapolate.core.intervals import DOCUMENTS, nll_interval
from extrapolate.tasks.kinds import MeasureContext, Shapes, TaskKind, TaskSetup, register
from extrapolate.tasks.longppl_evaluator import Evaluator, evaluator_keys
from extrapolate.tasks.perplexity import exp, windows_full

NO_KEY_TOKENS = "no key tokens: no target's loss fell by more than 2 with the whole window to below 2"


def within_short(short: int) -> str:
    return f"not above LongPPL's short context of {short} tokens: no target has a longer one to be helped by"


@dataclass
class LongPPLResult:
    # per scored document, in the held-out order: its key tokens' summed loss, how many, and the targets past
    # the short context that could have been key
    key_nll: list[float] = field(default_factory=list)
    key_tokens: list[int] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    within_short: bool = False  # the length is not above the short context: no target could be key

    @property
    def nll(self) -> float:
        return sum(self.key_nll) / sum(self.key_tokens) if sum(self.key_tokens) else float("nan")

    @property
    def share(self) -> float:
        return sum(self.key_tokens) / sum(self.candidates) if sum(self.candidates) else float("nan")


@torch.no_grad()
def evaluate_longppl(
    model,
    docs,
    length: int,
    *,
    budget: int,
    short: int,
    window: int,
    device,
    dtype: str = "float32",
    evaluator: Evaluator | None = None,
) -> LongPPLResult:
    """Key tokens and their loss in every full window of `length` tokens of each document's first `budget`,
    the key tokens chosen by the model itself or by `evaluator` (tasks/longppl_evaluator.py)."""
    model.eval()
    judge = evaluator or Evaluator(model, None, "")
    judge.model.eval()
    result = LongPPLResult()
    for doc in docs:
        spans = windows_full(doc, length, budget)
        if not spans:
            continue
        total, count, candidates = 0.0, 0, 0
        for start, end, _ in spans:
            text = doc[start : end + 1]  # (n + 1,): n inputs, their n targets
            with autocast(device, dtype):
                full = model.token_nll(text[None, :-1].to(device), text[None, 1:].to(device))[0].float().cpu()  # (n,)
            key, scored = evaluator_keys(judge, text, short, window, device, dtype, full if evaluator is None else None)
            total += float(full[key].double().sum())
            count += int(key.sum())
            candidates += scored
        result.key_nll.append(total)
        result.key_tokens.append(count)
        result.candidates.append(candidates)
    return result


class LongPPLKind(TaskKind):
    """Perplexity over the key tokens of each window (the model its own evaluator), and their share."""

    name = "longppl"
    metrics = ("longppl", "key_share")
    lengths_together = True  # the perplexity's windows: every length scores the same budget
    by_default = False  # several passes a window: measured where --tasks names it
    # and the perplexity's documents and budget, whose full windows it scores
    request_options = ("longppl_short", "longppl_window", "evaluator", "eval_tokens", "eval_docs")

    def check_request(self, request, lengths: list[int]) -> None:
        if request.longppl_window < 1:
            raise UserError(f"--longppl-window must be at least 1, got {request.longppl_window}")
        if not 1 <= request.longppl_short < max(lengths):
            raise UserError(
                f"--longppl-short {request.longppl_short} must be below the longest evaluation length "
                f"{max(lengths)} (LongPPL's key tokens are those a longer context helps): give a shorter one"
            )

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        if length <= setup.longppl_short:  # no target has a longer context than the short one: nothing to run
            return ()
        piece = min(length, setup.longppl_short + setup.longppl_window)
        return ((length, length), (piece, piece))

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> LongPPLResult:
        if length <= setup.longppl_short:
            return LongPPLResult(within_short=True)
        return evaluate_longppl(
            context.model,
            setup.heldout,
            length,
            budget=setup.budget,
            short=setup.longppl_short,
            window=setup.longppl_window,
            device=context.device,
            dtype=context.dtype,
            evaluator=context.evaluator,
        )

    def summary(self, result: LongPPLResult) -> str:
        if result.within_short:
            return "not above the short context"
        if not sum(result.key_tokens):
            return "no key tokens"
        return f"LongPPL {math.exp(result.nll):,.2f} over {result.share:.1%} of the tokens"

    def protocol(self, setup: TaskSetup) -> str:
        judged = f"-evaluator-{setup.longppl_evaluator}" if setup.longppl_evaluator else ""
        return f"longppl-short-{setup.longppl_short}-window-{setup.longppl_window}{judged}"

    def rows(self, setup: TaskSetup, length: int, result: LongPPLResult | None) -> list[dict]:
        result = result or LongPPLResult()
        scored = [i for i, n in enumerate(result.key_tokens) if n]  # documents with a key token
        low, high = nll_interval([result.key_nll[i] for i in scored], [result.key_tokens[i] for i in scored])
        longppl = {
            "metric": "longppl",
            "value": exp(result.nll),
            "depth": None,
            "n_tokens": sum(result.key_tokens),
            "n": len(scored),
            "ci_low": exp(low),
            "ci_high": exp(high),
            "ci_method": DOCUMENTS if len(scored) > 1 else None,
        }
        if not scored and result.candidates:  # measured, and no target was key: a LongPPL of nothing
            longppl |= {"status": "unsupported", "reason": NO_KEY_TOKENS}
        if result.within_short:
            longppl |= {"status": "unsupported", "reason": within_short(setup.longppl_short)}
        share = {
            "metric": "key_share",
            "value": result.share,
            "depth": None,
            "n_tokens": sum(result.candidates),
            "n": len(result.candidates),
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "ci_method": None,
        }
        if result.within_short:  # no target has a context longer than the short one: no share to count
            share |= {"status": "unsupported", "reason": within_short(setup.longppl_short)}
        return [longppl, share]

    def samples(self, result: LongPPLResult | None) -> list[dict]:
        """One record per document: its key tokens' summed loss, their count and the candidates."""
        if not result:
            return []
        return [
            {"index": i, "key_nll_sum": nll, "key_tokens": keys, "candidates": candidates}
            for i, (nll, keys, candidates) in enumerate(zip(result.key_nll, result.key_tokens, result.candidates))
        ]

    def evaluated_tokens(self, setup: TaskSetup, lengths) -> int:
        return len(setup.heldout) * setup.budget * sum(1 for n in lengths if n > setup.longppl_short)

    def forward_calls(self, setup: TaskSetup, length: int) -> list[tuple[int, int, int, int]]:
        if length <= setup.longppl_short:
            return []
        windows = sum(len(windows_full(doc, length, setup.budget)) for doc in setup.heldout)
        short, window = setup.longppl_short, setup.longppl_window
        pieces = len(range(0, length + 1 - short, window))
        piece = min(length, short + window)
        return [(1, length, length, length)] * windows + [(1, piece, piece, piece)] * (windows * pieces)


LONGPPL = register(LongPPLKind())
