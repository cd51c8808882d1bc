"""Stick-breaking attention (`stick-breaking`; Tan et al., ICLR 2025, "Scaling Stick-Breaking Attention: An
Efficient Implementation and In-depth Study"): no positional encoding and no softmax. Query i gives key j < i
the weight σ(z_ij)·Π_{j<m<i} (1 - σ(z_im)), z = q·k/√d: walking back from the query, each key breaks off its
share of what the nearer keys left, so order alone — not a position — makes the near keys first in line, and
a query at any length starts from the same nearest key.

As the authors' code (shawntan/stickbreaking-attention, `sb_ref.py` and its tests; the layer of IBM's
dolomite-engine, `sb_remainder` on): strictly causal (a query does not attend to its own key), the logits in
float32 through log-sigmoid, and the stick no key took, Π_{j<i} (1 - σ(z_ij)), added as that share of the
query's own value. The kernel (kernels/stick_breaking.py) walks the keys in blocks from the diagonal back, in
memory linear in the length, and stops where every row has given its stick away.
"""

from __future__ import annotations

import math

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


class StickBreaking(PositionalEncoding):
    name, kind, own_kernel = "stick-breaking", "none", "stick-breaking"


def show_stick_breaking(query: ShowQuery) -> dict:
    """The weight each of `--distances` keys back gets when every key's logit is the same z: σ(z)(1 - σ(z))^(d-1),
    for three logits — the nearer keys take the stick first, and a larger logit hands less of it on."""
    distances = [d for d in (query.distances or [1, 2, 4, 16, 256]) if d >= 1]  # the query's own key: no stick
    if not distances:
        raise UserError(
            "stick-breaking weighs keys 1 or more back (the query's own takes what is left): give --distances ≥ 1"
        )
    weights = {}
    for z in (-2.0, 0.0, 2.0):
        share = 1 / (1 + math.exp(-z))
        weights[f"z = {z:g}"] = [float(f"{share * (1 - share) ** (d - 1):.4g}") for d in distances]
    return {"distances": distances, "weight": weights}


STICK_BREAKING = EncodingSpec(
    "stick-breaking",
    "none",
    "stick-breaking attention: key j takes σ(z_ij)·Π(1 - σ(z_im)) over the keys between, no softmax, no positions "
    "(Tan et al. 2025)",
    lambda shape: StickBreaking(),
    {"remainder": "to the query's own value"},
    colour="#843c39",
    show=show_stick_breaking,
    group="newer",
)
