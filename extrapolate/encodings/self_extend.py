"""Self-Extend (Jin et al. 2024, "LLM Maybe LongLM"): keys fewer than w tokens back keep their exact relative
position; further keys see grouped positions ⌊i/G⌋ - ⌊j/G⌋, shifted by w - ⌊w/G⌋ so that the grouped
distances continue where the neighbour window ends. Every relative position then stays inside the trained
range up to a length of about G·(L - w) + w.

Defaults, as the authors' guidance scales them: w = L/4 (their neighbour window for Llama-2 is 1024 of
4096), and G the smallest group that fits the run's length s·L into G·(L - w) + w (their rule: "try the
smallest group size first"). The rule is approximate by one position: the farthest key of a query at n - 1
sits at ⌊(n - 1)/G⌋ + w - ⌊w/G⌋, which reaches L (one past the trained L - 1) at n = G·(L - w) + w when G
does not divide w (Llama-2's 4096 → 16384: w = 1024, G = 5). It is kept as published, so the defaults are
the settings the authors report; `--encoding-option group=` sets another.

The shift: the paper's w - ⌊w/G⌋, as its pseudocode and the authors' flash decoding path
(`self_extend_patch/Llama.py`, q_len == 1) compute it. Their prefill and their plain-attention path divide
exactly, w - w/G: the same where G divides w, a fraction of a position more where not (w = 64, G = 11: 58.18
against 58). `--encoding-option fractional_shift=true` gives that form."""

from __future__ import annotations

import math

import torch

from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.two_part import TwoPartEncoding, show_two_part, whole_number


def default_window(original_len: int) -> int:
    return max(1, original_len // 4)


def default_group(factor: float, original_len: int, window: int) -> int:
    """The smallest G with G·(L - w) + w ≥ s·L; 1 (plain RoPE) when nothing is longer than L."""
    target = factor * original_len
    if target <= original_len or window >= original_len:
        return 1
    return max(1, math.ceil((target - window) / (original_len - window)))


class SelfExtend(TwoPartEncoding):
    name = "self-extend"

    def __init__(self, head_dim: int, base: float, window: int, group: int, fractional_shift: bool = False):
        super().__init__(head_dim, base, window)
        self.group = whole_number(group, "self-extend group size")
        self.fractional_shift = bool(fractional_shift)
        # the grouped distance at the window's edge ≈ w
        grouped_window = self.window / self.group if fractional_shift else self.window // self.group
        self.shift = self.window - grouped_window

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        return (torch.div(pos, self.group, rounding_mode="floor") + self.shift).float()

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.div(pos, self.group, rounding_mode="floor").float()

    def describe(self) -> dict:
        shift = {"shift": self.shift, **({"fractional_shift": True} if self.fractional_shift else {})}
        return {"base": self.base, "window": self.window, "group": self.group, **shift}


def build_self_extend(shape: Shape) -> SelfExtend:
    original = shape.original_len or shape.max_len
    options = dict(shape.options)
    window = options.pop("window", None)
    window = default_window(original) if window is None else window
    group = options.pop("group", None)
    fractional_shift = options.pop("fractional_shift", False)
    if options:
        raise ValueError(f"self-extend has no option(s) {sorted(options)}")
    group = (
        default_group(shape.factor, original, whole_number(window, "self-extend window")) if group is None else group
    )
    return SelfExtend(shape.head_dim, shape.base, window, group, fractional_shift)


SELF_EXTEND = EncodingSpec(
    "self-extend",
    "rotary",
    "Self-Extend: exact positions within w, grouped ⌊i/G⌋-⌊j/G⌋+w-⌊w/G⌋ beyond, merged by log-sum-exp "
    "(Jin et al. 2024)",
    build_self_extend,
    {"base": 10000.0, "window": "L/4", "group": "smallest with G·(L-w)+w ≥ s·L", "fractional_shift": False},
    "#ad494a",
    show_two_part(build_self_extend),
    trains_own_model=False,
)
