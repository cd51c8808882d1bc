"""A choice among equivalent exact variants of a CPU kernel, made once per machine by timing them.

The fused bias kernels (ALiBi's key bias, T5's band) run the CPU's fused flash op in row blocks, and which
row count and split of the calls that op is fastest at depends on the CPU and the shapes. Every variant
computes the same attention (the tests hold each to the reference kernel), so the first call of a kernel at a
head size times them on a small probe, keeps the fastest, and writes it to `kernel-choices.json` in the cache
folder, keyed by the CPU, its instruction sets, the thread count, the torch version and the candidates: later
processes on that machine read it and time nothing.

`EXTRAPOLATE_KERNEL_TUNING=off` skips the timing and runs each kernel's default variant (the choice then does
not depend on timing noise: results that must match bit for bit across runs of one machine can ask for it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable

from extrapolate.core.paths import cache_dir

CHOICES_FILE = "kernel-choices.json"
_CHOSEN: dict[str, str] = {}  # this process's choices, by `choice_key`


def tuning_enabled() -> bool:
    return os.environ.get("EXTRAPOLATE_KERNEL_TUNING", "on").lower() not in ("off", "0", "false", "no")


def machine_key() -> str:
    """The CPU, its instruction sets, the threads and torch: what a kernel's speed depends on besides its
    shapes."""
    import torch

    capped = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    return f"{_cpu()}|{capped}|{torch.get_num_threads()} threads|torch {torch.__version__}"


@functools.cache
def _cpu() -> str:
    """The CPU model and its instruction sets, read once (every tuned kernel call asks)."""
    import torch

    from extrapolate.core.machine import cpu_flags, cpu_model

    return f"{cpu_model()}|" + "+".join([torch.backends.cpu.get_cpu_capability(), *cpu_flags()])


def choice_key(kernel: str, problem: str, candidates) -> str:
    """Where a choice is kept: this machine, the kernel, the problem, and the candidates it was made among (a
    release that adds a variant times them all again, rather than keep a choice made without it)."""
    among = hashlib.sha256("\n".join(sorted(candidates)).encode()).hexdigest()[:10]
    return f"{machine_key()}|{kernel}|{problem}|among {among}"


def best_of(run: Callable[[], object], repeats: int = 3) -> float:
    """Fastest of `repeats` timed calls after one untimed one (load on the machine only ever adds time)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def choose(kernel: str, problem: str, variants: dict[str, Callable[[], object]], default: str) -> str:
    """The name of the fastest of `variants` (each a probe call of one variant) for `kernel` on `problem`
    (e.g. "float32 h4 d32") on this machine: timed once, then remembered here and in the cache folder."""
    if not tuning_enabled() or len(variants) == 1:
        return default
    key = choice_key(kernel, problem, variants)
    if key in _CHOSEN:
        return _CHOSEN[key]
    stored = _read_choices()
    if stored.get(key) in variants:
        _CHOSEN[key] = stored[key]
        return stored[key]
    timings = {name: best_of(probe) for name, probe in variants.items()}
    chosen = min(timings, key=timings.get)
    _CHOSEN[key] = chosen
    _write_choice(key, chosen)
    return chosen


def choices_here() -> dict[str, str]:
    """This machine's stored choices, "kernel problem" -> the variant (what `bench` reports)."""
    prefix = machine_key() + "|"
    return {
        key.removeprefix(prefix).rsplit("|among ", 1)[0].replace("|", " "): name
        for key, name in _read_choices().items()
        if key.startswith(prefix)
    }


def _path():
    return cache_dir() / CHOICES_FILE


def _read_choices() -> dict[str, str]:
    try:
        return json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}


def _write_choice(key: str, chosen: str) -> None:
    """Adds one choice to the file (atomically: a reader never sees half of it); a folder that cannot be
    written leaves the choice to this process alone."""
    from extrapolate.core.atomic import write_text

    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_text(_path(), json.dumps({**_read_choices(), key: chosen}, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass
