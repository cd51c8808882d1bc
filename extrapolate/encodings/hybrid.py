"""RoPE/NoPE hybrids (`rope-nope`): RoPE in most layers and no positional signal at all in every k-th one, as
Llama 4 (its "iRoPE", k = 4) and SmolLM3 (k = 4) are trained. Layer i attends without rotation where
(i + 1) is a multiple of k — transformers' `no_rope_layers` rule for both — and with plain RoPE otherwise.
The idea: the NoPE layers see every distance alike, so they carry information across lengths the RoPE layers
were never trained at.

`swa-rope-nope` puts the RoPE layers behind a sliding window and leaves the NoPE layers full: Cohere's RNoPE-SWA
(Yang et al. 2025, "Rope to Nope and Back Again"; transformers' Cohere2: three windowed RoPE layers, then one
full NoPE layer) and SWAN-GPT's layers (Puvvada et al. 2025). The window defaults to L/2, the ratio of
transformers' Cohere2 configuration (4096 at 8192). Only the NoPE layers then see past the window, and no RoPE
layer ever meets a distance it was not trained at. SWAN-GPT's inference-time dynamic scaling of the NoPE
layers' scores is not part of it: the hybrid is measured as it was trained.

Of Llama 4's iRoPE only the layer pattern is here: its RoPE layers' chunked attention and QK-norm are left out,
and its NoPE layers' temperature is `llama4-temperature`'s (encodings/rotary.py), applied apart.

Their models are trained with the hybrid (not a scaling of a RoPE model). The model asks the encoding for each
layer's own (`for_layer`); hooks called on the hybrid itself are RoPE's.
"""

from __future__ import annotations

from extrapolate.core.errors import UserError
from extrapolate.encodings.absolute import NoPE
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.options import option_defaults
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, ShowQuery
from extrapolate.encodings.window import windowed

NOPE_EVERY = 4  # Llama 4's and SmolLM3's interval


def nope_layers(layers: int, every: int) -> list[int]:
    """The layers (0-based) without positions: i with (i + 1) a multiple of `every`."""
    return [i for i in range(layers) if (i + 1) % every == 0]


class RopeNope(PositionalEncoding):
    name, kind = "rope-nope", "rotary"

    def __init__(self, head_dim: int, base: float = 10000.0, every: int = NOPE_EVERY, window: int | None = None):
        super().__init__()
        for option, value in (("nope_every", every), ("window", window)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(f"{self.name} {option} must be a whole number ≥ 1, got {value!r}")
        self.every, self.window = every, window
        if window is not None:
            self.name = "swa-rope-nope"
        self.rope, self.nope = Rotary(head_dim, "rope", base=base), NoPE()
        self.local = windowed(self.rope, window)  # the RoPE layers' attention: RoPE, behind the window if any

    def rotate(self, q, k, pos, seq_len=None):
        return self.rope.rotate(q, k, pos, seq_len)

    def for_layer(self, index: int) -> PositionalEncoding:
        """The encoding layer `index` (0-based) attends with."""
        return self.nope if (index + 1) % self.every == 0 else self.local

    def describe(self) -> dict:
        window = {} if self.window is None else {"window": self.window}
        return {"base": self.rope.base, "nope_every": self.every, **window}


def check_depth(layers: int, options: dict) -> None:
    """A hybrid whose k is past the model's depth would be plain RoPE under another name: refused."""
    every = options.get("nope_every", NOPE_EVERY)
    if isinstance(every, int) and not isinstance(every, bool) and every > layers:
        depth = f"{layers} layer{'s' * (layers != 1)}"
        raise UserError(
            f"a NoPE layer every k-th, k = {every}, leaves no NoPE layer in a model of {depth}: "
            f"the hybrid needs {every} layers or more (--layers, or a deeper --model)"
        )


def show_rope_nope(query: ShowQuery) -> dict:
    """Which of the model's `--layers` attend without positions."""
    every = query.options.get("nope_every", NOPE_EVERY)
    check_depth(query.layers, query.options)
    return {"nope_every": every, "layers": query.layers, "nope_layers": nope_layers(query.layers, every)}


def show_swa_rope_nope(query: ShowQuery) -> dict:
    """The layers, and the window of the RoPE ones at `--original-len` L (L/2 unless `--window` says)."""
    window = query.options.get("window", max(1, query.original_len // 2))
    return {**show_rope_nope(query), "window": window}


ROPE_NOPE = EncodingSpec(
    "rope-nope",
    "rotary",
    "RoPE with a NoPE layer every k-th layer, k = 4 (Yang et al. 2025; Llama 4's iRoPE, SmolLM3)",
    lambda shape: RopeNope(shape.head_dim, base=shape.base, every=shape.options.get("nope_every", NOPE_EVERY)),
    {"base": 10000.0, **option_defaults("nope_every")},
    colour="#a6cee3",
    show=show_rope_nope,
    group="newer",
    check_depth=check_depth,
)


SWA_ROPE_NOPE = EncodingSpec(
    "swa-rope-nope",
    "rotary",
    "RoPE layers behind a sliding window of L/2, a full NoPE layer every k-th, k = 4 (Cohere's RNoPE-SWA, "
    "SWAN-GPT; Yang et al. 2025, Puvvada et al. 2025)",
    lambda shape: RopeNope(
        shape.head_dim,
        base=shape.base,
        every=shape.options.get("nope_every", NOPE_EVERY),
        window=shape.options.get("window", max(1, shape.max_len // 2)),
    ),
    {"base": 10000.0, **option_defaults("nope_every"), "window": "L/2"},
    colour="#1b9e77",
    show=show_swa_rope_nope,
    group="newer",
    check_depth=check_depth,
)
