"""A sweep's time estimate before it runs: a few real training steps timed, scaled to the plan."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from extrapolate.data.batches import BatchSource, rows_of
from extrapolate.run import Prepared, ResolvedRun
from extrapolate.run.eval_cost import LONG, SHORT, timed_cost_model
from extrapolate.run.evaluate import training_probe
from extrapolate.run.reporter import Reporter
from extrapolate.run.resolved import task_setup
from extrapolate.tasks.kinds import asked_kinds
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.train import Probe, build_model, model_folder, training_step

TIMED_STEPS = 2  # after one warm-up step
# rows of a timed step: at most this many tokens (at least one row), scaled to the batch, so a dry run answers
# in seconds at any L (one row at L = 4096; on a 2-core CPU one row and two gave the same tokens/s)
TIMED_TOKENS = 4096
FORWARD_TOKENS = 1024  # an engine's prompt rate is timed at this length at most
DECODE_TIMINGS = 3  # tokens an engine's timed prompt generates


def estimate_seconds(
    pending: list[ResolvedRun], models: dict[Path, bool], prepared: Prepared, reporter: Reporter | None = None
) -> float:
    """Training steps × the measured seconds per step, plus each cell's evaluation: the forward calls its kinds
    make at every length, priced by a cost model timed on the model (run/eval_cost.py). `pending`: the cells
    still to run; `models`: each model folder and whether it is trained already. `reporter` is told what is
    timed, and how long the timing took."""
    reporter = reporter or Reporter()
    if not pending:
        return 0.0
    began = time.perf_counter()
    first = pending[0]
    setup = task_setup(first, prepared)
    kinds = asked_kinds(first.request.tasks)
    if first.is_pretrained and hasattr(prepared.checkpoint.model, "generate_greedy"):  # an engine that generates
        per_cell_tokens = sum(kind.evaluated_tokens(setup, prepared.lengths) for kind in kinds)
        n = min(min(prepared.lengths), FORWARD_TOKENS)
        reporter.note(f"timing the engine on a prompt of {n} tokens for the estimate")
        rate = engine_tokens_per_second(prepared.checkpoint.model, n, first.request.dtype, max(prepared.lengths))
        reporter.note(f"timed in {time.perf_counter() - began:.1f} s: {rate:,.0f} prompt tokens/s")
        return len(pending) * per_cell_tokens / rate
    calls = [call for kind in kinds for length in prepared.lengths for call in kind.forward_calls(setup, length)]
    if first.is_pretrained:  # nothing to train: the evaluation alone
        return len(pending) * evaluation_seconds(prepared.checkpoint.model, prepared, calls, first, reporter)
    # a RoPE model's steps where one is planned (the others cost about as much), else the first cell's own
    cell = next((c for c in pending if c.train_config.model.encoding == "rope"), first)
    config = cell.train_config
    model = build_model(config, prepared.device)
    per_step = timed_step_seconds(model, config, config.seq_len, config.batch_size, prepared, reporter)
    tokens_per_second = config.batch_size * config.seq_len / per_step
    train_steps = config.steps * per_step
    for length, steps in config.curriculum or ():  # a stage's rows read as many tokens at another length: timed
        rows = rows_of(length, config.seq_len, config.batch_size)
        stage_step = timed_step_seconds(model, config, length, rows, prepared, reporter)
        train_steps += steps * (stage_step - per_step)
    train_steps += probe_seconds(model, config.steps, training_probe(cell, prepared), reporter)
    bases = {model_folder(c.train_config) for c in pending if not ckpt.is_complete(model_folder(c.train_config))}
    train_seconds = len(bases) * train_steps
    evaluation = evaluation_seconds(model, prepared, calls, first, reporter)
    return train_seconds + finetune_tokens(pending, models) / tokens_per_second + len(pending) * evaluation


def timed_step_seconds(model, config, length: int, batch_size: int, prepared: Prepared, reporter: Reporter) -> float:
    """Seconds of a full training step of `batch_size` rows of `length` tokens: a share of the rows timed and
    scaled, so that a dry run at a long L answers in seconds (on a GPU a smaller batch loads the card less: the
    estimate errs long there)."""
    began = time.perf_counter()
    rows = max(1, min(batch_size, TIMED_TOKENS // length))
    reporter.note(
        f"timing {TIMED_STEPS + 1} training steps of {rows} × {length} tokens (the first a "
        f"warm-up; the batch has {batch_size} rows) for the estimate"
    )
    optimizer = TimingUpdate(model.parameters(), config.lr)
    source = BatchSource(prepared.stream, length, rows, 0)
    start = 0.0
    for step in range(TIMED_STEPS + 1):
        if step == 1:
            start = time.perf_counter()
        training_step(model, optimizer, config, source.batch(step), prepared.device)
    per_step = (time.perf_counter() - start) / TIMED_STEPS * batch_size / rows
    reporter.note(
        f"timed in {time.perf_counter() - began:.1f} s: {per_step:.2f} s a full step, "
        f"{batch_size * length / per_step:,.0f} tokens/s"
    )
    return per_step


def probe_seconds(model, steps: int, probe: Probe, reporter: Reporter) -> float:
    """The training probes' time (retrieval and held-out loss at L, every ~1/30 of the steps): one timed, times
    their count. At a long L they are a sizeable part of training (30 probes of 40 prompts at 4096)."""
    began = time.perf_counter()
    probe.take(model)
    each = time.perf_counter() - began
    count = probe.count(steps)
    reporter.note(f"timed a training probe in {each:.1f} s: {count} of them, about {count * each / 60:.1f} min")
    return count * each


def evaluation_seconds(model, prepared: Prepared, calls: list, cell: ResolvedRun, reporter: Reporter) -> float:
    """One cell's evaluation: `calls` priced by a cost model timed on `model` in the evaluation precision."""
    if not calls:
        return 0.0
    began = time.perf_counter()
    reporter.note(f"timing forward passes of {SHORT} and {LONG} tokens and a decoding step for the evaluation")
    cost = timed_cost_model(model, prepared.device, cell.request.dtype)
    seconds = cost.seconds(calls)
    reporter.note(
        f"timed in {time.perf_counter() - began:.1f} s: {len(calls):,} forward calls a cell, about "
        f"{seconds / 60:.1f} min (a query-key pair {cost.pair * 1e9:.2f} ns, a token {cost.token * 1e6:.1f} µs)"
    )
    return seconds


