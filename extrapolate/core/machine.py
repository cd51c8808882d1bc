"""What a measurement ran on, for a benchmark's rows and every result row: the CPU's model and the vector
instructions torch uses (the same code is fast on one CPU and slow on another, and rounds bf16 differently:
AVX2, AVX-512 and AMX take different paths), the threads, the card where there is one, and torch's version."""

from __future__ import annotations

import os
import platform
from pathlib import Path

# the flags that change which kernels oneDNN and torch pick, in the order they were added to x86 CPUs
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 9B14", "Intel(R) Xeon(R) Platinum 8481C"), or what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> list[str]:
    """The ISA_FLAGS this CPU has (empty off Linux or x86)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return [f for f in ISA_FLAGS if f in flags]


def machine(device) -> dict:
    """The columns a benchmark row records of where it ran."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA")  # a user's cap on oneDNN's path, e.g. to emulate another CPU
    info = {
        "cpu": cpu_model(),
        "isa": "+".join([capability, *cpu_flags()]) + (f" (oneDNN capped at {capped})" if capped else ""),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "card": "",
    }
    if getattr(device, "type", str(device)) == "cuda":
        info["card"] = torch.cuda.get_device_name(device)
    return info


def describe(info: dict) -> str:
    """One line: "AMD EPYC 9B14 (AVX512+avx2+avx512f+avx512_bf16), 2 threads, torch 2.13.0+cpu"."""
    card = f", {info['card']}" if info.get("card") else ""
    return f"{info['cpu']} ({info['isa']}), {info['threads']} threads{card}, torch {info['torch']}"


def machine_line(device) -> str:
    """What a result row records of where it was measured: `describe` of `machine`."""
    return describe(machine(device))
