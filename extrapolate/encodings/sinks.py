"""Training-free extensions of a RoPE model that attend to a recent window and a few first tokens only (a
Λ-shaped mask), so no query ever meets a relative position past the ones it was trained on:

- StreamingLLM (Xiao et al., ICLR 2024, "Efficient Streaming Language Models with Attention Sinks"): a KV
  cache of the first `sink_tokens` tokens (the attention sinks) and the most recent ones, positions given by
  the place in that cache. Query i sees keys i - w + 1 … i at their own distances and the sinks j < s at
  position j against a query at min(i, s + w - 1): what the reference's StartRecentKVCache with
  `recent_size` = w - 1 and its position shift compute token by token. The window defaults to L - s, so the
  largest relative position is L - 1.
- LM-Infinite (Han et al., NAACL 2024, "LM-Infinite: Zero-Shot Extreme Length Generalization"): a local
  branch of w recent keys at their own distances and `sink_tokens` global tokens (default 10) seen past the
  window at one relative distance, the cap c (default w = L): q rotated at c against an unrotated k, as the
  reference's `limited_distance_forward` does. The cap is at most the window (the paper's setting, c = w = L),
  where that per-query rule equals the reference's cap at min(c, n - 1) of the whole sequence.

Both are two-part encodings (`two_part.TwoPartEncoding`) whose far part sees only the first tokens
(`TwoPartRotary.far_keys`): the kernels of Self-Extend and ReRoPE compute them, memory linear in the length.
STRING (`string.py`) is the same kind of encoding without the mask.
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import TwoPartRotary
from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.two_part import TwoPartEncoding, options_of, show_two_part, whole_number

STREAMING_SINKS = 4  # the reference's start_size and the paper's four sinks
LM_INFINITE_GLOBAL = 10  # the global branch of the paper's runs (its README: 10 to 100 behave alike)


class SinkEncoding(TwoPartEncoding):
    """A two-part encoding whose far part is the first `sinks` tokens only."""

    def __init__(self, head_dim: int, base: float, window: int, sinks: int):
        super().__init__(head_dim, base, window)
        self.sinks = whole_number(sinks, f"{self.name} sink_tokens")

    def two_part_form(self) -> TwoPartRotary:
        return TwoPartRotary(
            self.window, self.rotate_at, self.far_query, self.far_key, self.rotate_from, far_keys=self.sinks
        )

    def relative_position(self, query: int, distance: int) -> float:
        """As two-part encodings define it; NaN for a key the Λ-shaped mask hides."""
        if distance >= self.window and query - distance >= self.sinks:
            return float("nan")
        return super().relative_position(query, distance)


class StreamingLLM(SinkEncoding):
    name = "streaming-llm"

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        return pos.clamp(max=self.sinks + self.window - 1).float()  # its place in a full cache

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        return pos.float()  # a sink keeps its position: the cache's first slots

    def describe(self) -> dict:
        return {"base": self.base, "window": self.window, "sink_tokens": self.sinks}


class LMInfinite(SinkEncoding):
    name = "lm-infinite"

    def __init__(self, head_dim: int, base: float, window: int, sinks: int, cap: int):
        super().__init__(head_dim, base, window, sinks)
        self.cap = whole_number(cap, "lm-infinite distance_cap")
        if self.cap > self.window:
            raise UserError(f"lm-infinite distance_cap ({self.cap}) must be at most its window ({self.window})")

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.full(pos.shape, float(self.cap), device=pos.device)

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.zeros(pos.shape, device=pos.device)  # rotation by 0: k as it is

    def describe(self) -> dict:
        return {"base": self.base, "window": self.window, "sink_tokens": self.sinks, "distance_cap": self.cap}


def length_of(shape: Shape) -> int:
    return shape.original_len or shape.max_len


def build_streaming_llm(shape: Shape) -> StreamingLLM:
    options = options_of(shape, "streaming-llm", ("window", "sink_tokens"))
    sinks = options.get("sink_tokens", STREAMING_SINKS)
    window = options.get("window")
    if window is None:  # the largest relative position s + w - 1 is L - 1
        window = length_of(shape) - whole_number(sinks, "streaming-llm sink_tokens")
        if window < 1:
            raise UserError(f"streaming-llm: {sinks} sink tokens leave no window in L = {length_of(shape)}")
    return StreamingLLM(shape.head_dim, shape.base, window, sinks)


def build_lm_infinite(shape: Shape) -> LMInfinite:
    options = options_of(shape, "lm-infinite", ("window", "sink_tokens", "distance_cap"))
    window = options.get("window", length_of(shape))
    cap = options.get("distance_cap", window)
    return LMInfinite(shape.head_dim, shape.base, window, options.get("sink_tokens", LM_INFINITE_GLOBAL), cap)


STREAMING_LLM = EncodingSpec(
    "streaming-llm",
    "rotary",
    "StreamingLLM: s attention sinks and a recent window, positions in the cache (Xiao et al. 2024)",
    build_streaming_llm,
    {"base": 10000.0, "window": "L - sink_tokens", "sink_tokens": STREAMING_SINKS},
    "#b15928",
    show_two_part(build_streaming_llm),
    trains_own_model=False,
)
LM_INFINITE = EncodingSpec(
    "lm-infinite",
    "rotary",
    "LM-Infinite: Λ-shaped mask, a local window and global tokens at a capped distance (Han et al. 2024)",
    build_lm_infinite,
    {"base": 10000.0, "window": "L", "sink_tokens": LM_INFINITE_GLOBAL, "distance_cap": "window"},
    "#6a3d9a",
    show_two_part(build_lm_infinite),
    trains_own_model=False,
)
