"""Shared test fixtures: a small local corpus made by the test itself."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "the grass is green and the sky is blue while the sun is yellow over the quiet river where "
    "old ships sail slowly past the harbour wall at dusk and gulls cry"
).split()


def make_corpus(folder: Path, documents: int = 6, words: int = 900, seed: int = 0) -> Path:
    """Plain-text documents (one file each) of pseudo-English long enough for short evaluation lengths."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(documents):
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        (folder / f"doc{i:02d}.txt").write_text(text + ".\n")
    return folder
