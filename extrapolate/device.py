"""Device and precision choices: `auto` picks CUDA, then Apple MPS, then CPU."""

from __future__ import annotations

import contextlib
import os

import torch

from .errors import UserError

DEVICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    name = name.strip().lower()
    if name not in DEVICES and not name.startswith("cuda:"):
        raise UserError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if name in ("auto", "cuda") and cuda and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))  # torchrun: one GPU per process
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if name.startswith("cuda") and not cuda:
        raise UserError("--device cuda was asked for but CUDA is not available on this machine (try --device auto)")
    if name == "mps" and not mps:
        raise UserError("--device mps was asked for but Apple MPS is not available on this machine (try --device auto)")
    return torch.device(name)


def autocast(device: torch.device, dtype: str):
    """bf16 autocast where the device supports it (CPU included); a no-op for float32 and on MPS."""
    if dtype == "float32" or device.type == "mps":
        return contextlib.nullcontext()
    if dtype != "bfloat16":
        raise UserError(f"dtype must be bfloat16 or float32, got {dtype!r}")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def activation_dtype(device: torch.device, dtype: str) -> torch.dtype:
    """The dtype of a float32 model's activations (q, k and v included) under `autocast(device, dtype)`."""
    return torch.bfloat16 if dtype == "bfloat16" and device.type != "mps" else torch.float32


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
