"""What an evaluation costs before it runs: each kind lists the forward calls its measurements make at a length
(`TaskKind.forward_calls`: rows, queries, keys, scored positions), and a cost model timed on the model itself
prices them. A call of r rows, q new queries over k keys (causal among the queries) and s positions through
the output head costs

    γ + r · (q·α + q·(k − q/2)·β + s·η)

γ a call's fixed overhead (a one-token decoding step), α a token's projections and MLP, β one query-key pair of
attention, η a position through the output head. Tokens alone price a 32768-token window like 128 windows of
256; the β term is what makes a long length cost what it costs (a query there attends to 32768 keys)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from extrapolate.core.device import autocast
from extrapolate.core.errors import PositionOutOfRange

Call = tuple[int, int, int, int]  # (rows, queries, keys, positions through the output head)
SHORT, LONG = 512, 4096  # the two window lengths α and β are solved from (at 4096 attention is most of a pass)
REPEATS = 3  # each timing the fastest of this many, after a warm-up


@dataclass(frozen=True)
class CostModel:
    call: float  # γ, seconds
    token: float  # α, seconds a token
    pair: float  # β, seconds a query-key pair
    head: float  # η, seconds a position

    def seconds(self, calls: list[Call]) -> float:
        return sum(
            self.call + rows * (q * self.token + q * max(0.0, k - q / 2) * self.pair + scored * self.head)
            for rows, q, k, scored in calls
        )


def fastest(run) -> float:
    run()  # warm-up
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


@torch.no_grad()
def timed_cost_model(model, device: torch.device, dtype: str, short: int = SHORT, long: int = LONG) -> CostModel:
    """γ, α, β and η timed on `model` in the evaluation precision: a one-token step after 64 cached tokens (at most
    `short`), the
    hidden states of one window of `short` and of `long` tokens (two equations in α and β once γ is known), and
    the output head over `short` positions. A negative solution (timing noise) is taken as zero. A model whose
    positions end before `long` (a learned table, a checkpoint's n_positions) is timed within them."""
    try:
        return solved_cost_model(model, device, dtype, short, long)
    except PositionOutOfRange:
        last = model.config.max_len
        return solved_cost_model(model, device, dtype, max(2, last // 8), last)


def solved_cost_model(model, device: torch.device, dtype: str, short: int, long: int) -> CostModel:
    model.eval()
    ids = torch.zeros(1, long, dtype=torch.int64, device=device)  # (1, long)
    with autocast(device, dtype):
        cache = model.new_cache()
        model.hidden_states(ids[:, : min(64, short)], cache=cache)
        call = fastest(lambda: model.hidden_states(ids[:, :1], cache=[dict(layer) for layer in cache]))
        t_short = fastest(lambda: model.hidden_states(ids[:, :short])) - call
        t_long = fastest(lambda: model.hidden_states(ids[:, :long])) - call
        hidden = model.hidden_states(ids[:, :short])  # (1, short, D)
        head = fastest(lambda: model.lm_head(hidden)) / short
    # t(n) = n·α + n²/2·β at n = short and long
    pair = max(0.0, (t_long / long - t_short / short) / ((long - short) / 2))
    token = max(0.0, t_short / short - short / 2 * pair)
    return CostModel(call, token, pair, head)
