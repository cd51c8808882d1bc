"""The memory a retrieval cell's prompts may hold at once (`--eval-memory`): parsed from "1.5G" or "800M", or by
default a share of the device's free memory, capped so that a laptop's evaluation stays small beside whatever
else runs. Retrieval splits a depth's (or a RULER batch's) prompts into micro-batches that fit it
(tasks/prompt_passes.py, `micro_rows`); the answers do not depend on it, only the peak memory and the speed do."""

from __future__ import annotations

import os
import re

from extrapolate.core.errors import UserError

# the default budget: this share of the free memory, on a CPU or MPS at most EVAL_MEMORY_CAP (a laptop's other
# work keeps its room). At long lengths one prompt already fills the matmuls (32768 tokens a row), so a larger
# batch buys little speed; at short ones the cap still holds many prompts (`small` at 2048: about 15).
FREE_SHARE = 0.25
EVAL_MEMORY_CAP = 512 << 20
UNKNOWN_FREE = 4 << 30  # what a CPU whose free memory cannot be read is taken to have

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MEMORY_HINT = "a size such as 800M, 1.5G or 2GiB (K, M, G, T: powers of 1024)"


def parse_memory(text: str, flag: str = "--eval-memory") -> int:
    """Bytes of `text`: a number with an optional K/M/G/T (×1024 each), B or iB after it allowed ("1.5G",
    "800MiB", "2GB"); a bare number is bytes. At least one MiB, so a typo of a unit is not taken for bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not match:
        raise UserError(f"{flag} {text!r} is not {MEMORY_HINT}")
    size = int(float(match.group(1)) * UNITS[match.group(2).upper()])
    if size < UNITS["M"]:
        raise UserError(f"{flag} {text!r} is below 1M; give {MEMORY_HINT}")
    return size


def format_memory(size: int) -> str:
    """`size` bytes as the largest unit that leaves a number ≥ 1, e.g. 1.50 GiB."""
    for unit in ("T", "G", "M", "K"):
        if size >= UNITS[unit]:
            return f"{size / UNITS[unit]:.2f} {unit}iB"
    return f"{size} B"


def free_memory(device) -> int:
    """Bytes the device has free now: CUDA's own count, MPS's recommended ceiling less what it holds, a CPU's
    available memory (Linux's MemAvailable, else the free pages; UNKNOWN_FREE where neither can be read)."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "mps":
        import torch

        return max(0, int(torch.mps.recommended_max_memory()) - int(torch.mps.driver_allocated_memory()))
    return cpu_available()


def cpu_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the line is in kB
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return UNKNOWN_FREE


def eval_memory(device, asked: int | None) -> int:
    """The retrieval budget in bytes: `asked` (parsed --eval-memory) where given, else FREE_SHARE of the free
    memory (on a CPU or MPS at most EVAL_MEMORY_CAP), at least one MiB."""
    if asked is not None:
        return asked
    share = int(free_memory(device) * FREE_SHARE)
    return max(UNITS["M"], share if device.type == "cuda" else min(EVAL_MEMORY_CAP, share))
