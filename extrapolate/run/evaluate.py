"""Train (or reuse, or load) a cell's model and measure it at every length: each measurement with its
status and the kernel its attention calls ran."""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from extrapolate.core.device import activation_dtype
from extrapolate.core.distributed import current
from extrapolate.core.errors import PositionOutOfRange, is_out_of_memory
from extrapolate.core.memory import eval_memory, parse_memory
from extrapolate.data.batches import BatchSource
from extrapolate.data.tokenizers import keep_with_model
from extrapolate.encodings import encoding_for
from extrapolate.run.checkpoint import evaluator_once
from extrapolate.run.limits import unsupported_reason
from extrapolate.run.prepare import Prepared
from extrapolate.run.reporter import Reporter
from extrapolate.run.resolved import ResolvedRun, task_setup
from extrapolate.tasks.kinds import MeasureContext, asked_kinds, file_kind
from extrapolate.tasks.longppl import LONGPPL
from extrapolate.training import checkpoint as ckpt
from extrapolate.training.finetune import finetune as run_finetune
from extrapolate.training.train import Probe, TrainedModel, curriculum_of, model_folder, train

PROBE_PROMPTS = 40  # prompts per retrieval probe during training: a 95% interval of about ±15% at 50%
PROBE_HELDOUT_TOKENS = 8192  # held-out tokens scored per probe, the same ones every time
PROBE_BATCH_TOKENS = 2048  # scored in forwards of about this many tokens


@dataclass
class Measurement:
    task: str  # the name of its kind (tasks.kinds)
    length: int
    status: str  # ok | unsupported | oom | non-finite
    result: object  # what its kind's `measure` returned, or None when the status is not ok
    kernel: str  # the kernels its attention calls ran, "+"-joined in call order
    reason: str = ""  # why a cell whose status is not ok has no value, in a user's words
    seconds: float = 0.0  # how long it took (a resumed measurement: the part run now)


def evaluation_seconds(measurements: list[Measurement]) -> dict:
    """What a run record keeps of the evaluation's time: the total and each task at each length, seconds."""
    return {
        "seconds": round(sum(m.seconds for m in measurements), 2),
        "by_task": {f"{m.task}@{m.length}": round(m.seconds, 2) for m in measurements},
    }


def trained_model(resolved: ResolvedRun, prepared: Prepared, reporter: Reporter) -> TrainedModel:
    if prepared.checkpoint is not None:
        model = prepared.checkpoint.model.to(prepared.device)
        if resolved.finetune is not None:
            return finetuned(resolved, prepared, model, reporter, checkpointing=True)
        summary = {
            "config_hash": resolved.model_hash,
            "pretrained": resolved.request.model,
            # the context it was pretrained at (L, what a factor counts from) and the RoPE it is released with
            "original_context": prepared.checkpoint.original_len,
            "released_rope": prepared.checkpoint.released.describe(),
            "backend": prepared.checkpoint.backend,
            "params": model.num_parameters(),
        }
        return TrainedModel(model, resolved.model_folder, None, summary, reused=True)

    config, finetune = resolved.train_config, resolved.finetune
    rows = prepared.training_rows.training_row if prepared.training_rows is not None else None
    source = BatchSource(
        prepared.stream,
        config.seq_len,
        config.batch_size,
        config.seed,
        config.passkey_fraction,
        rows,
        curriculum_of(config),
    )
    callback = reporter.training(config.steps, ckpt.is_complete(model_folder(config)))
    result = train(config, source, prepared.device, on_step=callback, probe=training_probe(resolved, prepared))
    if current().main:  # rank 0 writes the cache entry
        keep_with_model(prepared.tokenizer, result.folder)
    reporter.done_training()
    return result if finetune is None else finetuned(resolved, prepared, result.model, reporter)


