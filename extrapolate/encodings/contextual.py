"""Contextual position encoding (`cope`; Golovneva et al. 2024, "Contextual Position Encoding: Learning to Count
What's Important"): a key's position is not its distance but a count of the keys that the query's gates
open between them, p_ij = Σ_{j≤m≤i} σ(q_i·k_m/√d), a fractional number that the score reads from a learned
table of position embeddings by interpolation between its floor and ceiling rows. A model that learns to
open its gates on, say, sentence ends counts sentences, whatever the number of tokens.

As the authors' code (facebookresearch/RAM, projects/cope/src/cope/context_position.py, with the project's
attention of projects/cope/src/models/transformer.py): the gates from the attention's own q and k, each head
its own; one table e (Dh, P) a layer, shared by its heads, initialised to zeros (the model starts as NoPE);
P = L + 1 rows (the block size plus one: position 0 is possible) and positions clamped to the last row; the
table logit added to q·k before the division by √d; no other position encoding. The kernel
(kernels/contextual.py) walks the keys in blocks from the diagonal back, in memory linear in the length.
"""

from __future__ import annotations

import torch
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


class ContextualLayer(PositionalEncoding):
    """One layer's table of position embeddings."""

    name, kind, own_kernel = "cope", "bias", "contextual"

    def __init__(self, head_dim: int, rows: int):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(head_dim, rows))  # (Dh, P), the reference's zeros


class Contextual(PositionalEncoding):
    name, kind, own_kernel = "cope", "bias", "contextual"

    def __init__(self, head_dim: int, n_layers: int, rows: int):
        super().__init__()
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 2:
            raise UserError(f"cope positions must be a whole number ≥ 2, got {rows!r}")
        self.rows = rows
        self.layers = nn.ModuleList(ContextualLayer(head_dim, rows) for _ in range(n_layers))

    def for_layer(self, index: int) -> PositionalEncoding:
        return self.layers[index]

    def describe(self) -> dict:
        return {"positions": self.rows}


def show_contextual(query: ShowQuery) -> dict:
    """The position p_ij a key `--distances` tokens back gets when every gate between is open by the same g:
    (d + 1)·g, clamped to the table's last row (P - 1 = L at `--original-len` L) — counting tokens at g = 1,
    every other token at 1/2, and past L the last row, which the model reaches only where it counts tokens."""
    rows = query.options.get("cope_positions", query.original_len + 1)
    distances = query.distances or [0, 1, 16, 256, 4096]
    return {
        "positions": rows,
        "distances": distances,
        "position": {f"gates {g:g}": [min((d + 1) * g, rows - 1) for d in distances] for g in (1.0, 0.5, 0.1)},
    }


COPE = EncodingSpec(
    "cope",
    "bias",
    "contextual position: gates σ(q·k) counted from key to query, a learned embedding read at that count "
    "(Golovneva et al. 2024)",
    lambda shape: Contextual(shape.head_dim, shape.n_layers, shape.options.get("cope_positions", shape.max_len + 1)),
    {"cope_positions": "L + 1", "table": "learned per layer: (head dim, positions), from zeros"},
    colour="#cedb9c",
    show=show_contextual,
    group="newer",
)
