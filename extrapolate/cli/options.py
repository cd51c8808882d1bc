"""The options `run` and `sweep` share, declared once, and the decorator that adds them to a command and
hands it one parsed `RunRequest` (no option is listed twice, and nothing is collected from `locals()`); their
defaults are the request's own. Also the flags `encodings show` takes for the encodings' options, made from
their declarations (encodings/options.py)."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated, Optional

import typer

from extrapolate.cli.config import apply_config
from extrapolate.cli.util import parse_float_list, parse_int_list, parse_name_list
from extrapolate.core.defaults import (
    CURRICULUM_FROM,
    CURRICULUM_STAGE,
    DEFAULT_BATCH_TOKENS,
    DEFAULT_BPE_VOCAB,
    DEFAULT_PASSKEY_FRACTION,
    DEFAULT_RETRIEVAL_TASK,
    DEFAULT_STEPS,
    DEFAULT_TRAIN_LEN,
    FINETUNE_WARMUP_STEPS,
    LEARNED_TABLE_LR_SCALE,
    LEARNED_TABLE_STD,
    SINUSOIDAL_STEPS,
)
from extrapolate.core.errors import UserError
from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.core.numbers import LENGTH_HINT
from extrapolate.encodings.options import SHOWN, TRAINING_FREE, OptionSpec, parse_encoding_options
from extrapolate.run.request import RunRequest

DEFAULT = RunRequest()  # every default of the options below


def listed_names(options) -> str:
    """The options' names, comma-separated, each run of list-valued ones marked as comma lists."""
    options = list(options)
    names = []
    for index, option in enumerate(options):
        ends_lists = option.type is list and (index + 1 == len(options) or options[index + 1].type is not list)
        names.append(option.name + (" (comma lists)" if ends_lists else ""))
    return ", ".join(names)


def shared(kind, default, help: str, *flags: str, length: bool = False) -> tuple:
    """One shared option: its annotation (type, help, and its flag where not the parameter's name) and default;
    `length`: a token count, which takes `4k` for 4096 as --eval-lens does."""
    if length:
        help += " (k = 1024 tokens, M = 1024²)"
        # the metavar named, as typer releases differ in what they call a parsed option (INTEGER, PARSE_LENGTH)
        return Annotated[kind, typer.Option(*flags, help=help, parser=parse_length, metavar="LENGTH")], default
    return Annotated[kind, typer.Option(*flags, help=help)], default


