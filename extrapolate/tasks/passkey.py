"""Passkey retrieval at one length: greedy exact match and the log-likelihood rank of the true key.

The prompts of one length are encoded into key/value caches, their shared prefix once; greedy decoding and
the scoring of the true key against its distractors both continue from a prompt's cache. `PASSKEY`, the
kind every retrieval task file is measured by, is registered here (tasks/kinds.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrapolate.core.device import autocast
from extrapolate.core.distributed import SINGLE, World
from extrapolate.core.errors import UserError
from extrapolate.core.intervals import PROPORTION, proportion_interval
from extrapolate.tasks.depth_log import DepthLog
from extrapolate.tasks.files import PasskeyTask, check_passkey_task
from extrapolate.tasks.kinds import MeasureContext, Shapes, TaskKind, TaskSetup, marked, register
from extrapolate.tasks.prompt import PromptBuilder, prompt_ids
from extrapolate.tasks.prompt_passes import answered_passes, by_group, cache_bytes, copy_cache, trunk_lengths

CACHE_BUDGET_BYTES = 1 << 30  # candidates scored per chunk: the copied caches stay under this


@dataclass
class PasskeyCell:
    depth: float
    accuracy: float
    rank_accuracy: float
    trials: int
    # one record per prompt, in trial order: index, reference, prediction, score (0/1), ranked_first and
    # rank_margin (the true answer's log-likelihood less the best distractor's, nats: > 0 exactly when ranked first)
    samples: list[dict] = dataclasses.field(default_factory=list)


@torch.no_grad()
def candidate_scores(
    model, cache_one, last_logits_one, candidates: list[list[int]], seq_len: int, device, memory: int | None = None
) -> torch.Tensor:
    """Summed log-likelihood of each candidate answer after one prompt. last_logits_one: (V,). The candidates
    run in chunks whose copies of the prompt's cache stay under `memory` bytes (CACHE_BUDGET_BYTES if None)."""
    scores = []
    budget = CACHE_BUDGET_BYTES if memory is None else memory
    per_chunk = max(1, budget // max(1, cache_bytes(cache_one)))  # at least one candidate, whatever the budget
    first_lp = last_logits_one.float().log_softmax(-1)
    for start in range(0, len(candidates), per_chunk):
        chunk = candidates[start : start + per_chunk]
        width = max(len(c) for c in chunk)
        ids = torch.tensor([c + [c[-1]] * (width - len(c)) for c in chunk], device=device)  # (C, A) padded
        mask = torch.tensor([[1.0] * len(c) + [0.0] * (width - len(c)) for c in chunk], device=device)
        total = first_lp[ids[:, 0]]  # (C,)
        if width > 1:
            cache = [dict(layer) for layer in cache_one]  # continuations must not grow the shared cache
            hidden = model.hidden_states(ids[:, :-1], cache=cache, seq_len=seq_len)  # (C, A-1, D)
            lp = model.lm_head(hidden).float().log_softmax(-1)  # (C, A-1, V)
            picked = lp.gather(-1, ids[:, 1:, None])[..., 0]  # (C, A-1)
            total = total + (picked * mask[:, 1:]).sum(1)
        scores.append(total)
    return torch.cat(scores)


def prompt_length(builder: PromptBuilder, length: int) -> int:
    """Prompt tokens at `length`: the prompt and the decoded answer together stay within `length` positions,
    so a model is asked only about positions it is evaluated at (a learned table of L rows answers at L)."""
    return length - builder.decode_tokens()


def prompt_groups(builder: PromptBuilder, length: int, trials: list[int]) -> list[tuple[int, list]]:
    """(depth index, prompts of `trials`) per depth, in the order the passes run: by where the queried key
    sits, so each depth's prompts share the longest possible prefix with the depths still to come."""
    prompt_len = prompt_length(builder, length)
    groups = [(d, [builder.trial(prompt_len, depth, t) for t in trials]) for d, depth in enumerate(builder.task.depths)]
    groups = [g for g in groups if g[1]]
    return sorted(groups, key=lambda g: (min(p.key_start for p in g[1]), g[0]))


def attention_shapes(builder: PromptBuilder, length: int) -> list[tuple[int, int]]:
    """(queries, keys) of the attention calls `evaluate_passkey` makes at `length`, for the kernels they run:
    the shared-prefix passes and the prompt suffixes, a greedy step from a prompt's cache, and the longest
    candidate continuation the rank score can feed (the answer's token bound less its first token, which the
    prompt's last logits score)."""
    groups = prompt_groups(builder, length, list(range(builder.task.trials)))
    prompt = prompt_length(builder, length)
    shapes, done = [], 0
    for shared in trunk_lengths([prompt_ids(prompts) for _, prompts in groups]):
        if shared > done:
            shapes.append((shared - done, shared))
            done = shared
        shapes.append((prompt - done, prompt))
    continuation = max(1, builder.answer_tokens() - 1)
    return shapes + [(1, prompt + 1), (continuation, prompt + continuation)]


def forward_calls(builder: PromptBuilder, length: int) -> list[tuple[int, int, int, int]]:
    """(rows, queries, keys, head positions) of the calls `evaluate_passkey` makes at `length` with every prompt
    of a depth in one pass (a micro-batch splits the rows, not the work): the trunk grown at batch 1, each
    depth's suffix, its greedy steps, and each prompt's candidate answers continued from its cache."""
    task, prompt = builder.task, prompt_length(builder, length)
    groups = prompt_groups(builder, length, list(range(task.trials)))
    calls, done = [], 0
    candidates = 1 + task.distractors
    continuation = max(1, builder.answer_tokens() - 1)
    for shared in trunk_lengths([prompt_ids(prompts) for _, prompts in groups]):
        if shared > done:
            calls.append((1, shared - done, shared, 0))
            done = shared
        calls.append((task.trials, prompt - done, prompt, 1))
        calls += [(task.trials, 1, prompt + step + 1, 1) for step in range(builder.decode_tokens())]
        calls += [(candidates, continuation, prompt + continuation, continuation)] * task.trials
    return calls


@torch.no_grad()
def evaluate_passkey(
    model,
    builder: PromptBuilder,
    length: int,
    device: torch.device,
    dtype: str = "float32",
    rank: bool = True,
    world: World = SINGLE,
    log: DepthLog | None = None,
    on_depth: Callable[[float, float, bool], None] | None = None,
    memory: int | None = None,
) -> list[PasskeyCell]:
    """Greedy exact match and (with `rank`) the rank score per depth at one length. Under torchrun each
    rank asks every world.size-th trial of each depth and the counts are added up.

    The prompts of a length differ only from their key lines on: the filler before the shallowest key still
    to be asked (the trunk) is run once, at batch 1, into a cache that each depth's batch of prompts continues
    (a third less attention and half the projection work at 5 depths × 4 trials than a full pass each).

    With a `log`, each depth's counts are saved as it finishes and depths already in the log are not asked
    again; the trunk is still grown through them in the same steps, so a resumed cell computes exactly what
    an uninterrupted one does. `on_depth(depth, greedy accuracy of this process's prompts, logged)` is called
    as each depth is done. `memory`: the bytes a depth's prompts may hold at once (`micro_rows`; None:
    every prompt of a depth in one pass), which changes the peak memory, not the answers."""
    model.eval()
    task = builder.task
    counts = torch.zeros(len(task.depths), 2, dtype=torch.float64)  # (depth, [correct, ranked first])
    steps = builder.decode_tokens()
    mine = list(world.mine(task.trials))
    groups = prompt_groups(builder, length, mine)
    finished = log.finished() if log else {}
    ids = [prompt_ids(prompts, device) for _, prompts in groups]  # (trials, n) each

    def report(d: int, logged: bool) -> None:
        if on_depth:
            on_depth(task.depths[d], float(counts[d, 0]) / max(len(mine), 1), logged)

    skip = {i for i, (d, _) in enumerate(groups) if d in finished}
    logged = log.samples() if log else {}
    records: dict[int, list[dict]] = {d: logged.get(d, []) for d in finished}  # depth -> its prompts' records
    rank = rank and not hasattr(model, "generate_greedy")  # a backend without log-likelihoods: greedy only
    with autocast(device, dtype):
        passes = answered_passes(model, ids, length, steps, None, skip, dtype, keep=rank, memory=memory)
        for (d, prompts), micro_batches in zip(groups, by_group(passes, [len(p) for _, p in groups])):
            if d in finished:
                counts[d] = torch.tensor(finished[d], dtype=torch.float64)
                report(d, logged=True)
                continue
            records[d] = []
            # cache: the rows' keys and values; last: (b, V) logits at their last position
            for _, rows, cache, last, answers in micro_batches:
                # the rank score's copies of a prompt's cache get what the micro-batch's own caches leave
                left = None if memory is None or cache is None else memory - cache_bytes(cache) * len(answers)
                for i, (t, prompt) in enumerate(zip(mine[rows], prompts[rows])):
                    prediction = builder.tokenizer.decode(answers[i])
                    correct = builder.is_correct(prediction, prompt)
                    counts[d, 0] += correct
                    ranked = {}
                    if rank:
                        candidates = builder.candidate_answers(prompt, t)
                        one = copy_cache(cache, i)
                        scores = candidate_scores(model, one, last[i], candidates, length, device, left)
                        # how near the rank was to turning: a near tie can turn on another CPU's bf16 path
                        margin = float(scores[0] - scores[1:].max())  # at least one distractor (task files)
                        ranked = {
                            "ranked_first": margin > 0,
                            "rank_margin": round(margin, 4) if math.isfinite(margin) else None,
                        }
                        counts[d, 1] += ranked["ranked_first"]
                    reference = builder.task.answer_join.join(str(k) for k in prompt.answer_keys)
                    records[d].append(
                        {"index": t, "reference": reference, "prediction": prediction, "score": float(correct)} | ranked
                    )
            if log:
                log.record(d, float(counts[d, 0]), float(counts[d, 1]), records[d])
            report(d, logged=False)
    counts = world.sum(counts)
    return [
        PasskeyCell(
            depth,
            float(counts[d, 0]) / task.trials,
            float(counts[d, 1]) / task.trials if rank else float("nan"),
            task.trials,
            sorted(world.gather(records.get(d, [])), key=lambda r: r["index"]),
        )
        for d, depth in enumerate(task.depths)
    ]


def proportion(value: float, n: int) -> dict:
    """The interval columns of a proportion measured over n prompts (core/intervals.py)."""
    if n <= 0 or math.isnan(value):
        return {"n": n, "ci_low": float("nan"), "ci_high": float("nan"), "ci_method": None}
    low, high = proportion_interval(round(value * n), n)
    return {"n": n, "ci_low": low, "ci_high": high, "ci_method": PROPORTION}


CHAT_MARK = "+chat"  # in a protocol: the prompts were wrapped in the chat template


def retrieval_protocol(builder: PromptBuilder) -> str:
    """A retrieval task's protocol as the rows record it: its identity, "+chat" where its prompts are wrapped in
    the chat template, "+bos" where they start with a BOS."""
    chat = CHAT_MARK if builder.chat is not None else ""
    return marked(f"{builder.task.identity}{chat}", builder.bos is not None)


class PasskeyKind(TaskKind):
    """Every retrieval task (the task file's prompts): greedy exact match and the rank of the true key, per
    depth, at a length."""

    name = "needle"  # key lines hidden in filler; "passkey" until the task column named task files (RENAMED_KINDS)
    metrics = ("accuracy", "rank_accuracy")
    reads_task_file = True
    default_for_files = True
    generates = True  # its rank score, where measured, needs log-likelihoods; the answer does not

    def load_file(self, data: dict, path):
        return check_passkey_task(data, path.name)

    def prompt_builder(self, task, tokenizer, bos, chat, heldout):
        return PromptBuilder(task, tokenizer, bos, chat)

    def probe(self, builder: PromptBuilder, model, length: int, device, prompts: int) -> float:
        task = builder.task
        small = PromptBuilder(
            dataclasses.replace(task, trials=max(1, prompts // len(task.depths))),
            builder.tokenizer,
            builder.bos,
            builder.chat,
        )
        cells = evaluate_passkey(model, small, length, device, "float32", rank=False)
        return sum(c.accuracy for c in cells) / len(cells)

    def check_lengths(self, prompts: PromptBuilder, lengths: tuple[int, ...]) -> None:
        if min(lengths) < prompts.fixed_tokens() + 16:
            raise UserError(
                f"{prompts.task.name} prompts need at least {prompts.fixed_tokens() + 16} tokens; "
                f"the shortest evaluation length is {min(lengths)}"
            )

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        return tuple(attention_shapes(setup.prompts, length))

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> list[PasskeyCell]:
        log = context.cell_log(setup.prompts.task.identity, length)
        depths, done = setup.prompts.task.depths, [0]

        def on_depth(depth: float, greedy: float, logged: bool) -> None:
            done[0] += 1
            if context.on_progress is not None:
                context.on_progress(done[0], len(depths), f"depth {depth:g}: greedy {greedy:.0%}", logged, "depths")

        return evaluate_passkey(
            context.model,
            setup.prompts,
            length,
            context.device,
            context.dtype,
            world=context.world,
            log=log,
            on_depth=on_depth,
            memory=context.memory,
        )

    def protocol(self, setup: TaskSetup) -> str:
        return retrieval_protocol(setup.prompts)

    def summary(self, result: list[PasskeyCell]) -> str:
        return f"greedy {sum(c.accuracy for c in result) / max(1, len(result)):.0%} over {len(result)} depths"

    def rows(self, setup: TaskSetup, length: int, result: list[PasskeyCell] | None) -> list[dict]:
        if result is None:
            cells = [(depth, float("nan"), float("nan"), 0) for depth in setup.prompts.task.depths]
        else:
            cells = [(c.depth, c.accuracy, c.rank_accuracy, c.trials) for c in result]
        # a backend without log-likelihoods (vLLM) ranks nothing: no rank row rather than a row of nothing
        ranked = result is None or not all(math.isnan(c.rank_accuracy) for c in result)
        return [
            {"metric": metric, "value": value, "depth": depth, "n_tokens": trials * length, **proportion(value, trials)}
            for depth, accuracy, rank_accuracy, trials in cells
            for metric, value in (("accuracy", accuracy), ("rank_accuracy", rank_accuracy))
            if ranked or metric == "accuracy"
        ]

    def samples(self, result: list[PasskeyCell] | None) -> list[dict]:
        return [{"depth": c.depth, **record} for c in result or [] for record in c.samples]

    def failed_rows(self, setup: TaskSetup, length: int) -> list[dict]:
        return [{"metric": metric, "depth": depth} for depth in setup.prompts.task.depths for metric in self.metrics]

    def evaluated_tokens(self, setup: TaskSetup, lengths) -> int:
        task = setup.prompts.task
        return sum(lengths) * task.trials * len(task.depths) * 2

    def forward_calls(self, setup: TaskSetup, length: int) -> list[tuple[int, int, int, int]]:
        return forward_calls(setup.prompts, length)


PASSKEY = register(PasskeyKind())
PasskeyTask.kind = PASSKEY.name  # a passkey task file is measured by this kind
