"""FIRE (Li et al. 2023, "Functional interpolation for relative positions"): the logit bias of query i and key
j ≤ i is f_θ(ψ(i - j) / ψ(max(L_thr, i))), ψ(x) = log(c·x + 1), f_θ an MLP 1 → 32 (ReLU) → one output per
head. The normaliser makes the input a fraction of the query's own position, in [0, 1], at every length:
that is its interpolation. c > 0 and L_thr > 0 are learned (log-parametrised, so they stay positive).

Initial values as the paper's published code: c = 0.1, L_thr = 512, MLP width 32 (PyTorch's default Linear
init), and 1e-6 added to the normaliser's log. One FIRE module serves every layer, as the T5 table does here.

Kernels: the bias depends on i itself, not only on i - j, so no (H, n) distance table can hold it
(`toeplitz = False`). flex_attention (CUDA) evaluates the MLP per score inside its kernel (`score_bias`). The
blocked kernel asks `bias_block` for one block of queries at a time: an (H, rows, keys) tensor built from the
block's positions alone, with the MLP evaluated in slices of rows so its (rows, keys, 32) hidden layer stays
bounded too. Memory is linear in n either way; no n×n tensor exists at evaluation.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.options import FIRE_INITIAL_C, FIRE_INITIAL_THRESHOLD, option_defaults
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

MLP_WIDTH = 32
NORMALISER_EPS = 1e-6
HIDDEN_ELEMENTS = 1 << 22  # rows × keys × width per MLP slice (16 MiB in float32)


def normalised_distance(
    q_pos: torch.Tensor, k_pos: torch.Tensor, c: torch.Tensor, threshold: torch.Tensor
) -> torch.Tensor:
    """(Tq, Tk) float32: ψ(i - j) / (ψ(max(L_thr, i)) + eps); keys after the query get distance 0 (masked later)."""
    distance = (q_pos[:, None] - k_pos[None, :]).clamp(min=0).to(c.dtype)  # (Tq, Tk)
    normaliser = torch.maximum(q_pos.to(c.dtype), threshold)  # (Tq,)
    return torch.log1p(c * distance) / (torch.log1p(c * normaliser) + NORMALISER_EPS)[:, None]


class Fire(PositionalEncoding):
    name, kind, has_bias, toeplitz = "fire", "bias", True, False

    def __init__(
        self, n_heads: int, width: int = MLP_WIDTH, c: float = FIRE_INITIAL_C, threshold: float = FIRE_INITIAL_THRESHOLD
    ):
        super().__init__()
        check_positive(c=c, threshold=threshold)
        # PyTorch's default Linear init, as the reference: the model's std-0.02 pass runs before the encoding
        # is built, so it does not reach these
        self.hidden = nn.Linear(1, width)
        self.out = nn.Linear(width, n_heads)
        self.log_c = nn.Parameter(torch.tensor(math.log(c)))
        self.log_threshold = nn.Parameter(torch.tensor(math.log(threshold)))

    def c_and_threshold(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_c.float().exp(), self.log_threshold.float().exp()

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """(R, K) -> (H, R, K): f_θ per head."""
        hidden = torch.relu(self.hidden(x[..., None].to(self.hidden.weight.dtype)))  # (R, K, W)
        return self.out(hidden).float().permute(2, 0, 1)  # (H, R, K)

    def bias(self, q_pos, k_pos):
        """(H, Tq, Tk) for explicit positions, the full matrix at once (tests and the reference kernel)."""
        c, threshold = self.c_and_threshold()
        return self.mlp(normalised_distance(q_pos, k_pos, c, threshold))

    def bias_block(self, q0, q1, device=None):
        device = device or self.log_c.device
        c, threshold = (t.to(device) for t in self.c_and_threshold())
        k_pos = torch.arange(q1, device=device)  # (K,) every key up to the block's last query
        keys, width = q1, self.hidden.out_features
        rows = max(1, HIDDEN_ELEMENTS // max(1, keys * width))
        pieces = []
        for r0 in range(q0, q1, rows):  # a slice of rows at a time bounds the MLP's hidden layer
            q_pos = torch.arange(r0, min(q1, r0 + rows), device=device)  # (R,)
            pieces.append(self.mlp(normalised_distance(q_pos, k_pos, c, threshold)))  # (H, R, K)
        block = torch.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0]  # (H, q1-q0, K)
        above = k_pos[None, :] > torch.arange(q0, q1, device=device)[:, None]  # (q1-q0, K) keys after the query
        return block.masked_fill(above, float("-inf"))

    def score_bias(self, keys, device=None):
        """bias(h, i, d) = f_θ(ψ(d) / ψ(max(L_thr, i)))[h], the MLP unrolled over its hidden units so that
        flex_attention evaluates it per score inside its kernel (no (rows, keys, width) tensor at all)."""
        device = device or self.log_c.device
        c, threshold = (t.to(device) for t in self.c_and_threshold())
        # one tensor per hidden unit, each its own storage (not a view): flex differentiates a captured tensor
        # read at one index only, and its CPU lowering takes no views of captured tensors
        w1 = [w.clone() for w in self.hidden.weight[:, 0].float().unbind(0)]  # W scalars
        b1 = [b.clone() for b in self.hidden.bias.float().unbind(0)]  # W scalars
        w2 = [w.clone() for w in self.out.weight.float().t().unbind(0)]  # W × (H,): each unit's weight into every head
        b2 = self.out.bias.float()  # (H,)

        def bias(h, i, d):
            x = torch.log1p(c * d) / (torch.log1p(c * torch.maximum(i.to(c.dtype), threshold)) + NORMALISER_EPS)
            out = b2[h]
            for w_in, b_in, w_out in zip(w1, b1, w2):
                out = out + w_out[h] * torch.relu(w_in * x + b_in)
            return out

        return bias

    @torch.no_grad()
    def describe(self):
        c, threshold = self.c_and_threshold()
        return {
            "mlp_width": self.hidden.out_features,
            "fire_c": round(float(c), 6),
            "threshold": round(float(threshold), 4),
        }


def check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"fire {name} must be > 0, got {value:g}")


def show_fire(query: ShowQuery) -> dict:
    """The MLP's input (learned weights have no closed form): ψ(d) / ψ(max(L_thr, i)) for query i = --position."""
    c = float(query.options.get("fire_c", FIRE_INITIAL_C))
    threshold = float(query.options.get("threshold", FIRE_INITIAL_THRESHOLD))
    check_positive(c=c, threshold=threshold)
    distances = query.distances if query.distances is not None else [0, 1, 5, 20, 200, 1000]
    # the query sits at the farthest distance unless placed: every key it is shown against then exists
    position = max(distances) if query.position is None else query.position
    if any(d < 0 or d > position for d in distances):
        raise UserError(f"fire distances must be in [0, --position = {position}]")
    i = torch.tensor([position], dtype=torch.float64)
    keys = i - torch.tensor(distances, dtype=torch.float64)
    normalised = normalised_distance(
        i, keys, torch.tensor(c, dtype=torch.float64), torch.tensor(threshold, dtype=torch.float64)
    )
    return {
        "fire_c": c,
        "threshold": threshold,
        "mlp_width": MLP_WIDTH,
        "position": position,
        "distances": distances,
        "normalised_distance": normalised[0].tolist(),
    }


FIRE = EncodingSpec(
    "fire",
    "bias",
    "learned MLP of the log distance over the log query position (Li et al. 2023)",
    lambda shape: Fire(shape.n_heads),
    {"heads": "model heads", "mlp_width": MLP_WIDTH, **option_defaults("fire_c", "threshold")},
    colour="#9edae5",
    show=show_fire,
    group="newer",
)
