"""`extrapolate bench`'s retrieval rows: one depth of a retrieval task at each length, as the passkey and RULER
evaluations run it (the prompts' shared prefix once, their rest in micro-batches that fit the evaluation's memory
budget, each answer decoded greedily from its cache), timed and with its peak memory, beside perplexity's rows.

The prompts are random tokens of the task's shape (a shared half, a distinct half: the middle depth), on an
untrained model of the preset: the passes' time and memory depend on the shapes, not on the words."""

from __future__ import annotations

import time
from dataclasses import asdict

import torch

from extrapolate.bench.timing import peak_rss_mb
from extrapolate.core.device import activation_dtype, autocast, resolve_device, synchronize
from extrapolate.core.memory import eval_memory, format_memory

ANSWER_TOKENS = 4  # greedy steps a prompt decodes (passkey-word's answer and its stop)


def retrieval_worker(args) -> dict:
    """(preset, length, device, dtype, prompts, train_len, longest) -> a "retrieval" BenchRow as a dict: the
    prompts' suffix tokens per second and the seconds of the whole depth (trunk, micro-batches, decoding)."""
    from extrapolate.bench.measure import BenchRow, eval_model
    from extrapolate.kernels.attention import attention_plan
    from extrapolate.tasks.prompt_passes import answered_passes

    preset, length, device_name, dtype, prompts, train_len, longest = args
    device = resolve_device(device_name)
    model, config = eval_model(preset, "rope", length, device, train_len, longest)
    shared = length // 2  # the middle depth: the trunk is the filler before its key
    generator = torch.Generator().manual_seed(0)
    trunk = torch.randint(0, config.vocab_size, (1, shared), generator=generator)
    rest = torch.randint(0, config.vocab_size, (prompts, length - shared), generator=generator)
    ids = torch.cat([trunk.expand(prompts, -1), rest], dim=1).to(device)  # (prompts, length)
    budget = eval_memory(device, None)
    with torch.no_grad(), autocast(device, dtype):
        synchronize(device)
        began = time.perf_counter()
        for _ in answered_passes(model, [ids], length, ANSWER_TOKENS, memory=budget):
            pass
        synchronize(device)
        seconds = time.perf_counter() - began
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else peak_rss_mb()
    kernel = attention_plan(model.encoding, "auto", device, activation_dtype(device, dtype), length, length).name
    row = BenchRow(
        "retrieval", "extrapolate", "rope", length, prompts * (length - shared) / seconds, peak, kernel, dtype
    )
    return {**asdict(row), "seconds": seconds, "prompts": prompts, "memory_budget": format_memory(budget)}


def retrieval_rows(preset: str, lengths, device: str, dtype: str, prompts: int, train_len: int, on_row=None) -> list:
    """A retrieval row per length, each measured in a process of its own (its peak memory is the depth's)."""
    from extrapolate.bench.measure import BenchRow
    from extrapolate.bench.timing import in_fresh_process

    rows = []
    for length in lengths:
        args = (preset, length, device, dtype, prompts, train_len, max(lengths))
        rows.append(BenchRow(**in_fresh_process(retrieval_worker, args)))
        if on_row:
            on_row(rows[-1])
    return rows


def retrieval_lines(rows) -> list[str]:
    """One summary line per length with a retrieval row: the depth's time and the process's peak memory."""
    return [
        f"- retrieval at {r.length} ({r.prompts} prompts of one depth in micro-batches, budget {r.memory_budget}): "
        f"{r.seconds:.1f} s, peak {r.peak_memory_mb:,.0f} MB"
        for r in rows
        if r.what == "retrieval"
    ]
