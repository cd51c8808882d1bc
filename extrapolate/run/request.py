"""What a user asks for (`RunRequest`): the fields the command line's options fill, with the defaults of those
options. Light by design (the command line builds its options from these defaults at start-up, before torch
is imported); its resolution, every check and model-dependent default, is `resolution.py`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.defaults import DEFAULT_CORPUS, DEFAULT_LR


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for: the defaults here are those of the command line's options (cli/options.py)."""

    encoding: str | None = "rope"  # None: rope, or a pretrained model's RoPE as released (`with_encoding`)
    train_len: int | None = None  # None: DEFAULT_TRAIN_LEN for presets, a pretrained model's own context
    eval_lens: tuple[int, ...] = ()  # empty: L, 2L, … up to eval_len
    eval_len: int | None = None  # default 8·L
    factor: float | None = None  # RoPE scalings; default max eval length / L
    model: str = "small"
    width: int | None = None  # overrides of the preset
    layers: int | None = None
    heads: int | None = None
    embed_std: float | None = None  # token-embedding init std; None: GPT-2's 0.02, as every other weight
    position_std: float | None = None  # the learned table's init std; None: LEARNED_TABLE_STD
    position_lr_scale: float | None = None  # the learned table's rate / the model's; None: LEARNED_TABLE_LR_SCALE
    corpus: str = DEFAULT_CORPUS
    tokenizer: str = "bpe"  # models trained here: bytes | bpe | bpe:N; a pretrained model uses its own
    tasks: tuple[str, ...] = ("perplexity",)  # the kind's name (tasks/perplexity.py)
    steps: int | None = None  # None: the encoding's default budget (DEFAULT_STEPS, or its own `default_steps`)
    batch_size: int | None = None  # rows a training step; None: batch_tokens / L (`batch_rows`)
    batch_tokens: int | None = None  # tokens a training step when batch_size is not given; None: DEFAULT_BATCH_TOKENS
    # shorter rows before the rows of L (data/batches.Curriculum): "none", or stages "length:steps,..."; None: the
    # default (`resolution.default_curriculum`). Resolved, it holds the stages or "none"
    curriculum: str | None = None
    lr: float = DEFAULT_LR
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"  # evaluation precision
    train_dtype: str = "auto"  # bf16 autocast where the device has fast bf16 matmuls, else float32
    compile: bool = False  # torch.compile the training forward (part of the trained model's identity)
    protocol: str = "full"
    stride: int = 256
    eval_tokens: int = 8192  # tokens scored per held-out document, the same at every length
    eval_docs: int | None = None  # at most this many held-out documents (None: all)
    learned_policy: str = "error"
    kernel: str = "auto"
    # what a retrieval cell's prompts may hold at once, e.g. "800M" (core/memory.py); None: a share of the free
    # memory. It sets micro-batches, not answers, so no run id holds it
    eval_memory: str | None = None
    # share of training rows that are passkey prompts (within L); None: DEFAULT_PASSKEY_FRACTION when L leaves room
    passkey_fraction: float | None = None
    passkey_task: str | None = None  # a task name under tasks/ or a TOML path; None: see DEFAULT_RETRIEVAL_TASK
    # the task files whose prompts make the retrieval share of training rows, one drawn per row (empty: passkey_task)
    train_tasks: tuple[str, ...] = ()
    # kinds of `tasks` left out, with a warning, where the shortest evaluation length cannot hold their prompts
    # (`run`'s default retrieval, so that a short --train-len still runs its perplexity); asked for by name, a
    # kind that cannot be measured is an error
    optional_tasks: tuple[str, ...] = ()
    longppl_short: int = 4096  # LongPPL's short context: key tokens are those a longer one helps (the authors')
    longppl_window: int = 1024  # targets per short pass (the authors' sliding_window)
    evaluator: str | None = None  # LongPPL's evaluator, a pretrained model (None: the evaluated model itself)
    finetune_steps: int = 0  # continue training at L' for this many steps (0: zero-shot)
    finetune_len: int | None = None  # L'; default s·L with --factor, else the longest evaluation length
    finetune_lr: float | None = None  # default a tenth of --lr
    # what a fine-tune trains: every weight (none) or low-rank adapters (lora | longlora, training/adapters.py)
    finetune_adapter: str = "none"
    lora_rank: int = 8  # the adapters' rank r (α = 2r)
    # a fine-tune's rows: contiguous (rows of L') | pose (rows of L, position ids skipping to cover L': data/pose.py)
    finetune_positions: str = "contiguous"
    # a fine-tune's loss: ce (every target alike) | longce (each target weighted by what the long context adds:
    # training/longce.py), its short context (default L), targets per short pass (default a quarter of it), cap
    finetune_loss: str = "ce"
    longce_short: int | None = None
    longce_window: int | None = None
    longce_max_weight: float = 5.0
    # a BOS token first in every window and prompt: auto (where the tokenizer adds one by default) | always |
    # never; resolved to always or never (`resolve_request`)
    bos: str = "auto"
    # retrieval prompts in the tokenizer's chat template (the question as the user turn, the answer scored after
    # the assistant's start): none | auto (where the tokenizer has a template); resolved to template or none
    chat_template: str = "none"
    encoding_options: tuple = ()  # sorted (name, value) pairs of a training-free encoding (encodings/options.py)
    # what computes a pretrained checkpoint (backends/): auto | native | transformers; resolved to one of the last two
    backend: str = "auto"
    trust_remote_code: bool = False  # a checkpoint's own code may run (transformers' trust_remote_code)
    out: Path | None = None
    name: str | None = None
    # what a job may do to a folder holding other rows (run/folder_setting.py): choices about the folder, not
    # the measurement, so a run record leaves them out
    append: bool = False  # add rows of another model, corpus or evaluation setting beside the folder's
    overwrite: bool = False  # replace the rows of a cell measured another way

    @property
    def extended(self) -> bool:
        """A fine-tune (or its zero-shot point, 0 steps) at an extended length L' was asked for."""
        return self.finetune_steps > 0 or self.finetune_len is not None
