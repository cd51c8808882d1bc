"""DAPE, data-adaptive position encoding (Zheng et al., NeurIPS 2024, "DAPE: Data-Adaptive Positional Encoding
for Length Extrapolation"): a bias that adapts to the attention it joins. Each logit is the score a = q·k/√d,
the KERPLE-log bias b = −p·log(1 + a_h·(i − j)) and a two-layer MLP of both across the heads at that pair:
logit = a + b + W2·LeakyReLU(W1·[a; b] + c1) + c2, then the causal softmax.

As the authors' code (chuanyang-Zheng/DAPE at bde344a, `megatron/model/positional_embeddings.py`,
`ParallelKerpleLog_C`, called from `ParallelSelfAttention.attention`): the input channels the H scores then the
H biases; hidden width 32 (`mlp_width` of every config); LeakyReLU of slope 0.01; both layers with their biases,
torch's default initialisation; one MLP and one KERPLE a layer; the scores enter unmasked and the causal mask
follows. KERPLE-log is the paper's headline variant; its p and a keep this project's form (softplus of a raw
parameter, encodings/kerple.py) where the reference clamps them at 0.01 after each step. The kernel
(kernels/dape.py) works in blocks of query rows and keys, in memory linear in the length at evaluation.
"""

from __future__ import annotations

from torch import nn

from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.kerple import Kerple, log_kernel
from extrapolate.encodings.options import DAPE_WIDTH, option_defaults
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def dape_mlp(n_heads: int, width: int) -> nn.Sequential:
    """2H → width → H, LeakyReLU between (the reference's `mlp2`)."""
    return nn.Sequential(nn.Linear(2 * n_heads, width), nn.LeakyReLU(), nn.Linear(width, n_heads))


class DAPELayer(PositionalEncoding):
    """One layer's KERPLE-log bias and the MLP over scores and bias."""

    name, kind, own_kernel = "dape", "bias", "dape"

    def __init__(self, n_heads: int, width: int):
        super().__init__()
        self.kerple = Kerple(n_heads, "log")
        self.mlp = dape_mlp(n_heads, width)

    def bias(self, distance):
        """(rows, keys) distances ≥ 0 -> (H, rows, keys) KERPLE-log bias."""
        r1, r2 = (c.to(distance.device) for c in self.kerple.coefficients())
        rows, keys = distance.shape
        return log_kernel(distance.reshape(-1), r1, r2).reshape(-1, rows, keys)


class DAPE(PositionalEncoding):
    name, kind, own_kernel = "dape", "bias", "dape"

    def __init__(self, n_heads: int, n_layers: int, width: int = DAPE_WIDTH):
        super().__init__()
        self.width = int(width)
        self.layers = nn.ModuleList(DAPELayer(n_heads, self.width) for _ in range(n_layers))

    def for_layer(self, index: int) -> PositionalEncoding:
        return self.layers[index]

    def describe(self) -> dict:
        return {"bias": "kerple-log", "mlp_width": self.width}


def show_dape(query: ShowQuery) -> dict:
    width = query.options.get("dape_width", DAPE_WIDTH)
    return {
        "bias": "kerple-log: -p·log(1 + a·(i - j)), p ~ U(0, 2), a ~ U(0, 1) per head",
        "mlp": f"2H -> {width} -> H, LeakyReLU(0.01), over the H scores then the H biases at each (i, j)",
        "logit": "score + bias + mlp(scores, biases)",
    }


DAPE_SPEC = EncodingSpec(
    "dape",
    "bias",
    "DAPE: KERPLE-log bias plus an MLP of score and bias across the heads at each pair (Zheng et al. 2024)",
    lambda shape: DAPE(shape.n_heads, shape.n_layers, shape.options.get("dape_width", DAPE_WIDTH)),
    {"bias": "kerple-log, learned per layer", **option_defaults("dape_width")},
    colour="#c49c94",
    show=show_dape,
)
