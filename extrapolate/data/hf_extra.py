"""The optional `hf` extra (transformers, gguf): imported where a pretrained checkpoint needs it, refused in one
line where it is missing."""

from __future__ import annotations

from extrapolate.core.errors import UserError


def require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise UserError("pretrained models need transformers and gguf: pip install 'extrapolate[hf]'") from None
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers
