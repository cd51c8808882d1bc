"""KERPLE (Chi et al. 2022): a learned conditionally positive definite kernel of the distance d = i - j as the
logit bias, one (r1, r2) pair per head, both > 0:

- log:   -r1 · log(1 + r2 · d)
- power: -r1 · d^r2, 0 < r2 ≤ 2

Initial values as the reference code (chijames/KERPLE) draws them: log r1 ~ U(0, 2), r2 ~ U(0, 1); power
r1 ~ U(0, 1), r2 ~ U(0, 2); each at least 0.01 (the reference's clamp). Where the reference clamps the raw
parameter after every step, here r = softplus(raw) (and the power's r2 = 2·sigmoid(raw)) keeps every value
in range with gradients everywhere.

Kernels: the bias is a function of d alone, so the (H, n) distance table and the blocked kernel serve it in
linear memory. The fused kernels do not: it is neither linear in d (ALiBi's bias per key) nor constant
past a distance (T5's log-sum-exp constant); the log kernel keeps changing at every distance.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

SMALLEST = 0.01  # the reference's clamp: no initial value below it


def inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    return y + torch.log(-torch.expm1(-y))  # log(e^y - 1), stable for small and large y


def log_kernel(distance: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    """(H, n) bias -r1·log(1 + r2·d) for distances (n,) and per-head r1, r2 (H,)."""
    return -r1[:, None] * torch.log1p(r2[:, None] * distance[None, :])


def power_kernel(distance: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    """(H, n) bias -r1·d^r2 (0^r2 = 0 for r2 > 0)."""
    return -r1[:, None] * distance[None, :].pow(r2[:, None])


class Kerple(PositionalEncoding):
    kind, has_bias = "bias", True
    INITIAL_RANGES = {"log": (2.0, 1.0), "power": (1.0, 2.0)}  # upper bounds of U(0, ·) for r1, r2

    def __init__(
        self, n_heads: int, variant: str = "log", r1: torch.Tensor | None = None, r2: torch.Tensor | None = None
    ):
        super().__init__()
        if variant not in self.INITIAL_RANGES:
            raise ValueError(f"KERPLE variant must be log or power, not {variant!r}")
        self.name, self.variant = f"kerple-{variant}", variant
        top1, top2 = self.INITIAL_RANGES[variant]
        r1 = torch.rand(n_heads) * top1 if r1 is None else torch.as_tensor(r1, dtype=torch.float32)
        r2 = torch.rand(n_heads) * top2 if r2 is None else torch.as_tensor(r2, dtype=torch.float32)
        check_coefficients(variant, r1, r2)
        r1, r2 = r1.clamp(min=SMALLEST), r2.clamp(min=SMALLEST)
        self.raw_r1 = nn.Parameter(inverse_softplus(r1))  # (H,)
        if variant == "power":  # r2 = 2·sigmoid(raw) ∈ (0, 2)
            self.raw_r2 = nn.Parameter(torch.logit(r2.clamp(max=2 - 1e-6) / 2))  # (H,)
        else:
            self.raw_r2 = nn.Parameter(inverse_softplus(r2))  # (H,)

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2), each (H,) float32 and > 0 (power: r2 ≤ 2)."""
        r1 = F.softplus(self.raw_r1.float())
        r2 = 2 * torch.sigmoid(self.raw_r2.float()) if self.variant == "power" else F.softplus(self.raw_r2.float())
        return r1, r2

    def bias_table(self, n, device=None):
        distance = torch.arange(n, dtype=torch.float32, device=device or self.raw_r1.device)  # (n,)
        r1, r2 = (c.to(distance.device) for c in self.coefficients())
        kernel = log_kernel if self.variant == "log" else power_kernel
        return kernel(distance, r1, r2)  # (H, n)

    @torch.no_grad()
    def describe(self):
        r1, r2 = self.coefficients()
        return {
            "variant": self.variant,
            "r1": [round(v, 6) for v in r1.tolist()],
            "r2": [round(v, 6) for v in r2.tolist()],
        }


def check_coefficients(variant: str, r1: torch.Tensor, r2: torch.Tensor) -> None:
    """r1 and r2 are float32 (H,): a value past float32's range arrives here as inf and is named as too large."""
    for name, value in (("r1", r1), ("r2", r2)):
        if (value == float("inf")).any():
            raise UserError(
                f"kerple-{variant}: {name} must be a float32 number (at most {torch.finfo(torch.float32).max:.3g})"
            )
        if not (torch.isfinite(value).all() and (value > 0).all()):
            raise UserError(f"kerple-{variant}: {name} must be > 0, got {value.tolist()}")
    if variant == "power" and (r2 > 2).any():
        raise UserError(f"kerple-power: r2 must be at most 2, got {r2.tolist()}")


def show_kerple(variant: str):
    top1, top2 = Kerple.INITIAL_RANGES[variant]

    def show(query: ShowQuery) -> dict:
        r1 = float(query.options.get("r1", top1 / 2))  # default: the middle of the initial range
        r2 = float(query.options.get("r2", top2 / 2))
        check_coefficients(variant, torch.tensor([r1]), torch.tensor([r2]))
        distances = query.distances if query.distances is not None else [0, 1, 5, 20, 200, 1000]
        if any(d < 0 for d in distances):
            raise UserError(f"kerple-{variant} distances are how far back the key is: use numbers ≥ 0")
        kernel = log_kernel if variant == "log" else power_kernel
        bias = kernel(
            torch.tensor(distances, dtype=torch.float64),
            torch.tensor([r1], dtype=torch.float64),
            torch.tensor([r2], dtype=torch.float64),
        )[0]
        return {
            "variant": variant,
            "r1": r1,
            "r2": r2,
            "initial_r1": f"U(0, {top1:g})",
            "initial_r2": f"U(0, {top2:g})",
            "distances": distances,
            "bias": bias.tolist(),
        }

    return show


def kerple_spec(variant: str, formula: str, colour: str) -> EncodingSpec:
    top1, top2 = Kerple.INITIAL_RANGES[variant]
    return EncodingSpec(
        f"kerple-{variant}",
        "bias",
        f"learned kernel bias {formula} per head (Chi et al. 2022)",
        lambda shape: Kerple(shape.n_heads, variant),
        {"heads": "model heads", "r1": f"learned, from U(0, {top1:g})", "r2": f"learned, from U(0, {top2:g})"},
        colour=colour,
        show=show_kerple(variant),
        group="newer",
    )


KERPLE_LOG = kerple_spec("log", "-r1·log(1 + r2·|i-j|)", "#e7ba52")
KERPLE_POWER = kerple_spec("power", "-r1·|i-j|^r2", "#f7b6d2")
