"""Positional encodings behind one three-hook interface (see base.py), their specs and registry
(`catalog`), RoPE's scalings as pure frequency functions (`frequencies`), and every encoding option, declared
once (`options`). A new encoding is one file here and one line in `catalog`. May import `core` only."""

from extrapolate.core.lazy import lazy_exports

# each public name and the module it comes from, imported on first use (core/lazy.py)
EXPORTS = {
    "Learned": "absolute",
    "NoPE": "absolute",
    "Sinusoidal": "absolute",
    "sinusoidal_table": "absolute",
    "PositionalEncoding": "base",
    "ALiBi": "bias",
    "T5Bias": "bias",
    "alibi_slopes": "bias",
    "t5_bucket": "bias",
    "ENCODINGS": "catalog",
    "build_encoding": "catalog",
    "encoding_for": "catalog",
    "encoding_groups": "catalog",
    "get_spec": "catalog",
    "register": "catalog",
    "sweep_order": "catalog",
    "SCALINGS": "frequencies",
    "Rotary": "rotary",
    "EncodingSpec": "spec",
    "Shape": "spec",
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
__all__ = sorted(EXPORTS)
