"""The Forgetting Transformer (`fox`, `fox-rope`; Lin et al., ICLR 2025, "Forgetting Transformer: Softmax
Attention with a Forget Gate"): each head of each layer has a scalar forget gate per token,
f_t = σ(w·x_t + b), x_t the attention layer's (normed) input, and the score of query i and key j gains
D_ij = Σ_{l=j+1..i} log f_l = c_i - c_j, c the cumulative log gate: a data-dependent decay with distance, which
the model learns to keep near 0 (f ≈ 1) where it needs far context.

As the authors' code (zhixuan-lin/forgetting-transformer): the gate is a (d_model → heads) linear layer with a
bias, its weight drawn N(0, 0.02) and its bias 0 (f starts near 1/2), the log gate computed in float32 through
log-sigmoid; FoX uses no positional encoding (`fox`, their `use_rope: false`); `fox-rope` adds RoPE (base
10000 here, the project's). The kernels add c_i - c_j without an n × n tensor (kernels/forget.py); a KV cache
keeps c of its positions. The model asks the encoding for each layer's own (`for_layer`), which holds its gate.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


class ForgetLayer(PositionalEncoding):
    """One layer's forget gate, over RoPE or no positions."""

    forgets = True

    def __init__(self, name: str, kind: str, d_model: int, n_heads: int, rope: Rotary | None):
        super().__init__()
        self.name, self.kind = name, kind
        self.gate = nn.Linear(d_model, n_heads, bias=True)
        nn.init.normal_(self.gate.weight, std=GPT2_INIT_STD)
        nn.init.zeros_(self.gate.bias)
        self._rope = (rope,)  # shared with the other layers: held outside the module tree

    def rotate(self, q, k, pos, seq_len=None):
        rope = self._rope[0]
        return (q, k) if rope is None else rope.rotate(q, k, pos, seq_len)

    def log_forget(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> (B, H, T) float32 log f."""
        return F.logsigmoid(self.gate(x).float()).transpose(1, 2)


class Forget(PositionalEncoding):
    forgets = True

    def __init__(self, d_model: int, n_heads: int, n_layers: int, head_dim: int, rope: bool, base: float = 10000.0):
        super().__init__()
        self.name, self.kind = ("fox-rope", "rotary") if rope else ("fox", "bias")
        self.rope = Rotary(head_dim, "rope", base=base) if rope else None
        self.layers = nn.ModuleList(
            ForgetLayer(self.name, self.kind, d_model, n_heads, self.rope) for _ in range(n_layers)
        )

    def rotate(self, q, k, pos, seq_len=None):
        """The first layer's: the model calls each layer's own (`for_layer`)."""
        return self.layers[0].rotate(q, k, pos, seq_len)

    def log_forget(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers[0].log_forget(x)

    def for_layer(self, index: int) -> PositionalEncoding:
        return self.layers[index]

    def describe(self) -> dict:
        return {"base": self.rope.base} if self.rope is not None else {}


def show_forget(query: ShowQuery) -> dict:
    """The decay c_i - c_j a constant gate f gives at each of `--distances` (the gate is data-dependent: its
    initial value, σ(0) = 1/2, and two values a trained head learns)."""
    distances = query.distances or [0, 1, 16, 256, 4096]
    gates = {"0.5 (initial)": 0.5, "0.99": 0.99, "0.999": 0.999}
    return {
        "distances": distances,
        "decay": {label: [round(d * math.log(f), 6) + 0.0 for d in distances] for label, f in gates.items()},
    }


def forget_spec(rope: bool) -> EncodingSpec:
    name = "fox-rope" if rope else "fox"
    positions = "over RoPE" if rope else "without positions"
    return EncodingSpec(
        name,
        "rotary" if rope else "bias",
        f"Forgetting Transformer: a learned forget gate per head and token, scores + Σ log f, {positions} "
        "(Lin et al. 2025)",
        lambda shape: Forget(shape.d_model, shape.n_heads, shape.n_layers, shape.head_dim, rope, shape.base),
        {**({"base": 10000.0} if rope else {}), "gate": "learned per layer: d_model → heads, from N(0, 0.02), bias 0"},
        colour="#80b1d3" if rope else "#bebada",
        show=show_forget,
        trained_parameters=rope,
    )


FOX, FOX_ROPE = forget_spec(False), forget_spec(True)
