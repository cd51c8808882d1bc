"""Perplexity protocols: windows, token-weighted aggregation, and chunked loss equal to the plain one."""

import math

import pytest
import torch

from extrapolate.core.config import ModelConfig
from extrapolate.model import TransformerLM
from extrapolate.tasks.perplexity import evaluate_perplexity, windows_full, windows_sliding


def test_full_windows_cover_the_budget_once():
    doc = torch.arange(1000)
    assert windows_full(doc, 100, 500) == [(s, s + 100, 0) for s in range(0, 500, 100)]


def test_sliding_windows_score_each_token_once():
    doc = torch.arange(2000)
    spans = windows_sliding(doc, 256, 1024, 128)
    scored = []
    for start, end, offset in spans:
        scored += list(range(start + offset, end))
    assert scored == list(range(0, spans[-1][1]))  # each position scored exactly once, in order
    assert spans[0][2] == 0 and all(offset == 128 for _, _, offset in spans[1:])


def test_sliding_windows_score_the_tail_a_stride_would_overshoot():
    """(budget − n) not a multiple of the stride: the last window ends at the budget and scores only what no
    window scored, so every length scores all of the budget."""
    doc = torch.arange(5000)
    for length, stride in [(1000, 256), (300, 256), (256, 256), (257, 1), (1024, 1024)]:
        spans = windows_sliding(doc, length, 4096, stride)
        scored = [p for start, end, offset in spans for p in range(start + offset, end)]
        assert scored == list(range(4096)), (length, stride)
        assert all(end - start == length for start, end, _ in spans)


def test_chunked_nll_equals_full_logits():
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding="rope")).eval()
    tokens = torch.randint(0, 256, (2, 50))
    targets = torch.randint(0, 256, (2, 50))
    full = torch.nn.functional.cross_entropy(model(tokens).transpose(1, 2), targets, reduction="none")
    assert torch.allclose(model.token_nll(tokens, targets, chunk=7), full, atol=1e-5)


def test_aggregation_is_token_weighted():
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(d_model=32, n_layers=1, n_heads=2, encoding="alibi")).eval()
    docs = [torch.randint(0, 256, (300,)), torch.randint(0, 256, (700,))]
    result = evaluate_perplexity(model, docs, 100, budget=600, bucket_width=25, device=torch.device("cpu"))
    total, count = 0.0, 0
    for doc in docs:
        for s, e, _ in windows_full(doc, 100, 600):
            nll = model.token_nll(doc[s:e][None], doc[s + 1 : e + 1][None])
            total, count = total + nll.sum().item(), count + nll.numel()
    assert result.tokens == count == 200 + 600
    assert math.isclose(result.nll, total / count, rel_tol=1e-5)
    assert sum(result.bucket_tokens.values()) == count
    assert math.isclose(sum(result.bucket_nll.values()) / count, result.nll, rel_tol=1e-6)


def test_a_bos_window_is_the_bos_then_the_window_shifted_by_one():
    """With a BOS each window holds the BOS and n - 1 tokens of the document, and every token of the document
    from the first is scored once (the first given the BOS alone)."""
    import torch

    from extrapolate.tasks.perplexity import evaluate_perplexity

    class Recorder(torch.nn.Module):
        """Scores each target as its own id: the summed NLL says which tokens were scored."""

        def __init__(self):
            super().__init__()
            self.inputs = []

        def token_nll(self, inputs, targets):
            self.inputs.append(inputs)
            return targets.float()

    doc = torch.arange(1, 34)  # 33 tokens: 32 scored without a BOS (2..33), 32 with one (1..32)
    for bos, scored in ((None, range(2, 34)), (99, range(1, 33))):
        model = Recorder()
        result = evaluate_perplexity(model, [doc], 8, budget=32, bucket_width=4, device=torch.device("cpu"), bos=bos)
        assert result.tokens == 32 and result.nll_sum == sum(scored)
        first = torch.cat(model.inputs)[:, 0]
        assert (first == 99).all() if bos is not None else (first != 99).all()


@pytest.mark.parametrize("first, width", [(0, 1), (0, 7), (5, 4), (13, 64), (3, 100)])
def test_position_buckets_sum_each_bucket_as_its_own_tokens(first, width):
    """`PerplexityResult.add` (vectorised) gives each bucket of positions the summed NLL and token count its
    positions have, for windows starting mid-bucket too."""
    from extrapolate.tasks.perplexity import PerplexityResult

    nll = torch.rand(3, 50, generator=torch.Generator().manual_seed(width), dtype=torch.float32)
    result = PerplexityResult(200, bucket_width=width)
    result.add(nll, first)
    result.add(nll[:, :10], first)  # a second window adds to the same buckets
    want_nll, want_tokens = {}, {}
    for column in range(50):
        bucket = (first + column) // width
        times = 2 if column < 10 else 1
        want_nll[bucket] = want_nll.get(bucket, 0.0) + times * float(nll[:, column].double().sum())
        want_tokens[bucket] = want_tokens.get(bucket, 0) + times * 3
    assert result.bucket_tokens == want_tokens
    assert result.bucket_nll.keys() == want_nll.keys()
    assert all(math.isclose(result.bucket_nll[b], want_nll[b], rel_tol=1e-12) for b in want_nll)
    assert result.tokens == 180 and math.isclose(result.nll_sum, sum(want_nll.values()), rel_tol=1e-12)
