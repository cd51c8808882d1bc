"""What the rest of the project needs to know of an encoding, in one record: its kind, parameters and
description (`extrapolate encodings`), how to build it for a model, what `encodings show` prints, and its
colour in every figure. Its place in tables and figures is its place in the registry (catalog.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.encodings.base import PositionalEncoding


@dataclass(frozen=True)
class Shape:
    """Everything a model knows that an encoding may need to be built."""

    d_model: int
    n_heads: int
    head_dim: int
    max_len: int  # training length: rows of a learned table, original length of RoPE scalings
    base: float = 10000.0  # RoPE base
    factor: float = 1.0  # RoPE scaling factor
    original_len: int | None = None  # None: max_len
    options: dict = field(default_factory=dict)  # a RoPE scaling's own options
    learned_policy: str = "error"
    position_std: float = GPT2_INIT_STD  # a learned table's init std
    position_lr_scale: float = 1.0  # a learned table's learning rate, as a multiple of the model's
    n_layers: int = 1  # an encoding with parameters of each layer's own (SSMax's s) makes one set a layer


@dataclass(frozen=True)
class ShowQuery:
    """The inputs of `extrapolate encodings show`; each encoding reads the ones that concern it."""

    head_dim: int = 64
    base: float = 10000.0
    factor: float = 1.0
    original_len: int = 2048
    seq_len: int | None = None
    heads: int = 8
    distances: list[int] | None = None
    position: int | None = None  # None: the encoding's own default (sinusoidal 1, fire the farthest distance)
    width: int = 8
    layers: int = 12  # the model's depth (rope-nope: which layers are NoPE)
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class EncodingSpec:
    name: str
    kind: str  # absolute | bias | rotary | none
    description: str
    build: Callable[[Shape], PositionalEncoding]
    parameters: dict[str, Any] = field(default_factory=dict)  # name -> default
    colour: str = "#555555"  # in every figure
    show: Callable[[ShowQuery], dict] | None = None  # what `encodings show` prints beyond name and kind
    trains_own_model: bool = True  # False: a RoPE scaling applied to a model trained with plain `rope`
    # a change to the RoPE model that its fine-tune recalibrates at L itself (DroPE), not at a longer L'
    recalibrates: bool = False
    # the model's depth against the encoding's options, before anything is built (rope-nope: k ≤ layers)
    check_depth: Callable[[int, dict], None] | None = None
    # a rotary kind with trained parameters of its own (SSMax's s): evaluated as the model holds it, never
    # rebuilt from its spec as the parameter-free rotary kinds are
    trained_parameters: bool = False
    group: str = "classic"  # `sweep --encodings GROUP`: classic (the seed encodings) | newer (the later methods)
    # training steps when --steps is not given (None: DEFAULT_STEPS); an encoding that forms retrieval at L
    # only in a longer budget says so here, and the budget is part of its model's identity like any config
    default_steps: int | None = None
    # the token embeddings' init std as a function of the width, when --embed-std is not given (None: GPT-2's
    # 0.02, every weight's); an encoding whose signal is added to the embeddings sets their ratio with it
    default_embed_std: Callable[[int], float] | None = None

    @property
    def base_encoding(self) -> str:
        return self.name if self.trains_own_model else "rope"
