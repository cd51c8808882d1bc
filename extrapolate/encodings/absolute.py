"""Absolute encodings, added to the token embeddings once: sinusoidal, learned, and none (NoPE)."""

from __future__ import annotations

import torch
from torch import nn

from extrapolate.core.defaults import SINUSOIDAL_STEPS
from extrapolate.core.errors import PositionOutOfRange, UserError
from extrapolate.core.identity import GPT2_INIT_STD
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def sinusoidal_table(pos: torch.Tensor, width: int) -> torch.Tensor:
    """(T, D) interleaved sinusoids: PE[p, 2i] = sin(p·10000^(-2i/D)), PE[p, 2i+1] = cos(same angle).

    Computed on the fly for any position (no fixed-size buffer), in float32.
    """
    exponents = torch.arange(0, width, 2, dtype=torch.float64, device=pos.device) / width
    freq = (10000.0**-exponents).to(torch.float32)  # (D/2,)
    angle = pos.to(torch.float32)[:, None] * freq[None, :]  # (T, D/2)
    table = torch.stack((angle.sin(), angle.cos()), dim=-1)  # (T, D/2, 2): pair i shares one frequency
    return table.flatten(1)[:, :width]  # (T, D)


class Sinusoidal(PositionalEncoding):
    """The fixed table, added with a scale of D^-1/2 (as x-transformers does): token embeddings start at
    std 0.02, and an unscaled table (RMS 0.7) would drown them and cripple the model at every length."""

    name, kind = "sinusoidal", "absolute"

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.scale = d_model**-0.5

    def embed(self, x, pos):
        return x + (self.scale * sinusoidal_table(pos, self.d_model)).to(x.dtype)


class Learned(PositionalEncoding):
    """A `max_len × D` table trained with the model. Past its last row: an error, or `clamp` if asked.

    `std` (0: zeros) and `lr_scale` (a multiple of the model's learning rate, which the optimizer reads from
    this module) are the table's recipe; the defaults, 0.02 and 1, are GPT-2's."""

    name, kind = "learned", "absolute"
    POLICIES = ("error", "clamp")

    def __init__(
        self, d_model: int, max_len: int, policy: str = "error", std: float = GPT2_INIT_STD, lr_scale: float = 1.0
    ):
        super().__init__()
        if policy not in self.POLICIES:
            raise ValueError(f"learned position policy must be one of {self.POLICIES}, not {policy!r}")
        self.max_len, self.policy, self.std, self.lr_scale = max_len, policy, std, lr_scale
        self.table = nn.Embedding(max_len, d_model)
        if std > 0:
            nn.init.normal_(self.table.weight, std=std)
        else:
            nn.init.zeros_(self.table.weight)

    def embed(self, x, pos):
        last = int(pos[-1]) if pos.numel() else 0
        if last >= self.max_len:
            if self.policy == "error":
                raise PositionOutOfRange(last, self.max_len)
            pos = pos.clamp(max=self.max_len - 1)
        return x + self.table(pos).to(x.dtype)

    def describe(self):
        return {"max_len": self.max_len, "policy": self.policy, "init_std": self.std, "lr_scale": self.lr_scale}


class NoPE(PositionalEncoding):
    """No positional signal at all: causal masking alone tells tokens apart."""

    name, kind = "nope", "none"


def show_sinusoidal(query: ShowQuery) -> dict:
    position = 1 if query.position is None else query.position
    if position < 0 or query.width < 2 or query.width % 2:
        raise UserError("sinusoidal needs a position ≥ 0 and an even width ≥ 2")
    vector = sinusoidal_table(torch.tensor([position]), query.width)[0]
    return {"position": position, "width": query.width, "vector": vector.tolist()}


def vaswani_embed_std(width: int) -> float:
    """Token embeddings at std D^-1/2, as the original Transformer's code initialises them (its ×√D on the
    embeddings is a no-op under pre-norm): the table (RMS 0.71·D^-1/2) then starts at 0.7 of the tokens, not
    at three times GPT-2's 0.02, and Adam's fixed-size steps move tokens that large four times less in
    relative terms, so the ratio holds while the model learns to find a token by its content."""
    return width**-0.5


SINUSOIDAL = EncodingSpec(
    "sinusoidal",
    "absolute",
    "fixed sin/cos added to the embeddings (Vaswani 2017)",
    lambda shape: Sinusoidal(shape.d_model),
    colour="#1f77b4",
    show=show_sinusoidal,
    default_steps=SINUSOIDAL_STEPS,
    default_embed_std=vaswani_embed_std,
)
LEARNED = EncodingSpec(
    "learned",
    "absolute",
    "trained table of positions; none past its rows",
    lambda shape: Learned(
        shape.d_model,
        shape.max_len,
        policy=shape.learned_policy,
        std=shape.position_std,
        lr_scale=shape.position_lr_scale,
    ),
    {"max_len": "train length", "policy": "error"},
    colour="#ff7f0e",
    show=lambda query: {
        "note": "a trained table: no closed form; positions past its rows are unsupported",
        "parameters": LEARNED.parameters,
    },
)
NOPE = EncodingSpec(
    "nope",
    "none",
    "no positional signal; causal masking alone",
    lambda shape: NoPE(),
    colour="#000000",
    show=lambda query: {"note": "no positional signal"},
)
