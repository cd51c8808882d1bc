"""Frozen configurations with a canonical JSON form; the hash of a config is its identity (run id, cache key)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from extrapolate.core.defaults import DEFAULT_BATCH_SIZE, DEFAULT_CORPUS, DEFAULT_LR, DEFAULT_STEPS, DEFAULT_TRAIN_LEN
from extrapolate.core.errors import UserError
from extrapolate.core.identity import omit_unset


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None  # None: same as n_heads; fewer: grouped-query attention
    d_ff: int | None = None  # None: 4·d (gelu) or the Llama rule (swiglu)
    norm: str = "rmsnorm"  # rmsnorm | layernorm
    mlp: str = "swiglu"  # swiglu | geglu (gated, tanh-approximated GELU: Gemma) | gelu
    tie_embeddings: bool = True
    norm_eps: float = 1e-5
    encoding: str = "rope"  # the encoding the model is trained with
    rope_base: float = 10000.0
    max_len: int = DEFAULT_TRAIN_LEN  # training length: rows of a learned table, original length of RoPE scalings
    # The optional fields: None is what identity.UNSET_MEANS says, and an unset field is left out of the hash.
    # token-embedding init std; None: GPT-2's 0.02, as every other weight (`--embed-std`)
    embed_std: float | None = None
    # the learned position table's init std and learning-rate multiplier; None: GPT-2's recipe, the 0.02 of
    # every weight and the model's own rate
    position_std: float | None = None
    position_lr_scale: float | None = None
    # biases on the query, key and value projections (Qwen2 checkpoints); None: none, as every model trained here
    qkv_bias: bool | None = None
    # the width of a head where it is not d_model / n_heads (Qwen3, Phi-3 variants); None: d_model / n_heads
    head_size: int | None = None
    # RMSNorm of every query and key head before the rotation (Qwen3 checkpoints); None: none
    qk_norm: bool | None = None
    # every layer attends to its last `sliding_window` keys only (Mistral v0.1, Qwen2 with a window); None: all
    sliding_window: int | None = None
    # per layer, "sliding" or "full" (Gemma 2 and 3): only the sliding layers attend through `sliding_window`
    # and rotate with `sliding_rope_base`; None: every layer attends alike
    layer_types: tuple[str, ...] | None = None
    # the sliding layers' own plain RoPE base (Gemma 3's local RoPE); None: they rotate as the full layers do
    sliding_rope_base: float | None = None
    # token embeddings multiplied by this as looked up, in their dtype (Gemma: √d_model); None: by 1
    embed_multiplier: float | None = None
    # RMSNorm weights stored as w scale by 1 + w, in float32 (Gemma); None: by w
    norm_unit_offset: bool | None = None
    # the attention and MLP outputs normed again before their residual adds (Gemma 2 and 3); None: not
    post_norms: bool | None = None
    # attention scores are q·k / √attention_scalar (Gemma's query_pre_attn_scalar); None: q·k / √head_dim
    attention_scalar: float | None = None
    # logits soft-capped as c·tanh(logits / c) (Gemma 2's final_logit_softcapping); None: as the head gives them
    logit_softcap: float | None = None
    # attention scores soft-capped as c·tanh(s / c) before the mask (Gemma 2's attn_logit_softcapping); None: not
    attention_softcap: float | None = None
    # RoPE rotates the first `rotary_dim` features of each head and passes the rest (Phi-4-mini's
    # partial_rotary_factor); None: the whole head
    rotary_dim: int | None = None

    @property
    def head_dim(self) -> int:
        return self.head_size or self.d_model // self.n_heads

    @property
    def rotated_dim(self) -> int:
        """The features of each head RoPE rotates, what its frequencies are computed for: `rotary_dim` or the
        whole head."""
        return self.rotary_dim or self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ff_dim(self) -> int:
        if self.d_ff:
            return self.d_ff
        if self.mlp == "gelu":
            return 4 * self.d_model
        hidden = int(8 * self.d_model / 3)
        return 32 * ((hidden + 31) // 32)

    def stored(self, key: str) -> bool:
        """Whether a weight of this name is stored on its own: a tied head is the embedding table itself, so
        checkpoints (ours and Hugging Face's) leave it out and loading never misses it."""
        return not (self.tie_embeddings and key == "lm_head.weight")

    def validate(self) -> ModelConfig:
        if self.n_heads < 1:
            raise UserError(f"heads must be at least 1, got {self.n_heads}")
        if self.head_size is None and self.d_model % self.n_heads:
            raise UserError(f"heads ({self.n_heads}) must divide the model width ({self.d_model})")
        if self.n_heads % self.kv_heads:
            raise UserError(f"kv heads ({self.kv_heads}) must divide heads ({self.n_heads})")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise UserError(f"norm must be rmsnorm or layernorm, got {self.norm!r}")
        if self.mlp not in ("swiglu", "geglu", "gelu"):
            raise UserError(f"mlp must be swiglu, geglu or gelu, got {self.mlp!r}")
        if self.layer_types is not None and (
            len(self.layer_types) != self.n_layers or not set(self.layer_types) <= {"sliding", "full"}
        ):
            raise UserError(f"layer_types must name each of the {self.n_layers} layers sliding or full")
        if self.embed_std is not None and not self.embed_std > 0:
            raise UserError(f"--embed-std must be > 0, got {self.embed_std}")
        if self.position_std is not None and not 0 <= self.position_std < float("inf"):
            raise UserError(f"--position-std must be a finite number ≥ 0, got {self.position_std}")
        if self.position_lr_scale is not None and not 0 < self.position_lr_scale < float("inf"):
            raise UserError(f"--position-lr-scale must be a finite number > 0, got {self.position_lr_scale}")
        return self


# Size presets: `tiny` for tests, `small` the CPU default, `base` for a GPU.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(d_model=64, n_layers=2, n_heads=4),
    "small": dict(d_model=128, n_layers=4, n_heads=4),
    "base": dict(d_model=512, n_layers=8, n_heads=8),
}


