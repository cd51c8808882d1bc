"""The resolution of what a user asks for (a `RunRequest`, request.py): `resolve`: every check, every default that
depends on the model, and everything that follows from the request alone (the encoding's spec, the lengths,
L', the RoPE factor, the architecture), made once, at the edge. Later stages read the `ResolvedRequest` and
never re-derive or look up any of it."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from extrapolate.backends import BACKENDS
from extrapolate.core.config import PRESETS, ModelConfig
from extrapolate.core.defaults import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_RETRIEVAL_TASK,
    DEFAULT_TRAIN_LEN,
    LEARNED_TABLE_LR_SCALE,
    LEARNED_TABLE_STD,
)
from extrapolate.core.device import DTYPES, TRAIN_DTYPES
from extrapolate.core.errors import UserError
from extrapolate.core.identity import default_steps, stored
from extrapolate.core.memory import parse_memory
from extrapolate.core.numbers import SEED_MAX
from extrapolate.core.registry import require_known
from extrapolate.data.pretrained import load_config, names_a_path
from extrapolate.data.tokenizers import parse_spec
from extrapolate.encodings import EncodingSpec, get_spec
from extrapolate.encodings.catalog import validate_shape
from extrapolate.encodings.options import options_for
from extrapolate.kernels.attention import KERNELS
from extrapolate.run.checkpoint import (
    BOS_CHOICES,
    CHAT_CHOICES,
    check_encoding_before_loading,
    check_factor,
    check_pretrained_encoding,
    is_pretrained,
    load_pretrained_once,
    refuse_shaping,
    resolved_bos,
    resolved_chat,
    with_encoding,
)
from extrapolate.run.curriculum import with_curriculum
from extrapolate.run.request import RunRequest
from extrapolate.tasks.files import PasskeyTask, list_task_names, load_task
from extrapolate.tasks.kinds import RETRIEVAL, TASK_KINDS, asked_kinds, file_kind, is_retrieval
from extrapolate.tasks.longppl import LONGPPL
from extrapolate.tasks.perplexity import PROTOCOLS


def resolve_request(request: RunRequest) -> RunRequest:
    """The request with every model-dependent default filled (the retrieval task, the training length, a
    pretrained checkpoint's tokenizer), checked in full; a mistake is one UserError line."""
    check_encoding_before_loading(request)  # before a checkpoint's weights are read
    request = named_retrieval_task(with_encoding(request))
    if request.encoding_options:  # only the options of this encoding (a sweep's apply where they exist)
        own = options_for(get_spec(request.encoding), request.encoding_options)
        if own and request.finetune_steps > 0:
            raise UserError("--encoding-option with --finetune-steps: a fine-tune trains with the default options")
        request = dataclasses.replace(request, encoding_options=tuple(sorted(own.items())))
    trained_here = not is_pretrained(request.model)
    if request.passkey_task is None:
        task = DEFAULT_RETRIEVAL_TASK["trained" if trained_here else "pretrained"]
        request = dataclasses.replace(request, passkey_task=task)
    request = measured_by_file_kind(request)
    if not trained_here:
        refuse_shaping(request)
        # a checkpoint brings its own tokenizer (whatever --tokenizer says): the request records that one
        checkpoint = load_pretrained_once(request)
        check_pretrained_encoding(request, checkpoint)
        train_len = checkpoint.original_len if request.train_len is None else request.train_len
        if train_len is None:
            raise UserError(
                f"{request.model}'s config states no training context: give it as --train-len (L, what lengths "
                "and factors count from)"
            )
        request = dataclasses.replace(
            request, train_len=train_len, tokenizer=checkpoint.tokenizer.identity, backend=checkpoint.backend
        )
        tokenizer = checkpoint.tokenizer
        chat = resolved_chat(request.chat_template, tokenizer)
        request = dataclasses.replace(request, bos=resolved_bos(request.bos, tokenizer), chat_template=chat)
    else:
        require_known("--backend choice", request.backend, BACKENDS)
        if request.backend in ("transformers", "vllm"):
            raise UserError(
                f"--backend {request.backend} computes a pretrained checkpoint; {request.model} is a model trained here"
            )
        chat = resolved_chat(request.chat_template, None)
        request = dataclasses.replace(
            request, bos=resolved_bos(request.bos, None), chat_template=chat, backend="native"
        )
        if request.train_len is None:
            request = dataclasses.replace(request, train_len=DEFAULT_TRAIN_LEN)
    request = with_batch_rows(request)
    if request.steps is None:  # the budget of the model it trains, RoPE's for a RoPE scaling
        trained_spec = get_spec(get_spec(request.encoding).base_encoding)
        request = dataclasses.replace(request, steps=default_steps(trained_spec))
    if trained_here:
        request = with_curriculum(request)
    check(request)
    if trained_here:
        spec = get_spec(request.encoding)
        parse_spec(request.tokenizer)  # a bad --tokenizer fails here, before the corpus is read
        config = architecture_for(request, spec.base_encoding)
        validate_shape(
            spec,
            n_heads=config.n_heads,
            head_dim=config.head_dim,
            factor=request.factor or 1.0,
            n_layers=config.n_layers,
            options=dict(request.encoding_options),
        )
    return request


@dataclass(frozen=True)
class ResolvedRequest:
    """A request resolved once, at the edge (`resolve`): the request with every default filled and checked,
    and what follows from it alone. The job's data (`prepare`) and each cell's plan (`resolve_run`) read these
    fields; neither looks anything up again."""

    request: RunRequest  # every default filled (`resolve_request`)
    spec: EncodingSpec
    lengths: tuple[int, ...]  # the evaluation lengths, ascending
    tuned_len: int | None  # L' of a run at an extended length (fine-tuned, or its zero-shot point); else None
    factor: float  # a RoPE scaling's s (default: the longest length, or L', over L); 1.0 for the others
    architecture: ModelConfig | None  # a model trained here, before the tokenizer sets its vocabulary
    # the loaded PretrainedModel (once per process) of a pretrained model (`is_pretrained`), else None
    checkpoint: object | None
    task: PasskeyTask  # the retrieval task file, loaded and validated


def resolve(request: RunRequest) -> ResolvedRequest:
    """The user's request resolved in one pass: a mistake is one UserError line, before any data is read."""
    request = resolve_request(request)
    spec = get_spec(request.encoding)
    lengths = tuple(lengths_for(request))
    tuned = extended_length(request, lengths) if request.extended else None
    if tuned is not None:  # LongCE's short context fits in L'
        longce_of(request, tuned)
    # s = L'/L, never below 1: evaluated only inside L, a scaling is plain RoPE (s = 1), not a compression
    rescales = not spec.trains_own_model and spec.kind == "rotary"  # DroPE removes the rotation: nothing to scale
    factor = request.factor or max(1.0, (tuned or max(lengths)) / request.train_len) if rescales else 1.0
    checkpoint = load_pretrained_once(request) if is_pretrained(request.model) else None  # loaded already
    architecture = None if checkpoint is not None else architecture_for(request, spec.base_encoding)
    return ResolvedRequest(
        request, spec, lengths, tuned, factor, architecture, checkpoint, load_task(request.passkey_task)
    )


def with_batch_rows(request: RunRequest) -> RunRequest:
    """The request with its rows a training step: --batch-size where given, else the token budget over L (at least
    one row: a step at L = 4096 reads what one at L = 256 reads). The rows are what the trained model's identity
    holds, so the budget is then left out (a resolved request resolved again asks for the same rows)."""
    if request.batch_size is not None and request.batch_tokens is not None:
        raise UserError("give --batch-size (rows a step) or --batch-tokens (tokens a step), not both")
    if request.batch_tokens is not None and request.batch_tokens < 1:
        raise UserError(f"--batch-tokens must be at least 1, got {request.batch_tokens}")
    if request.batch_size is not None:
        return request
    tokens = DEFAULT_BATCH_TOKENS if request.batch_tokens is None else request.batch_tokens
    return dataclasses.replace(request, batch_size=max(1, tokens // request.train_len), batch_tokens=None)


def named_retrieval_task(request: RunRequest) -> RunRequest:
    """`--tasks ruler-multikey`: the retrieval task, with that task file. A task file's name is that file on every
    model (`--tasks passkey` is tasks/passkey.toml); `retrieval` is the run's retrieval task, whichever file."""
    named = [t for t in request.tasks if is_task_file(t)]
    if not named:
        return request
    if len(named) > 1 or (request.passkey_task not in (None, named[0])):
        also = f" and --passkey-task {request.passkey_task}" if request.passkey_task else ""
        raise UserError(f"one retrieval task per run, got {', '.join(named)}{also}")
    tasks = tuple(dict.fromkeys(RETRIEVAL if t == named[0] else t for t in request.tasks))
    return dataclasses.replace(request, tasks=tasks, passkey_task=named[0])


def is_task_file(name: str) -> bool:
    """A task file's name under tasks/, or the path of a task file."""
    return name in list_task_names() or (name.endswith(".toml") and Path(name).is_file())


def measured_by_file_kind(request: RunRequest) -> RunRequest:
    """The retrieval asked for (`retrieval`, or the kind a resolved request names) is measured by the kind the
    task file names: `--tasks retrieval --passkey-task vt` measures VT with RULER's kind."""
    kind = file_kind(load_task(request.passkey_task)).name
    for name in (*request.tasks, *request.optional_tasks):  # a kind named: the record's form, with its task file
        if name != RETRIEVAL and is_retrieval(name) and name != kind:
            files = [t for t in list_task_names() if load_task(t).kind == name]
            shown = ", ".join(files[:4]) + (", …" if len(files) > 4 else "")
            raise UserError(
                f"--tasks {name} names a kind of task, not a task: give one of its files ({shown}; "
                f"`extrapolate tasks`), or --passkey-task with a file of that kind (the run's retrieval task, "
                f"{request.passkey_task}, is a {kind} task)"
            )

    def as_kinds(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(kind if is_retrieval(t) else t for t in names))

    return dataclasses.replace(request, tasks=as_kinds(request.tasks), optional_tasks=as_kinds(request.optional_tasks))


def check(request: RunRequest) -> None:
    if request.train_len < 2:
        raise UserError(f"--train-len must be at least 2, got {request.train_len}")
    if request.eval_len is not None and request.eval_lens:
        raise UserError("give --eval-len (L, 2L, … up to it) or --eval-lens (an explicit list), not both")
    if request.eval_len is not None and request.eval_len < request.train_len:
        raise UserError(f"--eval-len ({request.eval_len}) is shorter than --train-len ({request.train_len})")
    if any(n < 1 for n in request.eval_lens):
        raise UserError("--eval-lens must be positive")
    check_factor(request)
    if request.steps < 1 or request.batch_size < 1:
        raise UserError("--steps and --batch-size must be at least 1")
    if request.protocol not in PROTOCOLS:
        raise UserError(f"unknown protocol {request.protocol!r}; valid: {', '.join(PROTOCOLS)}")
    if request.dtype not in DTYPES:
        raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {request.dtype!r}")
    if request.train_dtype not in TRAIN_DTYPES:
        raise UserError(f"--train-dtype must be one of {', '.join(TRAIN_DTYPES)}, got {request.train_dtype!r}")
    if request.stride < 1:
        raise UserError(f"--stride must be at least 1, got {request.stride}")
    lengths = lengths_for(request)
    for kind in asked_kinds(request.tasks):
        kind.check_request(request, lengths)
    require_known("kernel", request.kernel, KERNELS)
    require_known("--bos choice", request.bos, BOS_CHOICES)
    require_known("--chat-template choice", request.chat_template, CHAT_CHOICES)
    if request.learned_policy not in ("error", "clamp"):
        raise UserError("--learned-policy must be error or clamp")
    if request.passkey_fraction is not None and not 0 <= request.passkey_fraction < 1:
        raise UserError("--passkey-fraction must be in [0, 1)")
    for task in request.train_tasks:
        if not is_task_file(task):
            require_known("training task", task, list_task_names())
    if request.train_tasks and request.passkey_fraction == 0:
        raise UserError("--train-tasks with --passkey-fraction 0: no training row would hold their prompts")
    if not request.tasks:
        raise UserError("--tasks names no task: give perplexity, retrieval or a task file's name (extrapolate tasks)")
    for task in request.tasks:  # a retrieval task file's name is one too (before `named_retrieval_task` maps it)
        if not is_task_file(task):
            require_known("task", task, [*TASK_KINDS.names(), RETRIEVAL, *list_task_names()])
    if not 0 <= request.seed <= SEED_MAX:  # what every generator seeds from (a signed 64-bit integer)
        raise UserError(f"--seed must be in [0, 2^63), got {request.seed}")
    if request.eval_docs is not None and request.eval_docs < 1:
        raise UserError("--eval-docs must be at least 1")
    if request.eval_memory is not None:
        parse_memory(request.eval_memory)
    if request.finetune_steps < 0:
        raise UserError(f"--finetune-steps must be ≥ 0, got {request.finetune_steps}")
    recalibrates = get_spec(request.encoding).recalibrates  # DroPE: fine-tuned at L itself
    if request.finetune_len is not None and recalibrates and request.finetune_len != request.train_len:
        raise UserError(
            f"{request.encoding} recalibrates at the training length: --finetune-len is L = {request.train_len} "
            f"or left out, got {request.finetune_len}"
        )
    if request.finetune_len is not None and not recalibrates and request.finetune_len <= request.train_len:
        raise UserError(
            f"--finetune-len ({request.finetune_len}) must be longer than the training length L ({request.train_len})"
        )
    if request.finetune_lr is not None and not request.finetune_lr > 0:
        raise UserError(f"--finetune-lr must be > 0, got {request.finetune_lr}")
    check_adapter(request)
    check_positions(request)
    check_loss(request)
    if request.evaluator is not None and not request.evaluator.strip():
        raise UserError("--evaluator names no model: give a pretrained model, or leave it out (the model its own)")
    if request.evaluator is not None and not is_pretrained(request.evaluator):
        raise UserError(
            f"--evaluator {request.evaluator!r}: give a pretrained model (a known name, a checkpoint folder, a hub "
            "id; `extrapolate export` writes a model trained here as a folder)"
        )
    if request.evaluator is not None and names_a_path(request.evaluator):
        if not Path(request.evaluator).expanduser().exists():  # said before a model is trained, not after
            raise UserError(f"--evaluator {request.evaluator}: no such folder or file")
    if request.evaluator is not None and LONGPPL.name in request.tasks:  # its config read now, not after training
        evaluator_config(request.evaluator, request.trust_remote_code)


@functools.cache
def evaluator_config(name: str, trust_remote_code: bool):
    """LongPPL's evaluator's config, read once a process (every cell of a sweep is resolved)."""
    try:
        return load_config(name, trust_remote_code)
    except UserError as exc:
        raise UserError(f"--evaluator: {exc}") from None


POSITIONS = ("contiguous", "pose")


def check_positions(request: RunRequest) -> None:
    """--finetune-positions pose: a fine-tune (steps given) of a RoPE scaling whose angles do not depend on the
    sequence's length, as the authors fine-tune Linear, NTK and YaRN scalings with it."""
    require_known("--finetune-positions", request.finetune_positions, POSITIONS)
    if request.finetune_positions == "contiguous":
        return
    from extrapolate.encodings.frequencies import SCALINGS

    name = get_spec(request.encoding).name
    if not request.extended:
        raise UserError("--finetune-positions pose sets a fine-tune's rows: give --finetune-steps above 0")
    if name not in SCALINGS or SCALINGS[name].dynamic:
        raise UserError(
            f"--finetune-positions pose fine-tunes a RoPE scaling at fixed angles (pi, ntk, yarn, …), "
            f"not {request.encoding}"
        )
    if request.finetune_adapter == "longlora":
        raise UserError("--finetune-positions pose with LongLoRA: its shifted groups assume contiguous rows")


def check_loss(request: RunRequest) -> None:
    """--finetune-loss longce: a fine-tune (steps given) on rows of L' (PoSE's rows of L see no long context)."""
    from extrapolate.training.longce import LOSSES

    require_known("--finetune-loss", request.finetune_loss, LOSSES)
    if request.finetune_loss == "ce":
        return
    if not request.extended:
        raise UserError(
            f"--finetune-loss {request.finetune_loss} sets a fine-tune's loss: give --finetune-steps above 0"
        )
    if request.finetune_positions == "pose":
        raise UserError("--finetune-loss longce with PoSE: its rows of L hold no context longer than L to weigh by")
    if request.finetune_adapter == "longlora":
        # LongLoRA trains under shifted group attention: LongCE's short pieces would be grouped too (and need a
        # length the group divides), so neither loss would be the one its weights compare
        raise UserError("--finetune-loss longce with LongLoRA: its shifted groups would cut LongCE's passes")


def check_adapter(request: RunRequest) -> None:
    """--finetune-adapter: a known method, for a fine-tune, LongLoRA's on a RoPE model, peft installed."""
    from extrapolate.training.adapters import METHODS, require_peft

    if request.finetune_adapter == "none":
        return
    require_known("--finetune-adapter", request.finetune_adapter, ("none", *METHODS))
    if not request.extended:  # a sweep's zero-step point (`extended`, 0 steps) trains nothing, adapters or not
        raise UserError(
            f"--finetune-adapter {request.finetune_adapter} trains a fine-tune: give --finetune-steps above 0"
        )
    if not 1 <= request.lora_rank <= 4096:
        raise UserError(f"--lora-rank must be in [1, 4096], got {request.lora_rank}")
    if request.finetune_adapter == "longlora" and get_spec(request.encoding).kind != "rotary":
        raise UserError(f"LongLoRA fine-tunes RoPE models (its shifted groups assume it), not {request.encoding}")
    require_peft()


def lengths_for(request: RunRequest) -> list[int]:
    """The evaluation lengths: the explicit list, or L, 2L, 4L, … up to the longest (default 8·L)."""
    L = request.train_len
    if request.eval_lens:
        return sorted(set(request.eval_lens))
    longest = request.eval_len if request.eval_len is not None else 8 * L
    lengths, n = [], L
    while n < longest:
        lengths.append(n)
        n *= 2
    return lengths + [longest]


def architecture_for(request: RunRequest, base_encoding: str) -> ModelConfig:
    """The architecture of a model trained here: the preset with the request's overrides, at L."""
    if request.model not in PRESETS:
        from extrapolate.core.registry import unknown_name_message
        from extrapolate.data.known_models import KNOWN

        raise UserError(unknown_name_message("model", request.model, list(PRESETS) + list(KNOWN)))
    flags = {"d_model": "width", "n_layers": "layers", "n_heads": "heads"}
    overrides = {k: getattr(request, flag) for k, flag in flags.items() if getattr(request, flag) is not None}
    for name, value in overrides.items():
        if value < 1:
            raise UserError(f"--{flags[name]} must be at least 1, got {value}")
    config = ModelConfig(**{**PRESETS[request.model], **overrides}, encoding=base_encoding, max_len=request.train_len)
    std = request.embed_std
    if std is None:
        default = get_spec(base_encoding).default_embed_std
        std = default(config.d_model) if default is not None else None
    table = learned_table(request, base_encoding)
    return dataclasses.replace(config, embed_std=stored("embed_std", std), **table).validate()


def learned_table(request: RunRequest, base_encoding: str) -> dict:
    """The learned table's recipe as ModelConfig fields (stored as the identity rules say); a model of another
    encoding has no table, and no recipe in its config."""
    if base_encoding != "learned":
        return {}
    std = LEARNED_TABLE_STD if request.position_std is None else request.position_std
    scale = LEARNED_TABLE_LR_SCALE if request.position_lr_scale is None else request.position_lr_scale
    return {"position_std": stored("position_std", std), "position_lr_scale": stored("position_lr_scale", scale)}


def output_folder(request: RunRequest) -> Path:
    if request.out is not None:
        return Path(request.out)
    return Path("results") / (request.name or f"{request.encoding}-L{request.train_len}")


def longce_of(request: RunRequest, length: int):
    """The LongCE weights of the request's fine-tune at L' = `length` (None: cross-entropy, or no fine-tune)."""
    from extrapolate.training.longce import longce_config

    if request.finetune_steps == 0:
        return None
    short, window = request.longce_short, request.longce_window
    try:
        return longce_config(request.finetune_loss, short, window, request.longce_max_weight, request.train_len, length)
    except UserError as exc:  # a sweep fine-tunes each encoding at its own L' (DroPE's is L): say whose
        raise UserError(f"{request.encoding}: {exc}") from None


def extended_length(request: RunRequest, lengths) -> int:
    """L' of a fine-tune: --finetune-len, else s·L with --factor, else the longest evaluation length."""
    if request.finetune_len is not None:
        return request.finetune_len
    if get_spec(request.encoding).recalibrates:  # DroPE recalibrates at L
        return request.train_len
    length = round(request.factor * request.train_len) if request.factor else max(lengths)
    if length <= request.train_len:
        raise UserError(
            f"the fine-tune length L' = {length} is not longer than L = {request.train_len}: "
            "give --finetune-len, a --factor > 1, or longer --eval-lens"
        )
    return length