class TimingUpdate:
    """What the timed steps update the weights with, in place of AdamW: one pass over every parameter and its
    gradient. AdamW's step is a few such passes, well under 1% of a step's time at any L a model trains at;
    torch's first optimizer imports torch._dynamo (about a second on a CPU), which a dry run need not pay."""

    def __init__(self, parameters, lr: float):
        self.parameters, self.lr = list(parameters), lr

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for p in self.parameters:
            if p.grad is not None:
                p.add_(p.grad, alpha=-self.lr)


def finetune_tokens(pending: list[ResolvedRun], models: dict[Path, bool]) -> int:
    """Training tokens of the fine-tunes still to run: a fine-tune continues the shorter ones of its kind, so
    each kind costs the steps of its longest (at the training token rate; attention at L' costs a little more)."""
    longest: dict[tuple, int] = {}
    for cell in pending:
        finetune = cell.finetune
        if finetune is None or models[cell.model_folder]:
            continue
        kind = (finetune.base, finetune.encoding, finetune.factor, finetune.length)
        tokens = finetune.steps * finetune.phase.batch_size * finetune.phase.seq_len  # rows read (PoSE's: of L)
        longest[kind] = max(longest.get(kind, 0), tokens)
    return sum(longest.values())


def engine_tokens_per_second(model, n: int, dtype: str, longest: int) -> float:
    """Prompt tokens per second of an engine that generates from whole prompts (vLLM), a prompt of `n` tokens
    and a short answer timed after a warm-up that builds the engine for the run's longest length."""
    model.generate_greedy([[0] * n], DECODE_TIMINGS, None, dtype, longest)  # warm-up: builds the engine
    start = time.perf_counter()
    model.generate_greedy([[0] * n], DECODE_TIMINGS, None, dtype, longest)
    return n / (time.perf_counter() - start)
