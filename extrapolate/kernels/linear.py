"""`Linear`: nn.Linear whose bf16 matmul runs at float32 speed on CPUs without native bf16.

On an AVX2-only CPU, oneDNN has no bf16 kernel and a bf16 GEMM falls back to a slow loop (a 4096×576 by
576×1536 product: 15 GFLOP/s, against 90 in float32, on a 2-core AVX2 CPU). The same arithmetic can run in
float32: a bf16 GEMM rounds its inputs to bf16, multiplies them (a product of two bf16 numbers is exact in
float32: 8 + 8 significant bits), accumulates in float32 and rounds the output to bf16 once. Doing exactly that
with float32 tensors gives the bf16 result up to the order of the float32 sums, which differs between native
kernels too (AVX-512 and AMX block the sums differently). So evaluation in bf16 keeps its meaning and stops
being the slow part on such a CPU; CPUs with native bf16, CUDA and MPS take nn.Linear's own path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from extrapolate.core.device import cpu_has_fast_bf16


def bf16_matmul_on_slow_cpu(x: torch.Tensor) -> bool:
    """Whether a linear layer given `x` would run a bf16 GEMM on a CPU without native bf16."""
    if x.device.type != "cpu":
        return False
    if torch.is_autocast_enabled("cpu"):
        in_bf16 = torch.get_autocast_dtype("cpu") == torch.bfloat16
    else:
        in_bf16 = x.dtype == torch.bfloat16
    return in_bf16 and not cpu_has_fast_bf16()


def bf16_linear_in_float32(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear with bf16 semantics (inputs rounded to bf16, float32 accumulation, bf16 output), computed with
    float32 kernels. x (..., In), weight (Out, In), bias (Out,) -> (..., Out) in bf16."""

    def rounded(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.bfloat16).float()

    with torch.autocast("cpu", enabled=False):  # autocast would cast the float32 inputs straight back to bf16
        out = F.linear(rounded(x), rounded(weight), None if bias is None else rounded(bias))
    return out.to(torch.bfloat16)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) with the float32-kernel bf16 path where it is faster."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bf16_matmul_on_slow_cpu(x):
            return bf16_linear_in_float32(x, self.weight, self.bias)
        return super().forward(x)
