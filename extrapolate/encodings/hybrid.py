"""RoPE/NoPE hybrids (`rope-nope`): RoPE in most layers and no positional signal at all in every k-th one, as
Llama 4 (its "iRoPE", k = 4) and SmolLM3 (k = 4) are trained. Layer i attends without rotation where
(i + 1) is a multiple of k — transformers' `no_rope_layers` rule for both — and with plain RoPE otherwise.
The idea: the NoPE layers see every distance alike, so they carry information across lengths the RoPE layers
were never trained at.

Its model is trained with the hybrid (not a scaling of a RoPE model). The model asks the encoding for each
layer's own (`for_layer`); hooks called on the hybrid itself are RoPE's.
"""

from __future__ import annotations

from extrapolate.core.errors import UserError
from extrapolate.encodings.absolute import NoPE
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.options import option_defaults
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

NOPE_EVERY = 4  # Llama 4's and SmolLM3's interval


def nope_layers(layers: int, every: int) -> list[int]:
    """The layers (0-based) without positions: i with (i + 1) a multiple of `every`."""
    return [i for i in range(layers) if (i + 1) % every == 0]


class RopeNope(PositionalEncoding):
    name, kind = "rope-nope", "rotary"

    def __init__(self, head_dim: int, base: float = 10000.0, every: int = NOPE_EVERY):
        super().__init__()
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise UserError(f"rope-nope nope_every must be a whole number ≥ 1, got {every!r}")
        self.every = every
        self.rope, self.nope = Rotary(head_dim, "rope", base=base), NoPE()

    def rotate(self, q, k, pos, seq_len=None):
        return self.rope.rotate(q, k, pos, seq_len)

    def for_layer(self, index: int) -> PositionalEncoding:
        """The encoding layer `index` (0-based) attends with."""
        return self.nope if (index + 1) % self.every == 0 else self.rope

    def describe(self) -> dict:
        return {"base": self.rope.base, "nope_every": self.every}


def show_rope_nope(query: ShowQuery) -> dict:
    every = query.options.get("nope_every", NOPE_EVERY)
    layers = 12
    return {"nope_every": every, "layers": layers, "nope_layers": nope_layers(layers, every)}


ROPE_NOPE = EncodingSpec(
    "rope-nope",
    "rotary",
    "RoPE with a NoPE layer every k-th layer, k = 4 (Yang et al. 2025; Llama 4's iRoPE, SmolLM3)",
    lambda shape: RopeNope(shape.head_dim, base=shape.base, every=shape.options.get("nope_every", NOPE_EVERY)),
    {"base": 10000.0, **option_defaults("nope_every")},
    colour="#a6cee3",
    show=show_rope_nope,
    group="newer",
)
