"""How `extrapolate bench` times and weighs a call: the fastest of repeated calls, contenders taking turns, a
profiler trace of one call, the matmul ceiling, a fresh process for each peak-memory reading."""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time

import torch

from extrapolate.core.device import synchronize


def peak_rss_mb() -> float:
    """Peak resident memory of this process. On Linux from VmHWM, which starts afresh in a spawned process
    (ru_maxrss survives exec and would report the parent's peak)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage / 1024 if sys.platform != "darwin" else usage / (1024 * 1024)


def matmul_peak(dtype: torch.dtype, device: torch.device, size: int = 2048, seconds: float = 2.0) -> float:
    """Sustained GFLOP/s of a square matmul: the ceiling model FLOP utilisation is measured against."""
    a, b = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    synchronize(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    synchronize(device)
    return 2 * size**3 * count / (time.perf_counter() - start) / 1e9


def profile_call(fn, device: torch.device, stem: str, rows: int = 30) -> None:
    """One call of `fn` under torch's profiler: `stem`.txt, its ops by self time on the device (CPU time where
    the device is the CPU), and `stem`.json.gz, the trace a trace viewer opens."""
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile

    from extrapolate.core.atomic import write_text

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        fn()
        synchronize(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(f"{stem}.txt"), profiler.key_averages().table(sort_by=key, row_limit=rows) + "\n")
    profiler.export_chrome_trace(f"{stem}.json.gz")


def alternating_best(contenders: dict, rounds: int, device: torch.device) -> dict:
    """Fastest seconds of each contender's call over `rounds` rounds, the contenders taking turns and the order
    flipping every round, so neither side always runs first and all see the same machine conditions."""
    best = {name: float("inf") for name in contenders}
    for round_ in range(rounds):
        for name in list(contenders)[:: 1 if round_ % 2 == 0 else -1]:
            best[name] = min(best[name], best_time(contenders[name], 1, device))
    return best


def best_time(fn, repeats: int, device: torch.device) -> float:
    """Fastest of `repeats` timed calls: other load on the machine only ever adds time."""
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def in_fresh_process(fn, args):
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(fn, (args,))
