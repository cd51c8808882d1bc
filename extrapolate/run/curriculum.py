"""The length curriculum a model trained here asks for: `--curriculum` read, checked and given its default. A
resolved request holds it as text ("none", or the stages "256:600,512:150"), which the training config
holds as (length, steps) pairs (data/batches.Curriculum)."""

from __future__ import annotations

import dataclasses

from extrapolate.core.defaults import CURRICULUM_FROM, CURRICULUM_STAGE, DEFAULT_TRAIN_LEN
from extrapolate.core.errors import UserError
from extrapolate.run.request import RunRequest

NONE = "none"
FORM = "LENGTH:STEPS,... with lengths rising below L (e.g. 256:600,1024:300), or none"

Stages = tuple[tuple[int, int], ...]


def default_stages(train_len: int, steps: int) -> Stages:
    """From L = CURRICULUM_FROM: rows of DEFAULT_TRAIN_LEN, then of twice that and so on below L, each longer
    length (L's own included) for CURRICULUM_STAGE of the steps, or less where there are many (at most half the
    steps in all), and the first length the rest; none below, or where the steps are too few for a stage each."""
    if train_len < CURRICULUM_FROM:
        return ()
    lengths = [DEFAULT_TRAIN_LEN]
    while lengths[-1] * 2 < train_len:
        lengths.append(lengths[-1] * 2)
    later = len(lengths)  # the doublings after the first length, L's stage included
    share = min(round(CURRICULUM_STAGE * steps), steps // (2 * later))
    if share == 0:
        return ()
    return ((lengths[0], steps - later * share), *((length, share) for length in lengths[1:]))


def parse_stages(text: str, train_len: int, steps: int) -> Stages:
    """`--curriculum`'s stages, checked against L and the steps: one line saying what is wrong."""
    if text.strip().lower() == NONE:
        return ()
    stages = []
    for item in text.split(","):
        length, _, count = item.strip().partition(":")  # no colon: count is "", which int() refuses
        try:
            stages.append((int(length), int(count)))
        except ValueError:
            raise UserError(f"--curriculum {text!r}: {item.strip()!r} is not LENGTH:STEPS ({FORM})") from None
    lengths = [length for length, _ in stages]
    if any(length < 1 for length in lengths) or lengths != sorted(set(lengths)):
        raise UserError(f"--curriculum {text!r}: lengths must be positive and rise ({FORM})")
    if lengths[-1] >= train_len:
        raise UserError(f"--curriculum {text!r}: length {lengths[-1]} is not shorter than L = {train_len}")
    if any(count < 1 for _, count in stages):
        raise UserError(f"--curriculum {text!r}: every stage needs at least one step")
    if sum(count for _, count in stages) >= steps:
        raise UserError(
            f"--curriculum {text!r}: its {sum(c for _, c in stages)} steps leave none of the {steps} steps at L"
        )
    return tuple(stages)


def as_text(stages: Stages) -> str:
    return ",".join(f"{length}:{steps}" for length, steps in stages) or NONE


def with_curriculum(request: RunRequest) -> RunRequest:
    """The request of a model trained here with its curriculum resolved to text: the stages asked for, or
    the default's (`default_stages`), or "none"."""
    if request.curriculum is None:
        stages = default_stages(request.train_len, request.steps)
    else:
        stages = parse_stages(request.curriculum, request.train_len, request.steps)
    return dataclasses.replace(request, curriculum=as_text(stages))


def curriculum_stages(text: str | None) -> Stages | None:
    """A resolved request's curriculum as the training config holds it: None where there is none."""
    if text is None or text == NONE:
        return None
    return tuple((int(length), int(steps)) for length, steps in (item.split(":") for item in text.split(",")))
