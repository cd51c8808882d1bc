"""Positional encodings behind one three-hook interface (see base.py)."""

from .absolute import Learned, NoPE, Sinusoidal, sinusoidal_table
from .base import PositionalEncoding
from .bias import ALiBi, T5Bias, alibi_slopes, t5_bucket
from .catalog import ENCODINGS, build_encoding, encoding_groups, encoding_for, get_spec, register, sweep_order
from .spec import EncodingSpec, Shape
from .frequencies import SCALINGS
from .rotary import Rotary

__all__ = [
    "ALiBi", "ENCODINGS", "EncodingSpec", "Learned", "NoPE", "PositionalEncoding", "Rotary", "SCALINGS",
    "Sinusoidal", "T5Bias", "alibi_slopes", "Shape", "build_encoding", "encoding_groups", "register", "encoding_for", "get_spec", "sweep_order", "sinusoidal_table", "t5_bucket",
]
