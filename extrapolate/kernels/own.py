"""The kernels of the encodings that attend by a rule of their own (`own_kernel`): each named by its plan and
called with what the layer's encoding holds, so the encodings stay below the kernels that run them."""

from __future__ import annotations

from extrapolate.encodings.base import PositionalEncoding
from extrapolate.kernels import contextual, dape, stick_breaking

KERNELS = {
    "stick-breaking": lambda q, k, v, encoding, blocks: stick_breaking.attention(q, k, v, blocks),
    "contextual": lambda q, k, v, encoding, blocks: contextual.attention(q, k, v, encoding.table, blocks),
    "dape": lambda q, k, v, encoding, blocks: dape.attention(q, k, v, encoding.bias, encoding.mlp, blocks),
}


def own_attention(q, k, v, encoding: PositionalEncoding, block_elements: int | None):
    """The attention of one layer's encoding with an `own_kernel`: q (B, H, Tq, Dh), k and v (B, Hkv, Tk, Dh),
    the queries the last Tq of the Tk positions -> (B, H, Tq, Dh), in blocks of about `block_elements` scores
    (None: one block, the reference)."""
    return KERNELS[encoding.own_kernel](q, k, v, encoding, block_elements)
