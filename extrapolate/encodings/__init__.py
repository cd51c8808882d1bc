"""Positional encodings behind one three-hook interface (see base.py), their specs and registry
(`catalog`), RoPE's scalings as pure frequency functions (`frequencies`), and every encoding option, declared
once (`options`). A new encoding is one file here and one line in `catalog`. May import `core` only."""

from extrapolate.encodings.absolute import Learned, NoPE, Sinusoidal, sinusoidal_table
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.bias import ALiBi, T5Bias, alibi_slopes, t5_bucket
from extrapolate.encodings.catalog import (
    ENCODINGS,
    build_encoding,
    encoding_for,
    encoding_groups,
    get_spec,
    register,
    sweep_order,
)
from extrapolate.encodings.frequencies import SCALINGS
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, Shape

__all__ = [
    "ALiBi",
    "ENCODINGS",
    "EncodingSpec",
    "Learned",
    "NoPE",
    "PositionalEncoding",
    "Rotary",
    "SCALINGS",
    "Sinusoidal",
    "T5Bias",
    "alibi_slopes",
    "Shape",
    "build_encoding",
    "encoding_groups",
    "register",
    "encoding_for",
    "get_spec",
    "sweep_order",
    "sinusoidal_table",
    "t5_bucket",
]
