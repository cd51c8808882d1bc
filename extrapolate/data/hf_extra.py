"""The optional `hf` extra (transformers, gguf): imported where a pretrained checkpoint needs it, refused in one
line where it is missing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from extrapolate.core.errors import UserError


def require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise UserError("pretrained models need transformers and gguf: pip install 'extrapolate[hf]'") from None
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


@contextlib.contextmanager
def quiet_hub() -> Iterator[None]:
    """The hub client's retry warnings silenced while it fetches: where the hub cannot be reached it logs a line
    per retry for half a minute before its error, which reaches the user as the one line of a UserError."""
    try:
        from huggingface_hub.utils import logging as hub_logging
    except ImportError:  # no hub client: nothing logs
        yield
        return
    verbosity = hub_logging.get_verbosity()
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        hub_logging.set_verbosity(verbosity)
