"""Perplexity at a context length, under two protocols, aggregated by token-weighted mean NLL.

- `full`: split the first `budget` tokens of each held-out document into windows of n tokens, one forward
  pass per window, score every token (the "truncated" evaluation of long-context papers). Every length that
  divides the budget scores the same text, so a change across lengths is the effect of context alone
  (another length leaves out the budget's last partial window).
- `sliding`: windows of n moving by `stride` ≤ n; each step scores only the tokens no earlier window scored,
  and a last window ends at the budget, so every length scores all of it.

Loss by position inside the window is kept in buckets: it shows where past-L degradation starts. `PERPLEXITY`,
the kind, is registered here (tasks/kinds.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from extrapolate.core.device import autocast
from extrapolate.core.distributed import SINGLE, World
from extrapolate.core.errors import UserError
from extrapolate.core.intervals import DOCUMENTS, nll_interval
from extrapolate.tasks.kinds import MeasureContext, Shapes, TaskKind, TaskSetup, marked, register

PROTOCOLS = ("full", "sliding")
BATCH_TOKENS = 16384  # windows a forward pass: this many tokens, at least one window


@dataclass
class PerplexityResult:
    length: int
    nll_sum: float = 0.0
    tokens: int = 0
    bucket_width: int = 1
    bucket_nll: dict[int, float] = field(default_factory=dict)  # bucket index -> summed NLL
    bucket_tokens: dict[int, int] = field(default_factory=dict)
    # per scored document, in the held-out order: summed NLL and scored tokens (the interval's units, kept in
    # the folder's documents table)
    document_nll: list[float] = field(default_factory=list)
    document_tokens: list[int] = field(default_factory=list)

    def interval(self) -> tuple[float, float]:
        """95% t interval of the token-weighted mean NLL over the documents (core/intervals.py)."""
        return nll_interval(self.document_nll, self.document_tokens)

    @property
    def nll(self) -> float:
        return self.nll_sum / max(self.tokens, 1)

    def add(self, nll: torch.Tensor, first_position: int) -> None:
        """nll: (B, c) per-token NLL of targets at window positions first_position … first_position + c - 1.

        One copy to the host, then vectorised float64 sums there: a loop of small ops per bucket cost more
        than the model's forward on a GPU, and MPS has no float64."""
        per_token = nll.detach().to("cpu", torch.float64)  # (B, c)
        self.nll_sum += float(per_token.sum())
        self.tokens += per_token.numel()
        if per_token.shape[1] == 0:
            return
        per_position = per_token.sum(0)  # (c,)
        buckets = torch.arange(first_position, first_position + nll.shape[1]) // self.bucket_width  # (c,)
        first = int(buckets[0])
        index = buckets - first
        sums = torch.zeros(int(index[-1]) + 1, dtype=torch.float64).index_add_(0, index, per_position)
        counts = torch.bincount(index, minlength=len(sums)) * nll.shape[0]
        for b, (total, count) in enumerate(zip(sums.tolist(), counts.tolist()), start=first):
            if count:
                self.bucket_nll[b] = self.bucket_nll.get(b, 0.0) + total
                self.bucket_tokens[b] = self.bucket_tokens.get(b, 0) + count

    def summed(self, world: World) -> PerplexityResult:
        """The sums over every rank's windows (each rank scored its share of them)."""
        if world.size == 1:
            return self
        buckets = self.length // self.bucket_width + 1
        local = torch.zeros(2, buckets + 1, dtype=torch.float64)  # (nll, tokens) × (whole, bucket 0 …)
        local[:, 0] = torch.tensor([self.nll_sum, self.tokens], dtype=torch.float64)
        for b, value in self.bucket_nll.items():
            local[:, b + 1] = torch.tensor([value, self.bucket_tokens[b]], dtype=torch.float64)
        total = world.sum(local)
        counted = [b for b in range(buckets) if total[1, b + 1] > 0]
        return PerplexityResult(
            self.length,
            float(total[0, 0]),
            int(total[1, 0]),
            self.bucket_width,
            {b: float(total[0, b + 1]) for b in counted},
            {b: int(total[1, b + 1]) for b in counted},
        )


def windows_full(doc: torch.Tensor, length: int, budget: int) -> list[tuple[int, int, int]]:
    """(start, end, first scored offset) of consecutive windows over doc[:budget + 1]."""
    usable = min(budget, doc.numel() - 1)
    return [(s, s + length, 0) for s in range(0, usable - length + 1, length)]


def windows_sliding(doc: torch.Tensor, length: int, budget: int, stride: int) -> list[tuple[int, int, int]]:
    """(start, end, first scored offset) of windows of `length` moving by `stride` (≤ length) over
    doc[:budget + 1]; a last window ends at the budget, so its tail is scored too, each token once."""
    usable = min(budget, doc.numel() - 1)
    if usable < length:
        return []
    starts = list(range(0, usable - length + 1, stride))
    if starts[-1] + length < usable:  # the tail a whole stride would overshoot
        starts.append(usable - length)
    out, scored_until = [], 0
    for begin in starts:
        out.append((begin, begin + length, max(scored_until - begin, 0)))
        scored_until = begin + length
    return out


@torch.no_grad()
def evaluate_perplexity(
    model,
    docs: list[torch.Tensor],
    length: int,
    *,
    protocol: str = "full",
    stride: int = 256,
    budget: int,
    bucket_width: int,
    device: torch.device,
    dtype: str = "float32",
    max_batch_tokens: int = BATCH_TOKENS,
    world: World = SINGLE,
    bos: int | None = None,
    log=None,
    on_windows=None,
) -> PerplexityResult:
    """docs: 1-D int64 token tensors. `budget`: tokens per document scored (the same for every length).
    Under torchrun each rank scores every world.size-th window and the sums are added up. `bos`: a token each
    window starts with (the tokenizer's BOS): the window is then the BOS and n - 1 tokens of the document, and
    its first token is scored given the BOS alone, as the field's evaluations feed a model. `log` (a
    depth_log.LengthLog): this process's sums are kept there once scored, and read from there by a run that
    stopped after them. `on_windows(done, total)`: this process's windows scored so far, after each batch."""
    result = PerplexityResult(length, bucket_width=bucket_width)
    model.eval()
    windows = []  # (window index, document index, document, start, end, first scored offset)
    for d, doc in enumerate(docs):
        spans = (
            windows_full(doc, length, budget) if protocol == "full" else windows_sliding(doc, length, budget, stride)
        )
        windows += [(len(windows) + i, d, doc, *span) for i, span in enumerate(spans)]
    per_window = torch.zeros(2, len(windows), dtype=torch.float64)  # (summed NLL, tokens) × window
    owner = torch.tensor([w[1] for w in windows], dtype=torch.long)  # (W,) the document of each window
    mine = [windows[i] for i in world.mine(len(windows))]
    logged = log.read() if log is not None else None
    if logged is not None and len(logged["per_window"][0]) == len(windows):
        result = from_logged(logged, length, bucket_width)
        per_window = torch.tensor(logged["per_window"], dtype=torch.float64)  # (2, W)
        mine = []  # scored before the stop: only the sums over the ranks are left to do
    per_batch, scored_windows = max(1, max_batch_tokens // length), 0
    # group windows that share their first scored offset, so each batch is one rectangular tensor
    groups: dict[int, list] = {}
    for window in mine:
        groups.setdefault(window[5], []).append(window)
    for offset, group in sorted(groups.items()):
        for i in range(0, len(group), per_batch):
            chunk = group[i : i + per_batch]
            inputs = torch.stack([doc[s:e] for _, _, doc, s, e, _ in chunk]).to(device)  # (B, n)
            targets = torch.stack([doc[s + 1 : e + 1] for _, _, doc, s, e, _ in chunk]).to(device)  # (B, n)
            if bos is not None:  # the BOS, then the window shifted by one: the same n positions
                inputs = torch.cat([torch.full_like(inputs[:, :1], bos), inputs[:, :-1]], dim=1)  # (B, n)
                targets = torch.stack([doc[s:e] for _, _, doc, s, e, _ in chunk]).to(device)  # (B, n)
            with autocast(device, dtype):
                nll = model.token_nll(inputs, targets)  # (B, n) float32
            scored = nll[:, offset:].float()  # (B, c)
            result.add(scored, offset)
            index = torch.tensor([w[0] for w in chunk])
            per_window[0, index] = scored.double().sum(1).cpu()
            per_window[1, index] = float(scored.shape[1])
            scored_windows += len(chunk)
            if on_windows is not None:
                on_windows(scored_windows, len(mine))
    if log is not None and logged is None:
        log.record(to_logged(result, per_window))
    result = result.summed(world)
    per_window = world.sum(per_window)
    per_document = torch.zeros(2, len(docs), dtype=torch.float64).index_add_(1, owner, per_window)  # (2, docs)
    scored_docs = per_document[:, per_document[1] > 0]  # (2, scored docs)
    result.document_nll, result.document_tokens = scored_docs[0].tolist(), [int(t) for t in scored_docs[1].tolist()]
    return result


def windows_progress(on_progress):
    """`on_windows` reporting to a measurement's progress sink (windows have no score on their own)."""
    if on_progress is None:
        return None
    return lambda done, total: on_progress(done, total, "", False, "windows")


def to_logged(result: PerplexityResult, per_window: torch.Tensor) -> dict:
    """One process's sums at a length, as JSON keeps them (Python floats round-trip exactly)."""
    return {
        "nll_sum": result.nll_sum,
        "tokens": result.tokens,
        "bucket_nll": {str(b): v for b, v in result.bucket_nll.items()},
        "bucket_tokens": {str(b): v for b, v in result.bucket_tokens.items()},
        "per_window": per_window.tolist(),  # (2, W): summed NLL and scored tokens of each window
    }


def from_logged(logged: dict, length: int, bucket_width: int) -> PerplexityResult:
    return PerplexityResult(
        length,
        float(logged["nll_sum"]),
        int(logged["tokens"]),
        bucket_width,
        {int(b): float(v) for b, v in logged["bucket_nll"].items()},
        {int(b): int(v) for b, v in logged["bucket_tokens"].items()},
    )


def exp(nll: float) -> float:
    """A perplexity from a mean NLL, as every committed row computed it (float32; inf past its range)."""
    return float(torch.tensor(nll).exp())


def window_protocol(protocol: str, stride: int) -> str:
    """A perplexity protocol's name as the rows record it: full-window, or sliding-window-stride-N."""
    return "full-window" if protocol == "full" else f"sliding-window-stride-{stride}"


class PerplexityKind(TaskKind):
    """Token-weighted mean NLL (and its exponential) of the held-out documents' windows at a length."""

    name = "perplexity"
    metrics = ("nll", "ppl")
    lengths_together = True  # every length scores the budget, which the longest length sets
    request_options = ("protocol", "stride", "eval_tokens", "eval_docs")

    def check_request(self, request, lengths: list[int]) -> None:
        shortest = min(lengths)
        if request.protocol == "sliding" and request.stride > shortest:
            # a window moving by more than its length would leave the tokens between two windows unscored
            raise UserError(
                f"--stride {request.stride} is longer than the evaluation length {shortest}: give --stride ≤ {shortest}"
            )

    def unused_options(self, request, defaults) -> list[str]:
        if request.protocol == "full" and request.stride != defaults.stride:
            return ["--stride sets the sliding protocol; --protocol full scores one window per chunk: ignored"]
        return []

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        return ((length, length),)  # full windows, no cache

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> PerplexityResult:
        return evaluate_perplexity(
            context.model,
            setup.heldout,
            length,
            protocol=setup.windows,
            stride=setup.stride,
            budget=setup.budget,
            bucket_width=setup.bucket_width,
            device=context.device,
            dtype=context.dtype,
            world=context.world,
            bos=setup.bos,
            log=context.length_log(self.name, self.scored_text(setup), length),
            on_windows=windows_progress(context.on_progress),
        )

    def summary(self, result: PerplexityResult) -> str:
        return f"ppl {math.exp(result.nll):,.2f}"

    def scored_text(self, setup: TaskSetup) -> str:
        """What a length's sums depend on beyond the run id: the protocol, the budget, the buckets and the
        held-out documents themselves (a run id does not name the evaluation corpus or --eval-docs)."""
        import hashlib

        digest = hashlib.sha256()
        for doc in setup.heldout:
            digest.update(doc.to(torch.int64).numpy().tobytes())
            digest.update(b"|")
        return f"{self.protocol(setup)}|budget {setup.budget}|buckets {setup.bucket_width}|{digest.hexdigest()[:16]}"

    def non_finite(self, result: PerplexityResult) -> str:
        # NaN is no measurement (the model's numbers broke down, e.g. weights blown up by the learning rate): the
        # row says so instead of entering means and plots as a perplexity
        if math.isnan(result.nll):
            return "the loss is NaN"
        return "" if math.isfinite(result.nll) else "the loss is infinite"

    def protocol(self, setup: TaskSetup) -> str:
        return marked(window_protocol(setup.windows, setup.stride), setup.bos is not None)

    def rows(self, setup: TaskSetup, length: int, result: PerplexityResult | None) -> list[dict]:
        nll = result.nll if result else float("nan")
        tokens = result.tokens if result else 0
        low, high = result.interval() if result else (float("nan"), float("nan"))
        spread = {
            "n": len(result.document_tokens) if result else 0,
            "ci_method": DOCUMENTS if result and len(result.document_tokens) > 1 else None,  # none of one document
        }
        return [
            {"metric": metric, "value": value, "depth": None, "n_tokens": tokens, "ci_low": lo, "ci_high": hi, **spread}
            for metric, value, lo, hi in (
                ("nll", nll, low, high),
                ("ppl", exp(nll), exp(low), exp(high)),
            )
        ]

    def samples(self, result: PerplexityResult | None) -> list[dict]:
        """One record per scored document (held-out order): its summed NLL and scored tokens, from which the
        row's interval, and a ratio paired by document with another length's, are computed again."""
        if not result:
            return []
        return [
            {"index": i, "nll_sum": nll, "tokens": tokens}
            for i, (nll, tokens) in enumerate(zip(result.document_nll, result.document_tokens))
        ]

    def position_rows(self, result: PerplexityResult | None, length: int) -> list[dict]:
        """Loss by position bucket inside the window."""
        if not result:
            return []
        width = result.bucket_width
        return [
            {
                "bucket_start": b * width,
                "bucket_end": min((b + 1) * width, length),
                "nll": result.bucket_nll[b] / result.bucket_tokens[b],
                "n_tokens": result.bucket_tokens[b],
            }
            for b in sorted(result.bucket_nll)
        ]

    def evaluated_tokens(self, setup: TaskSetup, lengths) -> int:
        return len(setup.heldout) * setup.budget * len(lengths)

    def forward_calls(self, setup: TaskSetup, length: int) -> list[tuple[int, int, int, int]]:
        windows = sum(
            len(windows_full(doc, length, setup.budget))
            if setup.windows == "full"
            else len(windows_sliding(doc, length, setup.budget, setup.stride))
            for doc in setup.heldout
        )
        per_batch = max(1, BATCH_TOKENS // length)  # as `evaluate_perplexity` batches them; every position scored
        return [(min(per_batch, windows - i), length, length, length) for i in range(0, windows, per_batch)]


PERPLEXITY = register(PerplexityKind())