def parse_length(value) -> int:
    """A token count: a whole number, or one with a `k` (×1024) or `M` (×1024²) as in 4k, 32K or 1M."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        (length,) = parse_int_list(text, "a length") if text and "," not in text else (None,)
    except UserError:
        length = None
    if length is None:
        raise typer.BadParameter(f"{text!r} is not a length ({LENGTH_HINT})")
    return length


# the help panel of each shared option (`run -h`, `sweep -h`): the options by what they set
PANELS = {
    "Model": (
        "model",
        "backend",
        "trust_remote_code",
        "width",
        "layers",
        "heads",
        "embed_std",
        "position_std",
        "position_lr_scale",
        "encoding_option",
    ),
    "Data": ("corpus", "tokenizer"),
    "Training": (
        *("train_len", "steps", "batch_size", "batch_tokens", "curriculum", "lr", "train_dtype", "compile"),
        *("finetune_len", "finetune_lr", "finetune_adapter", "lora_rank", "finetune_positions"),
        *("finetune_loss", "longce_short", "longce_window", "longce_max_weight"),
    ),
    "Evaluation": (
        "tasks",
        "eval_len",
        "eval_lens",
        "factor",
        "protocol",
        "stride",
        "eval_tokens",
        "longppl_short",
        "longppl_window",
        "evaluator",
        "eval_docs",
        "eval_memory",
        "dtype",
        "learned_policy",
        "kernel",
        "device",
        "bos",
    ),
    "Retrieval": ("passkey_task", "passkey_fraction", "train_tasks", "chat_template"),
    "Output": ("out", "append", "overwrite", "config"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def in_panel(name: str, annotation):
    """`annotation` (Annotated[type, typer.Option]) with its option shown in the help panel of `name`."""
    kind, option = annotation.__origin__, annotation.__metadata__[0]
    option.rich_help_panel = PANEL_OF[name]
    return Annotated[kind, option]


# option name -> (annotation, default); a command may override a default (sweep's tasks) or the help (out)
SHARED = {
    "train_len": shared(
        Optional[int],
        DEFAULT.train_len,
        f"training length L, e.g. 256 or 4k (default {DEFAULT_TRAIN_LEN}; a pretrained model's own context)",
        length=True,
    ),
    "eval_len": shared(
        Optional[int],
        DEFAULT.eval_len,
        "longest evaluation length, e.g. 32k; lengths double from L (default 8·L)",
        length=True,
    ),
    # a comma list, parsed into the request's tuple (not given: L, 2L, … up to --eval-len)
    "eval_lens": shared(
        Optional[str], None, "explicit evaluation lengths, e.g. 256,512,1k (k = 1024 tokens, M = 1024²)"
    ),
    "factor": shared(Optional[float], DEFAULT.factor, "RoPE scaling factor s (default: longest length / L)"),
    "model": shared(
        str,
        DEFAULT.model,
        "size preset (tiny, small = CPU default, base = GPU), a known pretrained model (see "
        "`extrapolate models`), a checkpoint folder, a .gguf file, or a hub id",
    ),
    "backend": shared(
        str,
        DEFAULT.backend,
        "what computes a pretrained checkpoint: auto (the project's model where it implements the family, "
        "else transformers') | native | transformers | vllm (generation tasks, as released; optional extra)",
    ),
    "trust_remote_code": shared(
        bool,
        DEFAULT.trust_remote_code,
        "let a checkpoint that needs code from its own folder run that code (transformers' trust_remote_code)",
    ),
    "width": shared(Optional[int], DEFAULT.width, "model width (overrides the preset)"),
    "layers": shared(Optional[int], DEFAULT.layers, "layers (overrides the preset)"),
    "heads": shared(Optional[int], DEFAULT.heads, "attention heads (overrides the preset)"),
    "embed_std": shared(
        Optional[float],
        DEFAULT.embed_std,
        f"token-embedding init std (default {GPT2_INIT_STD}, as every weight; sinusoidal D^-1/2; "
        "the tied head shares it)",
    ),
    "position_std": shared(
        Optional[float],
        DEFAULT.position_std,
        f"learned: init std of the position table (default {LEARNED_TABLE_STD:g}: zeros; GPT-2: {GPT2_INIT_STD})",
    ),
    "position_lr_scale": shared(
        Optional[float],
        DEFAULT.position_lr_scale,
        f"learned: the table's learning rate as a multiple of --lr (default {LEARNED_TABLE_LR_SCALE:g}; GPT-2: 1)",
    ),
    "corpus": shared(str, DEFAULT.corpus, "built-in name, local text/JSONL/Parquet path, or hub dataset"),
    "tokenizer": shared(
        str,
        DEFAULT.tokenizer,
        f"tokenizer of models trained here: bpe ({DEFAULT_BPE_VOCAB} ids, learned from the corpus) "
        "| bpe:N | bytes; a pretrained model uses its own",
    ),
    "tasks": shared(
        Optional[str],
        ",".join(DEFAULT.tasks),
        "comma-separated tasks: perplexity, retrieval (the --passkey-task file: by default "
        f"{DEFAULT_RETRIEVAL_TASK['trained']} on a model trained here, {DEFAULT_RETRIEVAL_TASK['pretrained']} on a "
        "checkpoint), or a task file's name, the same task on every model (see `extrapolate tasks`); `run` without "
        "it measures perplexity and the retrieval, the retrieval left out where the lengths hold no prompt",
    ),
    "steps": shared(
        Optional[int],
        DEFAULT.steps,
        f"training steps (default {DEFAULT_STEPS}; sinusoidal {SINUSOIDAL_STEPS}: its retrieval at L forms later)",
    ),
    "batch_size": shared(
        Optional[int], DEFAULT.batch_size, "rows (sequences) a training step (default: --batch-tokens / L, at least 1)"
    ),
    "batch_tokens": shared(
        Optional[int],
        DEFAULT.batch_tokens,
        f"tokens a training step, whatever L: rows = tokens / L (default {DEFAULT_BATCH_TOKENS}, "
        f"{DEFAULT_BATCH_TOKENS // DEFAULT_TRAIN_LEN} rows at L = {DEFAULT_TRAIN_LEN})",
    ),
    "curriculum": shared(
        Optional[str],
        DEFAULT.curriculum,
        "shorter rows before the rows of L, as many tokens a step: stages LENGTH:STEPS,... (e.g. 256:600,1024:300), "
        f"then L for the rest; none for rows of L throughout (default: from L = {CURRICULUM_FROM}, rows of "
        f"{DEFAULT_TRAIN_LEN} doubling up to L, each longer length for {CURRICULUM_STAGE:.1%} of the steps, "
        "half of them in all at most)",
    ),
    "lr": shared(float, DEFAULT.lr, "peak learning rate", "--lr"),
    "device": shared(str, DEFAULT.device, "auto | cpu | cuda | mps"),
    "dtype": shared(str, DEFAULT.dtype, "evaluation precision: float32 | bfloat16"),
    "train_dtype": shared(
        str,
        DEFAULT.train_dtype,
        "training autocast: auto (bfloat16 where the device has fast bf16 matmuls, else float32) | bfloat16 | float32",
    ),
    "compile": shared(
        bool,
        DEFAULT.compile,
        "torch.compile the training forward: a minute or so of compiling, then faster steps "
        "(recorded in the model's config and so in its identity)",
    ),
    "protocol": shared(str, DEFAULT.protocol, "perplexity protocol: full (one window per chunk) | sliding"),
    "stride": shared(int, DEFAULT.stride, "stride of the sliding protocol", length=True),
    "eval_tokens": shared(int, DEFAULT.eval_tokens, "tokens scored per held-out document at every length", length=True),
    "eval_docs": shared(Optional[int], DEFAULT.eval_docs, "at most this many held-out documents (default all)"),
    "eval_memory": shared(
        Optional[str],
        DEFAULT.eval_memory,
        "memory a retrieval cell's prompts may hold at once, e.g. 800M or 4G; they run in micro-batches that fit "
        "it, with the same answers (default a quarter of the device's free memory, on a CPU or MPS at most 512M)",
    ),
    "learned_policy": shared(str, DEFAULT.learned_policy, "learned table past its rows: error (unsupported) | clamp"),
    "kernel": shared(str, DEFAULT.kernel, "attention kernel: auto | sdpa | fused-bias | flex | blocked | reference"),
    "passkey_fraction": shared(
        Optional[float],
        DEFAULT.passkey_fraction,
        "share of training rows that are passkey prompts "
        f"(default {DEFAULT_PASSKEY_FRACTION:g} when L leaves room for a prompt, else 0)",
    ),
    "passkey_task": shared(
        Optional[str],
        DEFAULT.passkey_task,
        "retrieval task file: a name under tasks/ or a TOML path "
        f"(default: {DEFAULT_RETRIEVAL_TASK['trained']}, a one-token key, for models trained here; "
        "the 5-digit passkey for pretrained models)",
    ),
    "train_tasks": shared(
        Optional[str],
        None,
        "comma-separated task files whose prompts make the retrieval share of training rows, each row drawn "
        "from one of them at random (e.g. passkey,vt; default: the retrieval task file)",
    ),
    "longppl_short": shared(
        int,
        DEFAULT.longppl_short,
        "LongPPL's short context (--tasks longppl): a key token's loss drops by > 2 with the whole window "
        "against this many tokens before it (the authors' 4096)",
        length=True,
    ),
    "longppl_window": shared(int, DEFAULT.longppl_window, "LongPPL's targets per short pass (the authors' 1024)"),
    "evaluator": shared(
        Optional[str],
        DEFAULT.evaluator,
        "LongPPL's evaluator: a pretrained model to choose the key tokens",
    ),
    "finetune_len": shared(
        Optional[int],
        DEFAULT.finetune_len,
        "fine-tune length L' (default s·L with --factor, else the longest evaluation length)",
        length=True,
    ),
    "finetune_lr": shared(
        Optional[float],
        DEFAULT.finetune_lr,
        f"fine-tune learning rate, constant after {FINETUNE_WARMUP_STEPS} warmup steps (default --lr / 10)",
    ),
    "finetune_adapter": shared(
        str,
        DEFAULT.finetune_adapter,
        "what a fine-tune trains: none (every weight) | lora (rank-r adapters on q, k, v, o) | longlora (LoRA, the "
        "embeddings and norms, shifted group attention while training); needs the lora extra (peft)",
    ),
    "lora_rank": shared(int, DEFAULT.lora_rank, "rank r of the fine-tune's adapters (α = 2r)"),
    "finetune_positions": shared(
        str,
        DEFAULT.finetune_positions,
        "what a fine-tune's rows are: contiguous (rows of L', ids 0 … L'-1) | pose (PoSE: rows of L whose ids "
        "skip ahead once to cover L', a RoPE scaling's fine-tune at L's cost)",
    ),
    "finetune_loss": shared(
        str, DEFAULT.finetune_loss, "a fine-tune's loss: ce | longce (each target weighted by what the context adds)"
    ),
    "longce_short": shared(Optional[int], DEFAULT.longce_short, "LongCE's short context (default L)", length=True),
    "longce_window": shared(Optional[int], DEFAULT.longce_window, "LongCE's targets per short pass (default short/4)"),
    "longce_max_weight": shared(float, DEFAULT.longce_max_weight, "LongCE's cap on a target's weight (the authors' 5)"),
    # NAME=VALUE items, parsed into the request's sorted (name, value) pairs
    "bos": shared(
        str,
        DEFAULT.bos,
        "a BOS token first in every window and prompt: auto (where the tokenizer adds one by default, as the "
        "field's evaluations do) | always | never",
    ),
    "chat_template": shared(
        str,
        DEFAULT.chat_template,
        "retrieval prompts in the tokenizer's chat template, the question as the user turn and the answer "
        "scored after the assistant's start: none | auto (where the tokenizer has one, e.g. an instruct checkpoint) | "
        "template (the same, refused where the tokenizer has none)",
    ),
    "encoding_option": shared(
        Optional[list[str]],
        None,
        f"NAME=VALUE of a training-free encoding, repeatable: {listed_names(TRAINING_FREE.values())}",
    ),
    "out": shared(Optional[Path], DEFAULT.out, "output folder (default results/<encoding>-L<L>)"),
    "append": shared(
        bool,
        DEFAULT.append,
        "add rows of another model, corpus, length or evaluation setting to a folder that holds other rows "
        "(refused without it)",
    ),
    "overwrite": shared(
        bool, DEFAULT.overwrite, "replace the rows of cells the folder holds measured another way (refused without it)"
    ),
}
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--config",
        help="a TOML file of these options (names as the flags), or a run's run.json to run it again; flags given "
        "here override it",
        callback=apply_config,
        is_eager=True,
    ),
]
KernelOpt = SHARED["kernel"][0]
DeviceOpt = SHARED["device"][0]


def to_request(values: dict) -> RunRequest:
    """The shared options as the library's request (lists parsed; the encoding and seed set by the command)."""
    from extrapolate.tasks.kinds import default_tasks, is_retrieval  # the task registry: imported when a command runs

    tasks, eval_lens = values.pop("tasks"), values.pop("eval_lens")
    options = parse_encoding_options(values.pop("encoding_option"))
    train_tasks = values.pop("train_tasks")
    train_task_names = tuple(parse_name_list(train_tasks, "--train-tasks")) if train_tasks else ()
    if train_tasks and train_tasks.strip() and not train_task_names:  # ",": a list that names nothing
        raise UserError("--train-tasks names no task: give task files separated by commas (e.g. passkey,vt)")
    return RunRequest(
        tasks=tuple(parse_name_list(tasks, "--tasks")) if tasks is not None else default_tasks(),
        # not given (run): both axes, the retrieval left out with a warning where no prompt fits
        optional_tasks=() if tasks is not None else tuple(t for t in default_tasks() if is_retrieval(t)),
        train_tasks=train_task_names,
        encoding_options=options,
        eval_lens=tuple(parse_int_list(eval_lens, "--eval-lens", 1, lengths=True)) if eval_lens is not None else (),
        **values,
    )


