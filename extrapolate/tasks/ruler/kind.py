"""RULER's tasks as a kind: greedy generation of each task's answer length after its prompt, scored by
its metric; the score at a length is the mean over the task's samples (0–1; RULER prints it × 100).

The prompts of a length run in batches in the order in which they depart from what they share (the essay
before the shallowest needle, the template's head): that shared prefix is encoded once, at batch 1, and
each batch continues from its cache. A batch's scores are logged as it finishes, so a stopped cell
resumes from its next batch."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from extrapolate.core.device import autocast
from extrapolate.core.distributed import SINGLE, World
from extrapolate.core.errors import UserError
from extrapolate.core.intervals import score_interval
from extrapolate.tasks.depth_log import DepthLog
from extrapolate.tasks.kinds import MeasureContext, Shapes, TaskKind, TaskSetup, register
from extrapolate.tasks.passkey import retrieval_protocol
from extrapolate.tasks.prompt import prompt_ids
from extrapolate.tasks.prompt_passes import answered_passes, by_group
from extrapolate.tasks.ruler.builder import RulerBuilder
from extrapolate.tasks.ruler.task import load_ruler_task

BATCH_CACHE_BYTES = 2 << 30  # a batch's key/value caches stay under this
MAX_BATCH = 8
ENGINE_BATCH = 64  # prompts a batch for a backend that batches and caches itself


@dataclass
class RulerCell:
    score: float  # mean over the samples, 0–1
    samples: int
    # one record per prompt, in index order: index, reference (RULER's outputs), prediction, score (0–1)
    records: list[dict] = field(default_factory=list)


def batch_size(model, length: int) -> int:
    """Prompts per batch: as many as keep their caches under BATCH_CACHE_BYTES; for an engine that pages its
    own cache (vLLM), ENGINE_BATCH, a batch still logged as it finishes."""
    if hasattr(model, "generate_greedy"):
        return ENGINE_BATCH
    config = model.config
    per_token = 2 * config.n_layers * config.kv_heads * config.head_dim * 4  # keys and values, float32 bound
    return max(1, min(MAX_BATCH, BATCH_CACHE_BYTES // max(1, per_token * length)))


@torch.no_grad()
def evaluate_ruler(
    model,
    builder: RulerBuilder,
    length: int,
    device: torch.device,
    dtype: str = "float32",
    world: World = SINGLE,
    log: DepthLog | None = None,
    samples: int | None = None,
    on_progress=None,
    memory: int | None = None,
    indices: list[int] | None = None,
) -> RulerCell:
    """The task's score at `length` over its samples (or the first `samples`). Under torchrun each rank
    generates every world.size-th sample and the sums are added up. A batch's prompts run in micro-batches
    that fit `memory` bytes (tasks/prompt_passes.py, `micro_rows`; None: each batch whole): the batches, what is
    logged, stay as they are, so the budget changes the peak memory, not the scores."""
    model.eval()
    task = builder.task
    indices = list(range(task.samples if samples is None else samples)) if indices is None else indices
    mine = [indices[i] for i in world.mine(len(indices))]
    prompts = sorted((builder.prompt(length, i) for i in mine), key=lambda p: p.departs)
    size = batch_size(model, length)
    batches = [prompts[i : i + size] for i in range(0, len(prompts), size)]
    ids = [prompt_ids(batch, device) for batch in batches]  # (B, n) each
    eos = getattr(builder.tokenizer, "eos_id", None)
    finished = log.finished() if log else {}
    logged = log.samples() if log else {}
    records: list[dict] = []
    total = torch.zeros(2, dtype=torch.float64)  # [score sum, samples]
    with autocast(device, dtype):
        passes = answered_passes(model, ids, length, task.tokens_to_generate, eos, set(finished), dtype, memory=memory)
        for b, (batch, micro_batches) in enumerate(zip(batches, by_group(passes, [len(x) for x in batches]))):
            if b in finished:
                total += torch.tensor(finished[b], dtype=torch.float64)
                records += logged.get(b, [])
                report(on_progress, total, len(mine), logged=True)
                continue
            answers = [answer for *_, chunk in micro_batches for answer in chunk]
            predictions = [builder.tokenizer.decode(until(a, eos)) for a in answers]
            scores = [builder.score(text, p) for text, p in zip(predictions, batch)]
            done = [
                {"index": p.index, "reference": list(p.outputs), "prediction": text, "score": float(score)}
                for p, text, score in zip(batch, predictions, scores)
            ]
            records += done
            total += torch.tensor([sum(scores), len(scores)], dtype=torch.float64)
            if log:
                log.record(b, sum(scores), float(len(scores)), done)
            report(on_progress, total, len(mine), logged=False)
    total = world.sum(total)
    records = sorted(world.gather(records), key=lambda r: r["index"])
    return RulerCell(float(total[0] / max(1.0, float(total[1]))), int(total[1]), records)


def report(on_progress, total: torch.Tensor, count: int, logged: bool) -> None:
    """One progress line a batch (on a CPU a batch at 8192 tokens takes minutes): prompts done, score so far."""
    if on_progress is not None:
        done = int(total[1])
        on_progress(done, count, f"score {float(total[0]) / max(1, done):.0%}", logged)


def until(tokens: list[int], stop: int | None) -> list[int]:
    """A generated answer up to (without) its first end-of-sequence token."""
    return tokens[: tokens.index(stop)] if stop is not None and stop in tokens else tokens


class RulerKind(TaskKind):
    """Every RULER task file (`kind = "ruler"`): the mean score of greedy answers at a length."""

    name = "ruler"
    metrics = ("score",)
    reads_task_file = True
    generates = True

    def load_file(self, data: dict, path):
        return load_ruler_task(data, path)

    def prompt_builder(self, task, tokenizer, bos, chat, heldout):
        return RulerBuilder(task, tokenizer, bos, chat, heldout)

    def check_lengths(self, prompts: RulerBuilder, lengths: tuple[int, ...]) -> None:
        self.check_fixed_part(prompts, lengths)
        # the smallest context differs by length (common words repeats its words 30 times from 4096 on, 6 times
        # below): one prompt is made at every length, so a length none fits is refused now, not at evaluation
        for length in sorted(set(lengths)):
            try:
                prompts.prompt(length, 0)
            except UserError as exc:
                raise UserError(f"{exc} (at {length}); leave that length out or give a longer one") from None

    def check_fixed_part(self, prompts: RulerBuilder, lengths: tuple[int, ...]) -> None:
        """The template, examples and answer fit the shortest length, with room for some context."""
        need = prompts.fixed_tokens(min(lengths)) + prompts.task.tokens_to_generate + 16
        if min(lengths) < need:
            raise UserError(
                f"{prompts.task.name} prompts need at least {need} tokens with their answer; "
                f"the shortest evaluation length is {min(lengths)}"
            )

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        prompt = length - setup.prompts.task.tokens_to_generate
        return ((prompt, prompt), (1, prompt + 1))

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> RulerCell:
        log = context.cell_log(setup.prompts.task.identity, length)
        return evaluate_ruler(
            context.model,
            setup.prompts,
            length,
            context.device,
            context.dtype,
            context.world,
            log,
            on_progress=context.on_progress,
            memory=context.memory,
        )

    def probe(self, builder: RulerBuilder, model, length: int, device, prompts: int) -> float:
        """The score at L over the first `prompts` samples whose story fits L (BABILong's may not, at a tight L:
        its training rows hold the ones that fit)."""
        fitting = builder.fitting_samples(length, prompts)
        if not fitting:
            return float("nan")
        return evaluate_ruler(model, builder, length, device, indices=fitting).score

    def protocol(self, setup: TaskSetup) -> str:
        return retrieval_protocol(setup.prompts)

    def summary(self, result: RulerCell) -> str:
        return f"score {result.score:.0%} over {result.samples} prompts"

    def rows(self, setup: TaskSetup, length: int, result: RulerCell | None) -> list[dict]:
        samples = setup.prompts.task.samples
        value = float("nan") if result is None else result.score
        scores = [r["score"] for r in result.records] if result is not None else []
        low, high, method = score_interval(scores) if scores else (float("nan"), float("nan"), None)
        spread = {"n": len(scores), "ci_low": low, "ci_high": high, "ci_method": method}
        return [{"metric": "score", "value": value, "depth": None, "n_tokens": samples * length, **spread}]

    def samples(self, result: RulerCell | None) -> list[dict]:
        return list(result.records) if result is not None else []

    def evaluated_tokens(self, setup: TaskSetup, lengths) -> int:
        task = setup.prompts.task
        return sum(lengths) * task.samples

    def decode_steps(self, setup: TaskSetup, lengths) -> list[tuple[int, int]]:
        task, steps = setup.prompts.task, []
        for length in lengths:
            batch = min(MAX_BATCH, task.samples)  # the model's own bound (`batch_size`) only lowers it
            batches = -(-task.samples // batch)
            steps += [(batch, length)] * (batches * task.tokens_to_generate)
        return steps

    def forward_calls(self, setup: TaskSetup, length: int) -> list[tuple[int, int, int, int]]:
        """Each prompt's pass whole (the prefix a batch shares, the template's head and the essay before its
        shallowest needle, left unpriced: an estimate that errs long) and each batch's greedy steps."""
        task = setup.prompts.task
        prompt = length - task.tokens_to_generate
        batch = min(MAX_BATCH, task.samples)
        passes = [(batch, prompt, prompt, 1)] * (-(-task.samples // batch))
        steps = [(batch, 1, prompt + step + 1, 1) for step in range(task.tokens_to_generate)]
        return passes + steps * len(passes)


RULER = register(RulerKind())
