"""A deliberate crash at an exact training step, for the kill-and-resume tests.

A test that kills a run "some time after its first checkpoint" races the run with a clock, and on a busy
machine the clock loses. Instead the test names the step: with EXTRAPOLATE_KILL_AT_STEP=N, the process sends
itself SIGKILL right after it finishes step N (and saves, when N is a checkpoint step) — the same signal an
out-of-memory killer or a scheduler's preemption delivers, at a point the test knows. With
EXTRAPOLATE_KILL_RANK=R only rank R of a torchrun launch dies (default: every rank). Unset, nothing happens.
"""

from __future__ import annotations

import os
import signal

KILL_AT_STEP = "EXTRAPOLATE_KILL_AT_STEP"
KILL_RANK = "EXTRAPOLATE_KILL_RANK"


def kill_step(rank: int) -> int | None:
    """The step after which this process (of `rank`) kills itself, or None (the normal case)."""
    step = os.environ.get(KILL_AT_STEP, "").strip()
    wanted_rank = os.environ.get(KILL_RANK, "").strip()
    if not step.isdigit() or (wanted_rank and wanted_rank != str(rank)):
        return None
    return int(step)


def kill_now() -> None:
    """SIGKILL this process: no handler, no cleanup, no flush; what was saved is all that survives."""
    os.kill(os.getpid(), signal.SIGKILL)
