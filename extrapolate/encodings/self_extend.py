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

The shift: w - ⌊w/G⌋ by default, the paper's, and the authors' own code since their commit 715c1e3 ("Fix
group query position calculation ... We accidentally use '/'", `self_extend_patch/Llama_4_40.py`), which their
flash decoding path (q_len == 1) computes too. The prefill of their older patch (`self_extend_patch/Llama.py`)
still divides exactly, w - w/G: the same where G divides w, a fraction of a position more where not (w = 64,
G = 11: 58.18 against 59). `--encoding-option shift_rule=exact` gives that form."""

from __future__ import annotations

import math

import torch

from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.two_part import TwoPartEncoding, show_two_part, whole_number

SHIFTS = ("floor", "exact")  # w - ⌊w/G⌋ (the paper's, the authors' fixed code) and w - w/G


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

    def __init__(self, head_dim: int, base: float, window: int, group: int, shift: str = "floor"):
        super().__init__(head_dim, base, window)
        self.group = whole_number(group, "self-extend group size")
        if shift not in SHIFTS:
            raise ValueError(f"self-extend shift_rule: one of {', '.join(SHIFTS)}, got {shift!r}")
        self.shift_rule = shift
        # the grouped distance at the window's edge ≈ w
        grouped_window = self.window / self.group if shift == "exact" else self.window // self.group
        self.shift = self.window - grouped_window

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        return (torch.div(pos, self.group, rounding_mode="floor") + self.shift).float()

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.div(pos, self.group, rounding_mode="floor").float()

    def describe(self) -> dict:
        shift = {"shift": self.shift, **({"shift_rule": "exact"} if self.shift_rule == "exact" else {})}
        return {"base": self.base, "window": self.window, "group": self.group, **shift}


def build_self_extend(shape: Shape) -> SelfExtend:
    original = shape.original_len or shape.max_len
    options = dict(shape.options)
    window = options.pop("window", None)
    window = default_window(original) if window is None else window
    group = options.pop("group", None)
    shift = options.pop("shift_rule", "floor")
    if options:
        raise ValueError(f"self-extend has no option(s) {sorted(options)}")
    group = (
        default_group(shape.factor, original, whole_number(window, "self-extend window")) if group is None else group
    )
    return SelfExtend(shape.head_dim, shape.base, window, group, shift)


SELF_EXTEND = EncodingSpec(
    "self-extend",
    "rotary",
    "Self-Extend: exact positions within w, grouped ⌊i/G⌋-⌊j/G⌋+w-⌊w/G⌋ beyond, merged by log-sum-exp "
    "(Jin et al. 2024)",
    build_self_extend,
    {"base": 10000.0, "window": "L/4", "group": "smallest with G·(L-w)+w ≥ s·L", "shift_rule": "floor"},
    "#ad494a",
    show_two_part(build_self_extend),
    trains_own_model=False,
)
