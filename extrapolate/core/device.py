"""Device and precision choices: `auto` picks CUDA, then Apple MPS, then CPU."""

from __future__ import annotations

import contextlib
import os

import torch

from extrapolate.core.errors import UserError

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


DTYPES = ("float32", "bfloat16")
TRAIN_DTYPES = ("auto",) + DTYPES


def fast_bf16(device: torch.device) -> bool:
    """Whether bf16 matmuls run at least at float32 speed here. On CPU that needs oneDNN's bf16 path
    (AVX-512 or AMX, or Arm's bf16): without it (AVX2-only CPUs) torch's bf16 matmul falls back to a slow
    loop, and a training step of `small` took 11 s instead of 1 s in float32 (2-core AVX2 CPU), so `auto`
    trains in float32 there. (The model's linear layers have since taken float32 kernels for bf16 arithmetic on
    such CPUs, `linear.py`, which makes bf16 evaluation as fast as float32 there.) CUDA needs compute
    capability 8 (Ampere) or newer."""
    if device.type == "cuda":
        try:
            return torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch older than the keyword: its answer did not count emulation
            return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return cpu_has_fast_bf16()
    return False  # MPS: autocast is off there, the model trains in float32 anyway


def cpu_has_fast_bf16() -> bool:
    """Whether oneDNN multiplies bf16 natively on this CPU (AVX-512 BF16, AMX or Arm's bf16)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch built without oneDNN
        return False


def training_dtype(device: torch.device, requested: str = "auto") -> str:
    """The autocast dtype a model trains in: `auto` is bf16 where the device has fast bf16 matmuls, else
    float32. The resolved name goes into the model's config, so it is part of the model's identity."""
    if requested not in TRAIN_DTYPES:
        raise UserError(f"--train-dtype must be one of {', '.join(TRAIN_DTYPES)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "bfloat16" if fast_bf16(device) else "float32"


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
