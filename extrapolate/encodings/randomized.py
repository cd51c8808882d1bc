"""Randomized positions (Ruoss et al. 2023): in training, a sequence of T tokens takes as its positions a sorted
random subset of [0, L_max) instead of 0 … T-1, so the model meets the large positions (and the gaps between
them) it will see past its training length; in evaluation positions are 0 … n-1 as usual. Applied here to
RoPE (`rope-randomized`) and to the sinusoidal table (`sinusoidal-randomized`).

As in the reference code, one draw serves the whole batch and every layer of a forward pass (the model asks
for positions once per forward, through the `positions` hook). Draw k of a model is seeded from (the model's
seed, k): both are buffers saved with the weights, so a resumed run draws what an uninterrupted one would.
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.absolute import Sinusoidal, show_sinusoidal
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.rotary import Rotary, apply_rotary, rotary_cos_sin
from extrapolate.encodings.spec import EncodingSpec, ShowQuery

RANGE_FACTOR = 8  # L_max = 8 × the training length: the default evaluation reaches 8L, so every position is seen


def random_positions(length: int, max_position: int, generator: torch.Generator) -> torch.Tensor:
    """(length,) int64: `length` distinct positions drawn uniformly from [0, max_position), sorted."""
    if length > max_position:
        raise UserError(f"cannot draw {length} distinct positions below L_max = {max_position}")
    return torch.randperm(max_position, generator=generator)[:length].sort().values


def draw_generator(seed: int, draw: int) -> torch.Generator:
    """The generator of draw `draw` of a model seeded `seed`: a pure function of both."""
    return torch.Generator().manual_seed(seed * 1_000_003 + draw)


class PositionDraws(torch.nn.Module):
    """The random positions of training forwards. `seed` defaults to the seed torch was last seeded with
    (training seeds torch with the run's seed before building the model), read without consuming randomness."""

    def __init__(self, max_position: int, seed: int | None = None):
        super().__init__()
        if max_position < 1:
            raise UserError(f"L_max must be at least 1, got {max_position}")
        self.max_position = int(max_position)
        seed = torch.initial_seed() % (1 << 62) if seed is None else int(seed)
        self.register_buffer("seed", torch.tensor(seed, dtype=torch.int64))
        self.register_buffer("draws", torch.tensor(0, dtype=torch.int64))  # training forwards so far

    def next(self, pos: torch.Tensor) -> torch.Tensor:
        """(T,) positions for the next training forward of T tokens, on pos's device."""
        generator = draw_generator(int(self.seed), int(self.draws))
        self.draws += 1
        return random_positions(pos.numel(), self.max_position, generator).to(pos.device)


class RandomizedRotary(Rotary):
    """RoPE whose training positions are drawn (see the module doc); evaluation is plain RoPE."""

    def __init__(self, head_dim: int, max_position: int, base: float = 10000.0, seed: int | None = None):
        super().__init__(head_dim, "rope", base=base)
        self.name = "rope-randomized"
        self.draws = PositionDraws(max_position, seed)

    def positions(self, pos):
        return self.draws.next(pos) if self.training else pos

    def rotate(self, q, k, pos, seq_len=None):
        if not self.training:
            return super().rotate(q, k, pos, seq_len)
        # drawn positions are not contiguous, so the parent's memo (keyed on the first position) cannot serve
        inv_freq, attention_factor = self.frequencies(int(pos[-1]) + 1)
        cos, sin = rotary_cos_sin(pos, inv_freq, attention_factor)  # (T, Dh) each
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    def describe(self):
        return {"base": self.base, "max_position": self.draws.max_position, "train_positions": "random"}


class RandomizedSinusoidal(Sinusoidal):
    """The sinusoidal table at drawn positions in training; at 0 … n-1 in evaluation."""

    name = "sinusoidal-randomized"

    def __init__(self, d_model: int, max_position: int, seed: int | None = None):
        super().__init__(d_model)
        self.draws = PositionDraws(max_position, seed)

    def positions(self, pos):
        return self.draws.next(pos) if self.training else pos

    def describe(self):
        return {"max_position": self.draws.max_position, "train_positions": "random"}


def max_position_for(train_len: int, options: dict) -> int:
    value = options.get("max_position", RANGE_FACTOR * train_len)
    if value != int(value) or value < 1:
        raise UserError(f"--max-position must be a whole number ≥ 1, got {value}")
    return int(value)


def show_draw(query: ShowQuery) -> dict:
    """L_max and an example draw: the first training draw of a model seeded `example_seed`."""
    max_position = max_position_for(query.original_len, query.options)
    length = query.seq_len if query.seq_len is not None else min(16, max_position)
    if length > max_position:
        raise UserError(f"--seq-len ({length}) must be at most L_max ({max_position})")
    example = random_positions(length, max_position, draw_generator(0, 0))
    return {
        "train_len": query.original_len,
        "max_position": max_position,
        "seq_len": length,
        "example_seed": 0,
        "example_positions": example.tolist(),
        "eval_positions": "0 … n-1",
    }


def show_rope_randomized(query: ShowQuery) -> dict:
    return {
        **show_draw(query),
        "head_dim": query.head_dim,
        "base": query.base,
        "inv_freq": rope_inv_freq(query.head_dim, query.base).tolist(),
    }


def show_sinusoidal_randomized(query: ShowQuery) -> dict:
    return {**show_draw(query), **show_sinusoidal(query)}


PARAMETERS = {"max_position": f"{RANGE_FACTOR} × train length"}
ROPE_RANDOMIZED = EncodingSpec(
    "rope-randomized",
    "rotary",
    "RoPE at sorted random positions below L_max in training (Ruoss et al. 2023)",
    lambda shape: RandomizedRotary(shape.head_dim, max_position_for(shape.max_len, shape.options), base=shape.base),
    {"base": 10000.0, **PARAMETERS},
    colour="#74c476",
    show=show_rope_randomized,
    group="newer",
)
SINUSOIDAL_RANDOMIZED = EncodingSpec(
    "sinusoidal-randomized",
    "absolute",
    "sinusoidal at sorted random positions below L_max in training (Ruoss et al. 2023)",
    lambda shape: RandomizedSinusoidal(shape.d_model, max_position_for(shape.max_len, shape.options)),
    dict(PARAMETERS),
    colour="#aec7e8",
    show=show_sinusoidal_randomized,
    group="newer",
)
