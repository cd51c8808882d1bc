"""Every encoding by name: its kind, its parameters with defaults, a description, and how to build it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..registry import Registry
from .absolute import Learned, NoPE, Sinusoidal
from .base import PositionalEncoding
from .bias import ALiBi, T5Bias
from .frequencies import SCALINGS
from .rotary import Rotary


@dataclass(frozen=True)
class EncodingSpec:
    name: str
    kind: str  # absolute | bias | rotary | none
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)  # name -> default
    trains_own_model: bool = True  # False: a RoPE scaling applied to a model trained with plain `rope`

    @property
    def base_encoding(self) -> str:
        return self.name if self.trains_own_model else "rope"


ENCODINGS: Registry[EncodingSpec] = Registry("encoding")
ROTARY_PARAMETERS = {"base": 10000.0, "factor": 1.0, "original_len": "train length"}

ENCODINGS.add("sinusoidal", EncodingSpec("sinusoidal", "absolute", "fixed sin/cos added to the embeddings (Vaswani 2017)"))
ENCODINGS.add(
    "learned",
    EncodingSpec("learned", "absolute", "trained table of positions; none past its rows",
                 {"max_len": "train length", "policy": "error"}),
)
ENCODINGS.add(
    "t5",
    EncodingSpec("t5", "bias", "learned bias per log-spaced distance bucket (Raffel et al. 2020)",
                 {"num_buckets": 32, "max_distance": 128}),
)
ENCODINGS.add("alibi", EncodingSpec("alibi", "bias", "linear distance penalty per head (Press et al. 2022)", {"heads": "model heads"}))
for _name, _scaling in SCALINGS.items():
    ENCODINGS.add(
        _name,
        EncodingSpec(_name, "rotary", _scaling.description, {**ROTARY_PARAMETERS, **_scaling.options},
                     trains_own_model=_name == "rope"),
    )
ENCODINGS.add("nope", EncodingSpec("nope", "none", "no positional signal; causal masking alone"))


def sweep_order() -> list[str]:
    """Every encoding in the order of tables and figures: the order of registration."""
    return ENCODINGS.names()


def get_spec(name: str) -> EncodingSpec:
    return ENCODINGS.get(name)


def validate_shape(spec: EncodingSpec, *, n_heads: int, head_dim: int, factor: float = 1.0) -> None:
    """User-facing checks, each failing with one line."""
    if n_heads < 1:
        raise UserError(f"heads must be at least 1, got {n_heads}")
    if not factor > 0:
        raise UserError(f"factor must be > 0, got {factor}")
    if spec.kind == "rotary" and (head_dim < 2 or head_dim % 2):
        raise UserError(f"{spec.name} needs an even head dimension, got {head_dim}")


def build_encoding(
    name: str,
    *,
    d_model: int,
    n_heads: int,
    head_dim: int,
    max_len: int,
    base: float = 10000.0,
    factor: float = 1.0,
    original_len: int | None = None,
    options: dict | None = None,
    learned_policy: str = "error",
    t5_buckets: int = 32,
    t5_max_distance: int = 128,
) -> PositionalEncoding:
    spec = get_spec(name)
    validate_shape(spec, n_heads=n_heads, head_dim=head_dim, factor=factor)
    if spec.kind == "rotary":
        return Rotary(head_dim, spec.name, base=base, factor=factor, original_len=original_len or max_len,
                      **(options or {}))
    if spec.name == "sinusoidal":
        return Sinusoidal(d_model)
    if spec.name == "learned":
        return Learned(d_model, max_len, policy=learned_policy)
    if spec.name == "alibi":
        return ALiBi(n_heads)
    if spec.name == "t5":
        return T5Bias(n_heads, t5_buckets, t5_max_distance)
    return NoPE()


def encoding_for(config, name: str | None = None, *, factor: float = 1.0, original_len: int | None = None,
                 **options) -> PositionalEncoding:
    """The encoding `name` (default: the config's own) shaped for a model config: its width, heads, head size,
    length and RoPE base. The one place a model's encoding is built from its config."""
    return build_encoding(name or config.encoding, d_model=config.d_model, n_heads=config.n_heads,
                          head_dim=config.head_dim, max_len=config.max_len, base=config.rope_base, factor=factor,
                          original_len=original_len, **options)
