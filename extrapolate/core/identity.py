"""The rules that decide what enters an identity: the hash of a model (its cache folder), the id of a run (the
`run_id` column of every committed result) and the identity of a task file. Results and cached models are
found again by these alone, so each rule keeps the identities of what already exists when a new option is
added: an option at the value every earlier model or row had is left out. `config.canonical_json` and the
call sites in run/, training/, tasks/, encodings/ and data/ apply these rules and decide nothing of their own;
tests/test_identity_rules.py pins each rule, tests/test_identities.py the identities of a spread of cells."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from extrapolate.core.defaults import DEFAULT_STEPS

GPT2_INIT_STD = 0.02  # the std TransformerLM initialises every weight with, as GPT-2 does

# The optional fields of a model's or a training's config, each with what it means when unset: the value every
# model had before the field existed. A config stores that value as None (`stored`), and the canonical form
# leaves such a None out (`omit_unset`), so the model hashes exactly as one whose config lacks the field: its
# cache folder and the run ids of its results stay valid. Any other value is another model, with its own hash.
UNSET_MEANS: dict[str, Any] = {
    "embed_std": GPT2_INIT_STD,  # token embeddings at GPT-2's init, every weight's
    "position_std": GPT2_INIT_STD,  # a learned position table at GPT-2's init
    "position_lr_scale": 1.0,  # a learned position table at the model's own learning rate
    "qkv_bias": False,  # no biases on the query, key and value projections
    "head_size": None,  # a head is d_model / n_heads wide
    "qk_norm": False,  # queries and keys enter the rotation as projected
    "sliding_window": None,  # every query attends to every earlier key
    "layer_types": None,  # every layer attends alike
    "sliding_rope_base": None,  # sliding layers rotate as the full ones
    "embed_multiplier": 1.0,  # token embeddings enter as looked up
    "norm_unit_offset": False,  # RMSNorm scales by its weight w
    "post_norms": False,  # attention and MLP outputs join the residual as computed
    "attention_scalar": None,  # scores are q·k / √head_dim
    "logit_softcap": None,  # logits as the head gives them
    "attention_softcap": None,  # attention scores as q·k gives them
    "rotary_dim": None,  # RoPE rotates the whole head
    "compile": False,  # the training forward runs eagerly
    "processes": 1,  # one process trains (under torchrun the gradients are averaged over ranks: other floats)
    "adapter": None,  # every weight trains (no low-rank adapters)
    "curriculum": None,  # every step reads rows of the training length L
    "longce": None,  # every target of a fine-tune weighs the same (not LongCE's weights)
    "pose_len": None,  # a fine-tune reads rows of L' itself, ids 0 … L' - 1 (not PoSE's skipped ids)
}


def stored(field: str, value: Any) -> Any:
    """`value` as a config stores it in the optional `field`: None where it is what an unset field means, so a
    model asked for with that value explicitly is the same model as one asked for without it."""
    return None if value == UNSET_MEANS[field] else value


def as_built(field: str, value: Any) -> Any:
    """The value a model is built with for the optional `field` stored as `value`: what unset means, where unset."""
    return UNSET_MEANS[field] if value is None else value


def omit_unset(data: Any) -> Any:
    """`data` (a config as nested dicts and lists) without the optional fields that are unset: the canonical
    form of a model that does not use an option is the one it had before the option existed."""
    if isinstance(data, dict):
        return {k: omit_unset(v) for k, v in data.items() if not (k in UNSET_MEANS and v is None)}
    if isinstance(data, (list, tuple)):
        return [omit_unset(v) for v in data]
    return data


def default_steps(trained_spec) -> int:
    """The training budget when --steps is not given: that of the encoding the model trains with (`trained_spec`,
    RoPE's for a RoPE scaling), its own `default_steps` or else DEFAULT_STEPS. The budget is part of the model's
    hash, so every RoPE scaling asks for the one RoPE model and reuses it, whichever scaling trained it."""
    return trained_spec.default_steps or DEFAULT_STEPS


def pretrained_identity(name: str, backend: str = "native") -> dict:
    """What a pretrained model's hash is the hash of: the name it is asked for by (a known name, a folder, a hub
    id), and the backend that computes it where that is not the native model (which every
    earlier result ran on, adds nothing, so those run ids stay). The name says where its weights come from, so
    the hash is known before they are read; a fine-tune of the model records this hash as its base."""
    return {"pretrained": name, **({"backend": backend} if backend != "native" else {})}


def run_identity(
    request, model_hash: str, factor: float, task_file_read: bool, options_read: set[str] = frozenset()
) -> dict:
    """What the id of a cell's rows is the hash of: its model, its factor s, and each field of its resolved
    request (a RunRequest) that changes a measurement. A field that changes none of the run's measurements is
    None or left out (`measured_stride`, `measured_task`, `options_identity`), so giving it makes no new run.
    `task_file_read`: whether one of the request's task kinds measures the retrieval task file's prompts, and
    `options_read` the request options its kinds read (LongPPL's enter where LongPPL is measured; the kinds
    live in tasks/, above this module, which the caller asks)."""
    return {
        "model": model_hash,
        "encoding": request.encoding,
        "factor": factor,
        "protocol": request.protocol,
        "stride": measured_stride(request.protocol, request.stride),
        "dtype": request.dtype,
        "eval_tokens": request.eval_tokens,
        "learned_policy": request.learned_policy,
        "passkey_task": measured_task(task_file_read, request.passkey_task),
        **options_identity(request.encoding_options, request.encoding),
        **(
            longppl_identity(request.longppl_short, request.longppl_window, request.evaluator)
            if "longppl_short" in options_read
            else {}
        ),
        **bos_identity(request.bos),
        **chat_identity(request.chat_template),
    }


def longppl_identity(short: int, window: int, evaluator: str | None = None) -> dict:
    """LongPPL's short context and window where not the authors' (4096, 1024), and its evaluator where another
    model chooses the key tokens: rows measured with others are another cell; with theirs, the model its own
    evaluator, a run keeps the id it had before LongPPL existed."""
    context = {} if (short, window) == (4096, 1024) else {"short_context": [short, window]}
    return context | ({"evaluator": evaluator} if evaluator is not None else {})


def chat_identity(chat_template: str) -> dict:
    """A run whose prompts are wrapped in the tokenizer's chat template (resolved to "template") holds
    "chat": True; a run with plain prompts holds nothing, so it keeps the id it had before the choice existed."""
    return {"chat": True} if chat_template == "template" else {}


def bos_identity(bos: str) -> dict:
    """A run whose windows and prompts start with the tokenizer's BOS (`bos` resolved to "always") holds
    "bos": True; one without a BOS holds nothing, so it keeps the id it had before the choice existed."""
    return {"bos": True} if bos == "always" else {}


def measured_stride(protocol: str, stride: int) -> int | None:
    """The stride a run id holds: the sliding protocol's step, None under the full protocol, which scores one
    window per chunk whatever the stride."""
    return stride if protocol == "sliding" else None


def measured_task(task_file_read: bool, passkey_task: str | None) -> str | None:
    """The retrieval task a run id holds: None when no task kind of the run reads the task file (it scores no
    retrieval), where the file changes no measurement (a perplexity run keeps its id whichever task is the
    default)."""
    return passkey_task if task_file_read else None


# Defaults an encoding changed after committed rows were measured at the earlier value:
# (encoding, option) -> (the earlier value, the default now). STRING gained its reference's attention factor on cos
# and sin (encodings/string.py's ATTENTION_FACTOR, 0.1·ln 2 + 1); its earlier rows were measured without it.
CHANGED_DEFAULTS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("string", "attention_factor"): (1.0, 0.1 * math.log(2) + 1),
}


def options_identity(options: Iterable[tuple[str, Any]], encoding: str | None = None) -> dict:
    """A training-free encoding's options as a run id holds them: under "options" when any are given, nothing
    when none are, so a run at the encoding's own defaults has the id of a run made before options existed.
    Where a default changed (`CHANGED_DEFAULTS`) the id holds the value the run measures at unless it is the
    earlier one: rows made before the change keep their ids, and a run at the new default is a new cell, so a
    sweep resuming into a folder of earlier rows measures it rather than taking theirs."""
    options = dict(options)
    for (changed, name), (earlier, now) in CHANGED_DEFAULTS.items():
        if changed == encoding:
            value = options.get(name, now)
            if value == earlier:
                options.pop(name, None)
            else:
                options[name] = value
    return {"options": options} if options else {}


def without_defaults(record, optional: Iterable[str]) -> dict:
    """The fields of a dataclass `record` as its identity hashes them: an `optional` field at its declared
    default is left out, so a file written before that field existed keeps its identity. An optional field
    declared without a default is always kept."""
    optional = set(optional)
    defaults = {f.name: f.default for f in dataclasses.fields(record) if f.name in optional}
    return {k: v for k, v in record.__dict__.items() if k not in defaults or v != defaults[k]}


def model_folder_name(encoding: str, train_len: int, model_hash: str) -> str:
    """A trained model's cache folder: found again by its hash, named by its encoding and length for a reader."""
    return f"{encoding}-L{train_len}-{model_hash}"


def finetune_folder_name(encoding: str, train_len: int, length: int, steps: int | str, finetune_hash: str) -> str:
    """A fine-tune's cache folder: the encoding it trains with and the base model's length L, then L' and the
    steps, then its hash ("*" for the steps and the hash: the pattern of every fine-tune of that kind)."""
    return f"{encoding}-L{train_len}-ft{length}x{steps}-{finetune_hash}"
