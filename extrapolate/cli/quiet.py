"""`--quiet` for the libraries the commands load, which keep progress bars of their own."""

from __future__ import annotations


def silence_library_bars() -> None:
    """--quiet silences the libraries' own progress bars too: transformers' (reading a checkpoint's weights)
    and tqdm's (a GGUF file's tensors dequantized), in this process and in the workers it starts. Both read
    their switch from the environment when first imported; transformers is told directly if it already is."""
    import os
    import sys

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
