"""One cell resolved once into an immutable plan: the encoding, the lengths, the factor, where the model comes
from (its training config, or a pretrained checkpoint), the run id, the evaluation budget and the attention
calls each measurement makes. Every later stage (training, evaluation, rows, sweep planning) reads it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.config import TrainConfig, config_hash
from extrapolate.core.device import training_dtype
from extrapolate.core.distributed import current
from extrapolate.core.identity import pretrained_identity, run_identity, stored
from extrapolate.encodings import EncodingSpec, encoding_for
from extrapolate.run.curriculum import curriculum_stages
from extrapolate.run.prepare import Prepared
from extrapolate.run.request import RunRequest
from extrapolate.run.resolution import ResolvedRequest, longce_of
from extrapolate.tasks.kinds import Shapes, TaskSetup, asked_kinds, marked, options_read, reads_task_file
from extrapolate.tasks.perplexity import window_protocol
from extrapolate.training.finetune import FinetuneConfig, finetune_config, finetune_folder
from extrapolate.training.train import model_folder


@dataclass(frozen=True)
class ResolvedRun:
    request: RunRequest  # resolved (`resolve`)
    spec: EncodingSpec
    lengths: tuple[int, ...]
    tuned_len: int | None  # L' of a run at an extended length, else None
    factor: float  # 1.0 for encodings that train their own model; a RoPE scaling's s
    train_config: TrainConfig | None  # the base model's training; None: a pretrained model
    finetune: FinetuneConfig | None  # its fine-tune at L' (model_hash and model_folder are then the fine-tune's)
    model_hash: str
    model_folder: Path
    run_id: str
    budget: int  # tokens scored per held-out document at every length
    attention: dict[tuple[str, int], Shapes]  # (task, length) -> the attention calls it makes

    @property
    def is_pretrained(self) -> bool:
        return self.train_config is None

    @property
    def protocol_label(self) -> str:
        """The run's protocol, the perplexity windows' ("+bos" where every window starts with a BOS): the rows of a
        diverged cell record it; a measured row records its kind's own (`TaskKind.protocol`)."""
        request = self.request
        return marked(window_protocol(request.protocol, request.stride), request.bos == "always")

    @property
    def finetune_len(self) -> int | None:
        """L' of a run at an extended length (fine-tuned, or its zero-shot point), else None."""
        return self.finetune.length if self.finetune else self.tuned_len

    @property
    def bucket_width(self) -> int:  # loss by position: four buckets per training window
        return max(1, self.request.train_len // 4)


def resolve_run(resolved: ResolvedRequest, prepared: Prepared) -> ResolvedRun:
    """One cell's plan from its resolved request and the job's shared data (the tokenizer's identity and
    vocabulary complete the model's identity)."""
    request, spec, factor, tuned = resolved.request, resolved.spec, resolved.factor, resolved.tuned_len
    if prepared.left_out:  # optional kinds the lengths cannot measure: the cell is the run without them
        request = dataclasses.replace(request, tasks=tuple(t for t in request.tasks if t not in prepared.left_out))
    finetune = None
    if prepared.checkpoint is not None:
        config, model_hash, folder = (
            None,
            config_hash(pretrained_identity(request.model, request.backend)),
            Path(request.model),
        )
        if request.finetune_steps > 0:
            finetune = pretrained_finetune(request, prepared, spec.name, factor, tuned, model_hash)
            model_hash, folder = config_hash(finetune), finetune_folder(finetune)
    else:
        config = train_config(resolved, prepared)
        model_hash, folder = config_hash(config), model_folder(config)
        if request.finetune_steps > 0:
            finetune = finetune_config(
                config,
                spec.name,
                factor,
                tuned,
                request.finetune_steps,
                request.finetune_lr,
                adapter=adapter_of(request),
                pose=request.finetune_positions == "pose",
                longce=longce_of(request, tuned),
            )
            model_hash, folder = config_hash(finetune), finetune_folder(finetune)
    if request.encoding_options:  # a bad value fails now, not after training
        architecture = prepared.checkpoint.model.config if prepared.checkpoint is not None else config.model
        encoding_for(
            architecture,
            spec.name,
            factor=factor,
            original_len=request.train_len,
            options=dict(request.encoding_options),
        )
    planned = ResolvedRun(
        request,
        spec,
        resolved.lengths,
        tuned,
        factor,
        config,
        finetune,
        model_hash,
        folder,
        run_id(request, model_hash, factor),
        max(request.eval_tokens, max(resolved.lengths)),
        {},
    )
    setup = task_setup(planned, prepared)
    attention = {
        (kind.name, length): kind.attention_shapes(setup, length)
        for length in resolved.lengths
        for kind in asked_kinds(request.tasks)
    }
    return dataclasses.replace(planned, attention=attention)


def task_setup(resolved: ResolvedRun, prepared: Prepared) -> TaskSetup:
    """What the task kinds read of a cell's plan and its job's data to plan, measure and record it."""
    request = resolved.request
    return TaskSetup(
        heldout=prepared.heldout,
        prompts=prepared.passkey_builder,
        windows=request.protocol,
        stride=request.stride,
        budget=resolved.budget,
        bucket_width=resolved.bucket_width,
        bos=prepared.tokenizer.bos_id if request.bos == "always" else None,
        longppl_short=request.longppl_short,
        longppl_window=request.longppl_window,
        longppl_evaluator=request.evaluator,
    )


PRETRAINED_FINETUNE_LR = 2e-5  # the PI and YaRN papers' rate for Llama models


def pretrained_finetune(
    request: RunRequest, prepared: Prepared, encoding: str, factor: float, length: int, checkpoint_hash: str
) -> FinetuneConfig:
    """The fine-tune of a pretrained checkpoint at L': one row per step, the papers' rate unless given."""
    model = prepared.checkpoint.model
    base = TrainConfig(
        model=dataclasses.replace(model.config, max_len=request.train_len),
        corpus=prepared.corpus.name,
        tokenizer=prepared.tokenizer.identity,
        seq_len=request.train_len,
        batch_size=1,
        lr=PRETRAINED_FINETUNE_LR,
        seed=request.seed,
        dtype=training_dtype(prepared.device, request.train_dtype),
    )
    return finetune_config(
        base,
        encoding,
        factor,
        length,
        request.finetune_steps,
        request.finetune_lr,
        batch_size=1,
        base_hash=checkpoint_hash,
        adapter=adapter_of(request),
        pose=request.finetune_positions == "pose",
        longce=longce_of(request, length),
    )


def adapter_of(request):
    """The adapters a fine-tune of `request` trains, or None for every weight."""
    if request.finetune_adapter == "none" or request.finetune_steps == 0:
        return None
    from extrapolate.training.adapters import adapter_config

    return adapter_config(request.finetune_adapter, request.lora_rank)


def train_config(resolved: ResolvedRequest, prepared: Prepared) -> TrainConfig:
    """The training of a model trained here: the resolved architecture with one embedding row (and one output
    logit) per id of the tokenizer it trains with, and the request's budget."""
    request, steps = resolved.request, resolved.request.steps
    model = dataclasses.replace(resolved.architecture, vocab_size=prepared.tokenizer.vocab_size)
    return TrainConfig(
        model=model,
        corpus=prepared.corpus.name,
        tokenizer=prepared.tokenizer.identity,
        seq_len=request.train_len,
        batch_size=request.batch_size,
        steps=steps,
        lr=request.lr,
        warmup_steps=max(1, min(60, steps // 10)),
        seed=request.seed,
        dtype=training_dtype(prepared.device, request.train_dtype),
        passkey_fraction=prepared.passkey_fraction,
        passkey_task=prepared.passkey_identity,
        curriculum=curriculum_stages(request.curriculum),  # None: no curriculum, the identity of earlier models
        checkpoint_every=max(1, min(200, steps // 4)),
        compile=stored("compile", bool(request.compile)),
        processes=stored("processes", current().size),
    )


def run_id(request: RunRequest, model_hash: str, factor: float) -> str:
    """The id of a cell's rows, known before any training (a sweep skips the cells its table already has). The
    retrieval task file enters it where one of the request's kinds measures its prompts."""
    identity = run_identity(request, model_hash, factor, reads_task_file(request.tasks), options_read(request.tasks))
    return config_hash(identity, 10)
