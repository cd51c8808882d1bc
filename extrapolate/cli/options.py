"""The options `run` and `sweep` share, declared once, and the decorator that adds them to a command and
hands it one parsed `RunRequest` (no option is listed twice, and nothing is collected from `locals()`)."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated, Optional

import typer

from extrapolate.cli.util import parse_int_list, parse_name_list
from extrapolate.encodings.options import parse_encoding_options
from extrapolate.core.defaults import DEFAULT_STEPS, SINUSOIDAL_STEPS
from extrapolate.run import RunRequest

# option name -> (annotation, default); a command may override a default (sweep's tasks) or the help (out)
SHARED = {
    "train_len": (Annotated[Optional[int], typer.Option(help="training length L (default 256; a pretrained model's own context)")], None),
    "eval_len": (Annotated[Optional[int], typer.Option(help="longest evaluation length; lengths double from L (default 8·L)")], None),
    "eval_lens": (Annotated[Optional[str], typer.Option(help="explicit evaluation lengths, e.g. 256,512,1k")], None),
    "factor": (Annotated[Optional[float], typer.Option(help="RoPE scaling factor s (default: longest length / L)")], None),
    "model": (Annotated[str, typer.Option(help="size preset (tiny, small = CPU default, base = GPU), a known pretrained model (see `extrapolate models`), a checkpoint folder, a .gguf file, or a hub id")], "small"),
    "width": (Annotated[Optional[int], typer.Option(help="model width (overrides the preset)")], None),
    "layers": (Annotated[Optional[int], typer.Option(help="layers (overrides the preset)")], None),
    "heads": (Annotated[Optional[int], typer.Option(help="attention heads (overrides the preset)")], None),
    "embed_std": (Annotated[Optional[float], typer.Option(help="token-embedding init std (default 0.02, as every weight; sinusoidal D^-1/2; the tied head shares it)")], None),
    "position_std": (Annotated[Optional[float], typer.Option(help="learned: init std of the position table (default 0: zeros; GPT-2: 0.02)")], None),
    "position_lr_scale": (Annotated[Optional[float], typer.Option(help="learned: the table's learning rate as a multiple of --lr (default 0.1; GPT-2: 1)")], None),
    "corpus": (Annotated[str, typer.Option(help="built-in name, local text/JSONL/Parquet path, or hub dataset")], "shakespeare"),
    "tokenizer": (Annotated[str, typer.Option(help="tokenizer of models trained here: bpe (2048 ids, learned from the corpus) | bpe:N | bytes; a pretrained model uses its own")], "bpe"),
    "tasks": (Annotated[str, typer.Option(help="comma-separated tasks: perplexity, passkey")], "perplexity"),
    "steps": (Annotated[Optional[int], typer.Option(help=f"training steps (default {DEFAULT_STEPS}; sinusoidal {SINUSOIDAL_STEPS}: its retrieval at L forms later)")], None),
    "batch_size": (Annotated[int, typer.Option(help="sequences per training step")], 32),
    "lr": (Annotated[float, typer.Option("--lr", help="peak learning rate")], 3e-3),
    "device": (Annotated[str, typer.Option(help="auto | cpu | cuda | mps")], "auto"),
    "dtype": (Annotated[str, typer.Option(help="evaluation precision: float32 | bfloat16")], "float32"),
    "train_dtype": (Annotated[str, typer.Option(help="training autocast: auto (bfloat16 where the device has fast bf16 matmuls, else float32) | bfloat16 | float32")], "auto"),
    "compile": (Annotated[bool, typer.Option(help="torch.compile the training forward: a minute or so of compiling, then faster steps (recorded in the model's config and so in its identity)")], False),
    "protocol": (Annotated[str, typer.Option(help="perplexity protocol: full (one window per chunk) | sliding")], "full"),
    "stride": (Annotated[int, typer.Option(help="stride of the sliding protocol")], 256),
    "eval_tokens": (Annotated[int, typer.Option(help="tokens scored per held-out document at every length")], 8192),
    "eval_docs": (Annotated[Optional[int], typer.Option(help="at most this many held-out documents (default all)")], None),
    "learned_policy": (Annotated[str, typer.Option(help="learned table past its rows: error (unsupported) | clamp")], "error"),
    "kernel": (Annotated[str, typer.Option(help="attention kernel: auto | sdpa | fused-bias | flex | blocked | reference")], "auto"),
    "passkey_fraction": (Annotated[Optional[float], typer.Option(help="share of training rows that are passkey prompts (default 0.5 when L leaves room for a prompt, else 0)")], None),
    "passkey_task": (Annotated[Optional[str], typer.Option(
        help="retrieval task file: a name under tasks/ or a TOML path (default: passkey-word, a one-token key, for "
             "models trained here; the 5-digit passkey for pretrained models)")], None),
    "finetune_len": (Annotated[Optional[int], typer.Option(help="fine-tune length L' (default s·L with --factor, else the longest evaluation length)")], None),
    "finetune_lr": (Annotated[Optional[float], typer.Option(help="fine-tune learning rate, constant after 10 warmup steps (default --lr / 10)")], None),
    "encoding_option": (Annotated[Optional[list[str]], typer.Option(
        help="NAME=VALUE of a training-free encoding, repeatable: beta_fast, beta_slow, truncate, attention_factor, "
             "low_freq_factor, high_freq_factor, short_factor, long_factor (comma lists), window, group, leak")], None),
    "out": (Annotated[Optional[Path], typer.Option(help="output folder (default results/<encoding>-L<L>)")], None),
}
KernelOpt = SHARED["kernel"][0]
DeviceOpt = SHARED["device"][0]


def to_request(values: dict) -> RunRequest:
    """The shared options as the library's request (lists parsed; the encoding and seed set by the command)."""
    tasks, eval_lens = values.pop("tasks"), values.pop("eval_lens")
    options = parse_encoding_options(values.pop("encoding_option"))
    return RunRequest(tasks=tuple(parse_name_list(tasks)), encoding_options=options,
                      eval_lens=tuple(parse_int_list(eval_lens, "--eval-lens", 1)) if eval_lens is not None else (),
                      **values)


def with_request(out_help: str | None = None, **defaults):
    """Add the shared options to a command whose last parameter is `request: RunRequest`; the command is
    called with them parsed into that request."""

    def decorate(body):
        own = [p for p in inspect.signature(body, eval_str=True).parameters.values() if p.name != "request"]
        shared = []
        for name, (annotation, default) in SHARED.items():
            if name == "out" and out_help:
                annotation = Annotated[Optional[Path], typer.Option(help=out_help)]
            shared.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                            default=defaults.get(name, default)))

        @functools.wraps(body)
        def command(**values):
            request = to_request({name: values.pop(name) for name in SHARED})
            return body(request=request, **values)

        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + shared
        command.__signature__ = inspect.Signature(parameters)
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        del command.__wrapped__  # typer must read the signature above, not the body's
        return command

    return decorate
