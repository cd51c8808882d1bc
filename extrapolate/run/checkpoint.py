"""What a request for a pretrained checkpoint resolves beyond a model trained here: the checkpoint loaded once
per process in its backend, its encoding as released where none is given, the encodings it can take, and the
BOS and chat-template choices its tokenizer decides. `request` is a `run.request.RunRequest` throughout (not
imported: that module resolves requests with these functions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from extrapolate.core.config import PRESETS
from extrapolate.core.errors import UserError
from extrapolate.core.registry import require_known
from extrapolate.encodings import get_spec


def check_against_release(request, released: str) -> None:
    """A RoPE checkpoint takes RoPE and its scalings; a learned-table or ALiBi checkpoint evaluates as released,
    under its own encoding's name; no checkpoint has an encoding's parameters trained."""
    spec = get_spec(request.encoding)
    rotary_release = get_spec(released).kind == "rotary"
    if spec.trained_parameters:
        raise UserError(
            f"{spec.name} learns parameters of its own in training, which {request.model} has not: train a model "
            "with it here (--model tiny, small, …)"
        )
    if rotary_release and spec.kind != "rotary" and not spec.recalibrates:  # DroPE removes the released RoPE
        raise UserError(f"{request.model} uses RoPE: --encoding must be rope or a RoPE scaling, not {spec.name}")
    if not rotary_release and spec.name != released:
        raise UserError(
            f"{request.model} encodes positions with {released}, which it is evaluated with as released: "
            f"--encoding {released} (or none), not {spec.name}"
        )


def check_encoding_before_loading(request) -> None:
    """`check_against_release` from the checkpoint's config alone, before its weights are read (minutes for a
    large model), where the config decides: a family the native model computes, whose RoPE as released
    `released_rope` reads. Others are checked once loaded (`check_pretrained_encoding`)."""
    from extrapolate.backends.choice import chosen_backend
    from extrapolate.data.pretrained import load_config
    from extrapolate.data.rope_config import released_rope

    check_factor(request)  # whatever the model
    if request.encoding is None or not is_pretrained(request.model):
        return
    spec = get_spec(request.encoding)
    if spec.trained_parameters:
        check_against_release(request, "rope")  # refused whatever the release
    if request.backend not in ("auto", "native"):
        return  # the other backends' scalings are checked with the loaded checkpoint
    refuse_shaping(request)  # as loading would, first
    config = load_config(request.model, request.trust_remote_code)
    if chosen_backend(request.backend, config) != "native":
        return
    released = released_rope(config).encoding
    check_against_release(request, released)
    if spec.kind == "rotary" and request.encoding_options:  # their values against the heads (e.g. LongRoPE's lists)
        check_options_on(config, request)


def check_factor(request) -> None:
    if request.factor is not None and not 1 <= request.factor < float("inf"):
        raise UserError(f"--factor is s = L'/L, a finite number ≥ 1 (1: plain RoPE), got {request.factor:g}")


def check_options_on(hf, request) -> None:
    """The scaling built, as the native model would build it, from the checkpoint's config alone: a value its
    heads cannot take is refused now. Any valid factor serves; the lengths it is evaluated at decide the real
    one later."""
    from extrapolate.data.families import config_from_hf, original_context
    from extrapolate.encodings.catalog import encoding_for
    from extrapolate.encodings.options import options_for

    spec = get_spec(request.encoding)
    original = request.train_len or original_context(hf)
    options = options_for(spec, request.encoding_options)
    encoding_for(config_from_hf(hf), spec.name, factor=request.factor or 1.0, original_len=original, options=options)


def check_pretrained_encoding(request, checkpoint) -> None:
    """`check_against_release`, and on the transformers and vLLM backends the scalings they implement."""
    spec, released = get_spec(request.encoding), checkpoint.released.encoding
    rotary_release = get_spec(released).kind == "rotary"
    check_against_release(request, released)
    if checkpoint.backend == "native":
        return
    if checkpoint.backend == "vllm":
        check_vllm_request(request, spec.name, checkpoint.released)
        return
    if request.finetune_steps > 0:
        raise UserError("--finetune-steps trains the native model; the transformers backend evaluates only")
    if rotary_release and spec.name != released:
        from extrapolate.data.rope_config import hf_rope_parameters

        config = checkpoint.model.config
        options = dict(request.encoding_options)
        try:
            hf_rope_parameters(spec.name, config.rope_base, 2.0, config.max_len, options, head_dim=config.rotated_dim)
        except UserError:
            raise UserError(
                f"{spec.name} needs the native model (transformers implements linear, dynamic, yarn, longrope "
                f"and llama3 scalings); {request.model} runs on the transformers backend"
            ) from None


def check_vllm_request(request, encoding: str, released) -> None:
    """vLLM generates: it measures the retrieval and RULER tasks on the checkpoint as released, nothing that
    reads log-likelihoods or changes the model."""
    from extrapolate.tasks.kinds import asked_kinds

    scored = [kind.name for kind in asked_kinds(request.tasks) if not kind.generates]
    if scored:
        raise UserError(
            "--backend vllm measures the generation tasks (passkey, RULER): give --tasks passkey or a RULER task; "
            f"{', '.join(scored)} reads log-likelihoods (--backend native or transformers)"
        )
    if request.finetune_steps > 0:
        raise UserError("--finetune-steps trains the native model; the vllm backend evaluates only")
    given = (encoding, request.factor, dict(request.encoding_options))
    if given != (released.encoding, released.factor, dict(released.options)):
        raise UserError(
            f"--backend vllm evaluates {request.model} as released ({released.describe()}); "
            "a scaling or option needs --backend native or transformers"
        )


BOS_CHOICES = ("auto", "always", "never")


def resolved_bos(bos: str, tokenizer) -> str:
    """always or never: `auto` follows the tokenizer (a BOS where it adds one by default, as the field's
    evaluations feed a model); the tokenizers of models trained here have no BOS token."""
    require_known("--bos choice", bos, BOS_CHOICES)
    has_bos = tokenizer is not None and tokenizer.bos_id is not None
    if bos == "always" and not has_bos:
        raise UserError("--bos always: the tokenizer has no BOS token (models trained here have none)")
    if bos == "auto":
        return "always" if has_bos and tokenizer.adds_bos else "never"
    return bos


def refuse_shaping(request) -> None:
    """Options that shape a model trained here are refused for a pretrained model, before it is loaded: silently
    ignored, they would suggest a model that was never built."""
    shaping = [
        f"--{name.replace('_', '-')}"
        for name in ("width", "layers", "heads", "embed_std", "position_std", "position_lr_scale")
        if getattr(request, name) is not None
    ]
    if shaping:
        raise UserError(
            f"{', '.join(shaping)} shape a model trained here; the pretrained model "
            f"{request.model} brings its own architecture and weights"
        )


CHAT_CHOICES = ("none", "auto", "template")  # template: what auto resolves to where the tokenizer has one


def resolved_chat(choice: str, tokenizer) -> str:
    """template or none: `auto` wraps prompts where the tokenizer has a chat template (an instruct checkpoint);
    the tokenizers of models trained here have none."""
    require_known("--chat-template choice", choice, CHAT_CHOICES)
    has_template = tokenizer is not None and tokenizer.chat_parts() is not None
    if choice == "template" and not has_template:
        raise UserError("--chat-template: the tokenizer has no chat template")
    return "template" if choice != "none" and has_template else "none"


def with_encoding(request):
    """The request with its encoding named: where none is given, rope for a model trained here, and for a
    pretrained model its RoPE as released (the scaling it ships with, its factor and its options; a --factor or
    an --encoding-option given replaces the checkpoint's own)."""
    if request.encoding is not None:
        return request
    if not is_pretrained(request.model):
        return dataclasses.replace(request, encoding="rope")
    refuse_shaping(request)
    released = load_pretrained_once(request).released
    options = {**dict(released.options), **dict(request.encoding_options)}
    return dataclasses.replace(
        request,
        encoding=released.encoding,
        factor=request.factor if request.factor is not None else released.factor,
        encoding_options=tuple(sorted(options.items())),
    )


def is_pretrained(model: str) -> bool:
    """Whether `model` names a pretrained model (a known name, a checkpoint file or folder, a hub id) rather
    than a size preset of a model trained here."""
    from extrapolate.data.known_models import KNOWN

    if model in PRESETS:
        return False
    return model in KNOWN or model.endswith(".gguf") or Path(model).expanduser().exists() or "/" in model


_LOADED_CHECKPOINT: dict = {}  # the one PretrainedModel this process holds, by (spec, backend, remote code)


def load_pretrained_once(request):
    """The PretrainedModel of the request's model in its backend, loaded once per process (a sweep evaluates
    several scalings on one)."""
    from extrapolate.backends.choice import load_pretrained

    key = (request.model, request.backend, request.trust_remote_code)
    if key not in _LOADED_CHECKPOINT:
        _LOADED_CHECKPOINT.clear()
        checkpoint = load_pretrained(*key)
        # found again under the backend `auto` resolved to, which the resolved request names
        _LOADED_CHECKPOINT[key] = _LOADED_CHECKPOINT[(request.model, checkpoint.backend, key[2])] = checkpoint
    return _LOADED_CHECKPOINT[key]


_LOADED_EVALUATOR: dict = {}  # the one LongPPL evaluator this process holds, by name and device


def evaluator_once(request, window_tokenizer, device):
    """LongPPL's evaluator (`--evaluator`) in its backend and its released encoding, on `device`, loaded once
    per process; None where the request names none (the evaluated model chooses its own key tokens)."""
    if request.evaluator is None:
        return None
    from extrapolate.backends.choice import load_pretrained
    from extrapolate.encodings import encoding_for
    from extrapolate.tasks.longppl_evaluator import Evaluator

    key = (request.evaluator, str(device))
    if key not in _LOADED_EVALUATOR:
        _LOADED_EVALUATOR.clear()
        loaded = load_pretrained(request.evaluator, "auto", request.trust_remote_code)
        model, released = loaded.model.to(device).eval(), loaded.released
        if loaded.backend == "native":  # its RoPE as it ships (transformers' model computes its own)
            encoding = encoding_for(
                model.config,
                released.encoding,
                factor=released.factor or 1.0,
                original_len=released.original_len,
                options=dict(released.options),
            )
            model.set_encoding(encoding.to(device))
        same = loaded.tokenizer.identity == window_tokenizer.identity
        _LOADED_EVALUATOR[key] = Evaluator(
            model, loaded.tokenizer, request.evaluator, None if same else window_tokenizer
        )
    return _LOADED_EVALUATOR[key]