@dataclass(frozen=True)
class AdapterConfig:
    """Low-rank adapters trained in place of the full weights (training/adapters.py, through peft): LoRA
    (Hu et al. 2022) on the attention projections, and LongLoRA (Chen et al. 2024), which also trains the
    embeddings and norms and attends in shifted groups during training (`group_ratio` of the length)."""

    method: str  # lora | longlora
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    trainable: tuple[str, ...] = ()  # whole modules trained beside the adapters, by name part ("embed", "norm")
    group_ratio: float | None = None  # shifted sparse attention in groups of this share of the length


@dataclass(frozen=True)
class LongCEConfig:
    """LongCE (Fang et al., ICLR 2025): each target's loss weighted by min(exp(loss with a short context − loss
    with the whole row), max_weight), the short context as LongPPL's (tasks/longppl.py): targets past `short`
    are scored in pieces of `window` that see only the tokens from `short` before the piece; earlier targets
    weigh 1 (training/longce.py)."""

    short: int  # the short context (the authors' 4096, their base model's training length)
    window: int  # targets per short pass (the authors' 1024)
    max_weight: float = 5.0  # the weights' cap (the authors' --threshold 5)


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig
    corpus: str = DEFAULT_CORPUS
    tokenizer: str = "bytes"  # identity of the tokenizer: token ids mean nothing without it
    seq_len: int = DEFAULT_TRAIN_LEN
    batch_size: int = DEFAULT_BATCH_SIZE
    steps: int = DEFAULT_STEPS
    lr: float = DEFAULT_LR
    min_lr_ratio: float = 0.1
    warmup_steps: int = 60
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    dtype: str = "bfloat16"  # autocast dtype for training where the device supports it
    passkey_fraction: float = 0.0  # share of training sequences that are passkey prompts
    passkey_task: str = ""  # identity of the task file those prompts come from
    # "row": every sequence weighs the same in the loss, so a passkey row's few answer tokens are not drowned by
    # the corpus rows' thousands of targets (measured: with "token" weighting retrieval is not learned in budget)
    loss_weighting: str = "row"
    # a length curriculum (data/batches.Curriculum): (length, steps) stages of shorter rows before the rows of
    # seq_len, as many tokens a step (None: every step reads rows of seq_len)
    curriculum: tuple[tuple[int, int], ...] | None = None
    checkpoint_every: int = 200
    compile: bool | None = None  # True: the training forward ran through torch.compile (None: eager)
    processes: int | None = None  # the torchrun processes that trained it (None: one)
    adapter: AdapterConfig | None = None  # None: every weight trains (identity.py: unset)
    longce: LongCEConfig | None = None  # None: every target weighs the same (cross-entropy)


def to_dict(config: Any) -> dict:
    return dataclasses.asdict(config)


def canonical_json(data: Any) -> str:
    """The JSON a config is hashed as: sorted keys, no spaces, the unset optional fields left out (identity.py)."""
    if dataclasses.is_dataclass(data):
        data = to_dict(data)
    return json.dumps(omit_unset(data), sort_keys=True, separators=(",", ":"), default=str)


def config_hash(data: Any, length: int = 12) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:length]


def model_config_from_dict(data: dict) -> ModelConfig:
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    # a JSON array is the tuple the config holds (`layer_types`), so a config read back equals the one written
    return ModelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names})


def train_config_from_dict(data: dict) -> TrainConfig:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {k: v for k, v in data.items() if k in names and k not in ("model", "adapter", "longce")}
    if values.get("curriculum") is not None:  # JSON arrays back to the tuples the config holds
        values["curriculum"] = tuple(tuple(stage) for stage in values["curriculum"])
    adapter = data.get("adapter")
    if adapter is not None:  # JSON arrays back to the tuples the config holds
        adapter = AdapterConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in adapter.items()})
    longce = LongCEConfig(**data["longce"]) if data.get("longce") is not None else None
    return TrainConfig(model=model_config_from_dict(data["model"]), adapter=adapter, longce=longce, **values)


__all__ = ["AdapterConfig", "LongCEConfig", "ModelConfig", "TrainConfig", "PRESETS", "canonical_json", "config_hash"]