def finetuned(
    resolved: ResolvedRun, prepared: Prepared, base, reporter: Reporter, checkpointing: bool = False
) -> TrainedModel:
    """The base model fine-tuned at L' (cached, resumed or continued from a shorter fine-tune)."""
    phase = resolved.finetune.phase  # the same mixture of corpus and retrieval rows as the base, at L'
    rows = prepared.training_rows.training_row if prepared.training_rows is not None else None
    pose_len = resolved.finetune.pose_len  # PoSE: rows of L, their ids skipping to cover L'
    source = BatchSource(
        prepared.stream, phase.seq_len, phase.batch_size, phase.seed, phase.passkey_fraction, rows, skip_to=pose_len
    )
    what = f"fine-tuning at {phase.seq_len}" + (f", ids to {pose_len} (PoSE)" if pose_len else "")
    callback = reporter.training(phase.steps, ckpt.is_complete(resolved.model_folder), what)
    tuned = run_finetune(
        resolved.finetune, base, source, prepared.device, on_step=callback, checkpointing=checkpointing
    )
    if current().main:
        keep_with_model(prepared.tokenizer, tuned.folder)
    reporter.done_training()
    return tuned


def training_probe(resolved: ResolvedRun, prepared: Prepared) -> Probe:
    """Every ~1/30 of training: the held-out loss at L on a fixed sample (it falls while the model learns the
    language and rises once it memorises its corpus), and, when the model trains on retrieval prompts, greedy
    retrieval accuracy at L on a few dozen prompts (the step at which retrieval forms is itself a comparison
    between encodings)."""
    config, kernel = resolved.train_config, resolved.request.kernel
    windows = heldout_windows(prepared.heldout, resolved.request.train_len)  # (W, L + 1)

    def heldout(model) -> float:
        model.use_kernel(kernel)
        return heldout_loss(model, windows.to(prepared.device))

    retrieval = None
    builder = prepared.passkey_builder
    if builder is not None and config.passkey_fraction > 0:
        kind = file_kind(builder.task)

        def retrieval(model) -> float:
            model.use_kernel(kernel)
            return kind.probe(builder, model, resolved.request.train_len, prepared.device, PROBE_PROMPTS)

    return Probe(every=max(10, config.steps // 30), retrieval=retrieval, heldout=heldout)


def heldout_loss(model, windows: torch.Tensor) -> float:
    """Mean next-token loss over windows (W, L + 1), in forwards of about PROBE_BATCH_TOKENS tokens: short
    windows go many to a forward (4096 single forwards at L = 2 took minutes)."""
    rows = max(1, PROBE_BATCH_TOKENS // (windows.shape[1] - 1))
    total = sum(float(model.token_nll(b[:, :-1], b[:, 1:]).sum()) for b in windows.split(rows))  # b: (rows, L + 1)
    return total / (windows.shape[0] * (windows.shape[1] - 1))


def heldout_windows(documents: list[torch.Tensor], length: int) -> torch.Tensor:
    """The held-out probe's fixed sample: consecutive windows of length + 1 tokens from the held-out documents
    in order, PROBE_HELDOUT_TOKENS scored tokens in all (fewer when the documents hold fewer). (W, length + 1)"""
    windows = []
    for document in documents:  # each is longer than the longest evaluation length, so one window fits
        for start in range(0, document.numel() - length, length):
            windows.append(document[start : start + length + 1])
            if len(windows) * length >= PROBE_HELDOUT_TOKENS:
                return torch.stack(windows)
    return torch.stack(windows)


def evaluation_encoding(resolved: ResolvedRun, model):
    """The encoding to evaluate with: a RoPE scaling (or DroPE's removal of the rotation) swapped onto the RoPE
    model, or the model's own."""
    spec, request = resolved.spec, resolved.request
    own = (spec.kind != "rotary" and spec.trains_own_model) or spec.trained_parameters
    if own:  # the model's own encoding (and its trained parameters)
        if hasattr(model.encoding, "policy"):  # a table of positions: what happens past its rows
            model.encoding.policy = request.learned_policy
        return model.encoding
    # rotary kinds and DroPE are parameter-free: always a fresh encoding, so a model shared by several cells (a
    # loaded pretrained checkpoint, a fine-tune read back from the cache, built as the RoPE model it started
    # from) never keeps the encoding of an earlier cell
    encoding = encoding_for(
        model.config,
        spec.name,
        factor=resolved.factor,
        original_len=request.train_len,
        options=dict(request.encoding_options),
    )
    return encoding.to(next(model.parameters()).device)


def memory_asked(exc: BaseException) -> str:
    """What an out-of-memory error says was asked for, e.g. "asked for 20.00 GiB, 3.21 GiB free of 79.19
    GiB" (CUDA's wording) or "asked for 16.00 GiB" (the CPU allocator's bytes); "" when it does not say."""
    text = " ".join(str(exc).split())
    cuda = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)", text)
    if cuda:
        room = re.search(r"total capacity of ([\d.]+ [KMGT]?i?B) of which ([\d.]+ [KMGT]?i?B) is free", text)
        return f"asked for {cuda.group(1)}" + (f", {room.group(2)} free of {room.group(1)}" if room else "")
    cpu = re.search(r"tried to allocate (\d+) bytes", text)
    return f"asked for {int(cpu.group(1)) / 2**30:.2f} GiB" if cpu else ""


def measure(device: torch.device, evaluate, on_oom=lambda asked: None, on_unsupported=lambda exc: None):
    """(status, result) of one evaluation cell: `unsupported` when the encoding has no representation for a
    position (a learned table past its rows; `on_unsupported` is given the error), `oom` when the device
    runs out of memory (`on_oom` is told what was asked for); other errors raise."""
    try:
        return "ok", evaluate()
    except PositionOutOfRange as exc:
        on_unsupported(exc)
        return "unsupported", None
    except (RuntimeError, MemoryError) as exc:
        if not is_out_of_memory(exc):
            raise
        if device.type == "cuda":
            torch.cuda.empty_cache()
        on_oom(memory_asked(exc))
        return "oom", None


def retrieval_memory(asked: str | None, device: torch.device) -> int:
    """The bytes a retrieval cell's prompts may hold at once: --eval-memory where given, else the device's share
    (core/memory.py)."""
    return eval_memory(device, None if asked is None else parse_memory(asked))


def evaluate(
    resolved: ResolvedRun, prepared: Prepared, model, reporter: Reporter, folder: Path | None = None
) -> list[Measurement]:
    """Every (task, length) the resolved run plans, its kinds in the order of their registration (perplexity
    first), in the model's evaluation encoding. With an output `folder`, a measurement that keeps its progress
    (a retrieval cell's finished depths) keeps it there, so a stopped one resumes from it."""
    request, device, world = resolved.request, prepared.device, current()
    model.use_kernel(request.kernel)
    model.set_encoding(evaluation_encoding(resolved, model))
    setup = task_setup(resolved, prepared)
    context = MeasureContext(
        model,
        device,
        request.dtype,
        world,
        folder,
        resolved.run_id,
        reporter.evaluation_progress,
        retrieval_memory(request.eval_memory, device),
        evaluator_once(request, prepared.tokenizer, device) if LONGPPL.name in request.tasks else None,
    )
    out = []
    for kind in asked_kinds(request.tasks):
        task = kind.name
        for length in resolved.lengths:
            reporter.evaluating(task, length)

            why = [""]  # the reason a cell without a value has none: logged now, kept in its rows

            def out_of_memory(asked: str, task=task, length=length, why=why) -> None:
                why[0] = f"out of memory on {device.type}{' (' + asked + ')' if asked else ''}"
                reporter.warn(
                    f"{resolved.spec.name} at {length} tokens ({task}): {why[0]}; recorded as oom, the rest goes on"
                )

            def unsupported(exc: PositionOutOfRange, task=task, length=length, why=why) -> None:
                why[0] = unsupported_reason(exc, length, resolved)
                reporter.warn(f"{resolved.spec.name} at {length} tokens ({task}): unsupported, {why[0]}")

            began = time.perf_counter()
            status, result = measure(
                device, functools.partial(kind.measure, setup, context, length), out_of_memory, unsupported
            )
            seconds = time.perf_counter() - began
            broken = kind.non_finite(result) if status == "ok" else ""
            if broken:  # no measurement: the row says so instead of entering means and plots
                status, result, why[0] = "non-finite", None, broken
                reporter.warn(f"{resolved.spec.name} at {length}: {broken}; the cell is recorded `non-finite`")
            # asked after the measurement, so a kernel that fell back (flex failing to compile) is recorded as such
            kernel = model.ran_kernels(
                request.kernel, device, activation_dtype(device, request.dtype), resolved.attention[task, length]
            )
            reporter.evaluated(task, length, kind.summary(result) if status == "ok" else status)
            out.append(Measurement(task, length, status, result, kernel, why[0], seconds))
    return out