def with_request(out_help: str | None = None, **defaults):
    """Add the shared options to a command whose last parameter is `request: RunRequest`; the command is
    called with them parsed into that request."""

    def decorate(body):
        own = [p for p in inspect.signature(body, eval_str=True).parameters.values() if p.name != "request"]
        added = []
        for name, (annotation, default) in SHARED.items():
            if name == "out" and out_help:
                annotation = Annotated[Optional[Path], typer.Option(help=out_help)]
            added.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=in_panel(name, annotation),
                    default=defaults.get(name, default),
                )
            )

        config = in_panel("config", ConfigOpt)
        added.append(inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=config, default=None))

        @functools.wraps(body)
        def command(**values):
            values.pop("config")  # read already: its values are the options' defaults
            request = to_request({name: values.pop(name) for name in SHARED})
            return body(request=request, **values)

        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        command.__signature__ = inspect.Signature(parameters)
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        del command.__wrapped__  # typer must read the signature above, not the body's
        return command

    return decorate


def show_flag(option: OptionSpec):
    """The `encodings show` flag of a declared option: its help; not given by default (the encoding's own
    default applies). A list is given as comma-separated text, a yes/no as --name/--no-name."""
    if option.type is bool:
        flag = option.flag
        return Annotated[Optional[bool], typer.Option(f"{flag}/--no-{flag[2:]}", help=option.help)]
    return Annotated[Optional[str if option.type is list else option.type], typer.Option(help=option.help)]


def with_encoding_options(body):
    """Put the flags of every option `encodings show` takes (`SHOWN`) where the command's `options` parameter
    stands; the command is called with the options given, as {name: value} (comma lists parsed)."""
    signature = inspect.signature(body, eval_str=True)
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name == "options":
            parameters += [
                inspect.Parameter(
                    option.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=show_flag(option), default=None
                )
                for option in SHOWN
            ]
        else:
            parameters.append(parameter)

    @functools.wraps(body)
    def command(**values):
        given = {option: values.pop(option.name) for option in SHOWN}
        for option, value in given.items():
            if option.choices and value is not None and value not in option.choices:
                raise UserError(f"{option.flag}: one of {', '.join(option.choices)}, got {value!r}")
        options = {
            option.name: parse_float_list(value, option.flag) if option.type is list else value
            for option, value in given.items()
            if value is not None
        }
        return body(options=options, **values)

    command.__signature__ = signature.replace(parameters=parameters)
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    del command.__wrapped__  # typer must read the signature above, not the body's
    return command
