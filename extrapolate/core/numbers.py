"""Numeric inputs: comma lists parsed into numbers, and the range in which each numeric option means
something. Shared by the command line (which checks every option as it is parsed) and the library's own
validation. The ranges of the commands' own flags are here; an encoding's options declare theirs with the
option (encodings/options.py, in `Bound`s from here), and the command line checks its flags against both."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from extrapolate.core.errors import UserError

# suffixes a count may carry, binary as the field counts context lengths: 4k = 4096, 1M = 1024²
SUFFIXES = {"k": 1024, "m": 1024**2}
INT64_MAX = 2**63 - 1
LENGTH_HINT = "a whole number of tokens, e.g. 4096, 4k or 1M; k = 1024, M = 1024²"


def parse_int_list(
    text: str, what: str, minimum: int | None = None, maximum: int | None = None, lengths: bool = False
) -> list[int]:
    """Whole numbers separated by commas, each with an optional k (×1024) or M (×1024²); `lengths`: they are
    token counts, and a mistake says so as the single-length flags do."""
    if not text.strip():
        raise UserError(f"{what}: give at least one number")
    values = []
    for part in text.split(","):
        item = part.strip()
        part = item.lower().replace("_", "")
        if not part:  # "1k,,4k": a number left out (an empty shell variable) would change the run unseen
            raise UserError(f"{what}: an empty item in {text.strip()!r}; give numbers separated by commas")
        scale = SUFFIXES.get(part[-1], 1)
        if scale > 1:
            part = part[:-1]
        try:
            value = int(part) * scale
        except ValueError:
            if lengths:
                raise UserError(f"{what}: {item!r} is not a length ({LENGTH_HINT})") from None
            raise UserError(f"{what}: {item!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise UserError(f"{what} must be ≥ {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise UserError(f"{what} must be ≤ {maximum}, got {value}")
        if abs(value) > INT64_MAX:  # torch counts in int64: past it nothing can run
            raise UserError(f"{what} must be at most 2^63 − 1 in size, got {value}")
        if value in values:  # as among names: a list that repeats itself ("1k,1024" too) is not for us to read
            raise UserError(f"{what}: {value} is given twice in {text.strip()!r}")
        values.append(value)
    if not values:
        raise UserError(f"{what}: give at least one number")
    return values


def parse_float_list(text: str, what: str) -> list[float]:
    """Comma-separated finite numbers (LongRoPE's per-pair factors); what they must satisfy is checked by the
    encoding, which knows how many it needs."""
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"{what}: {part!r} is not a number") from None
        if not math.isfinite(value):
            raise UserError(f"{what}: {part!r} is not a finite number")
        values.append(value)
    if not values:
        raise UserError(f"{what}: give at least one number")
    return values


def parse_name_list(text: str, what: str) -> list[str]:
    """Comma-separated names, lower-cased; an empty item among names is refused as in a list of numbers.

    A list of no names at all ("" or ",") comes back empty, for the caller to say what it needed.
    """
    parts = [part.strip().lower() for part in text.split(",")]
    if any(parts) and not all(parts):  # "perplexity,": a name left out (an empty shell variable) unseen
        raise UserError(f"{what}: an empty item in {text.strip()!r}; give names separated by commas")
    twice = next((part for i, part in enumerate(parts) if part and part in parts[:i]), None)
    if twice:  # a list built by a script that repeats itself: which one was meant is not for us to guess
        raise UserError(f"{what}: {twice} is given twice in {text.strip()!r}")
    return [part for part in parts if part]


@dataclass(frozen=True)
class Bound:
    holds: Callable[[float], bool]
    text: str


def at_least(minimum: int) -> Bound:
    return Bound(lambda v: v >= minimum, f"at least {minimum}")


POSITIVE = Bound(lambda v: v > 0, "> 0")
FLOAT32_MAX = 3.4028234663852886e38  # torch.finfo(torch.float32).max: rates and scales held as float32 tensors
# a RoPE scaling's s: past 2^24, 1/s is below float32's resolution next to 1, so θ·(1 − ramp·(1 − 1/s)), YaRN's
# reference form, gives the slow pairs no rotation at all (and LongRoPE's default long factors θ/θ' are infinite)
FACTOR = Bound(lambda v: 0 < v <= 2**24, "in (0, 2^24] (past 2^24 float32 cannot tell θ/s from 0)")
RATE = Bound(lambda v: 0 < v <= FLOAT32_MAX, "> 0 and within float32 (≤ 3.4e38)")
# The range in which each numeric flag of the commands means something; every command shares these names.
# Floats are also checked to be finite, whether listed here or not (NaN passes every comparison).
FLAG_BOUNDS = {
    "--train-len": at_least(2),
    "--eval-len": at_least(1),
    "--factor": FACTOR,
    "--width": at_least(1),
    "--layers": at_least(1),
    "--heads": at_least(1),
    "--embed-std": RATE,
    "--position-std": Bound(lambda v: v >= 0, "≥ 0 (0: zeros)"),
    "--position-lr-scale": RATE,
    "--steps": at_least(1),
    "--batch-size": at_least(1),
    "--batch-tokens": at_least(1),
    "--lr": RATE,
    "--seed": at_least(0),
    "--stride": at_least(1),
    "--longppl-short": at_least(1),
    "--longppl-window": at_least(1),
    "--eval-tokens": at_least(1),
    "--eval-docs": at_least(1),
    "--passkey-fraction": Bound(lambda v: 0 <= v < 1, "in [0, 1)"),
    "--finetune-steps": at_least(0),
    "--decode-steps": at_least(0),  # bench
    "--retrieval-prompts": at_least(0),  # bench
    "--finetune-len": at_least(2),
    "--finetune-lr": RATE,
    "--lora-rank": Bound(lambda v: 1 <= v <= 4096, "in [1, 4096]"),
    "--longce-short": at_least(1),
    "--longce-window": at_least(1),
    "--longce-max-weight": POSITIVE,
    "--gpus-per-task": at_least(0),
    "--cpus-per-task": at_least(1),
    "--time-min": at_least(1),  # sweep on SLURM
    # longrope-search
    "--target": at_least(2),
    "--population": at_least(1),
    "--iterations": at_least(1),
    "--parents": at_least(1),
    "--mutations": at_least(1),
    "--crossovers": at_least(1),
    "--step": Bound(lambda v: 0 < v <= 1, "in (0, 1]"),
    # encodings show (the encodings' own options, --beta-fast …, bring theirs: encodings/options.py)
    "--head-dim": at_least(2),
    "--base": Bound(lambda v: v > 1, "> 1"),
    "--original-len": at_least(1),
    "--seq-len": at_least(1),
    "--position": at_least(0),
}


def check_number(flag: str, value, bound: Bound | None) -> None:
    """One line naming `flag` when a numeric option's value is not finite or outside `bound`, its meaningful
    range (None: any finite number); values that are not numbers (text, lists, booleans) pass."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise UserError(f"{flag} must be a finite number, got {value}")
    if isinstance(value, int) and abs(value) > INT64_MAX:  # torch counts in int64: past it nothing can run
        raise UserError(f"{flag} must be at most 2^63 − 1 in size, got {value}")
    if bound is not None and not bound.holds(value):
        raise UserError(f"{flag} must be {bound.text}, got {value:g}")


SEED_MAX = INT64_MAX  # torch.manual_seed's bound
