"""What Self-Extend and ReRoPE share: training-free extensions of a RoPE model whose relative position is a
function of the distance that no rotation of q and k alone can express. Near keys keep plain RoPE; far keys
get positions of the encoding's choosing; the attention kernels (kernels/two_part.py) rotate each part.

`encodings show` for them prints the relative position each distance gets at the last query."""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding, TwoPartRotary
from extrapolate.encodings.frequencies import rope_inv_freq
from extrapolate.encodings.rotary import apply_rotary, rotary_cos_sin
from extrapolate.encodings.spec import Shape, ShowQuery


def whole_number(value, what: str, minimum: int = 1) -> int:
    """A user's window or group size as an int, or one line saying why not."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value in (float("inf"), float("-inf"))
    ):
        raise UserError(f"{what} must be a whole number ≥ {minimum}, got {value!r}")
    if value != int(value) or value < minimum:
        raise UserError(f"{what} must be a whole number ≥ {minimum}, got {value:g}")
    return int(value)


def options_of(shape: Shape, name: str, allowed: tuple[str, ...]) -> dict:
    """The options a two-part encoding is built with; one it does not take is a programming error (the command
    line passes an encoding only the options it declares)."""
    options = dict(shape.options)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{name} has no option(s) {unknown}")
    return options


class TwoPartEncoding(PositionalEncoding):
    kind = "rotary"
    # the factor on cos and sin of every rotation, near and far, q and k alike, so the logits are scaled by its
    # square (STRING's reference sets one; Self-Extend and ReRoPE keep 1)
    attention_factor = 1.0

    def __init__(self, head_dim: int, base: float, window: int):
        super().__init__()
        if head_dim % 2:
            raise UserError(f"{self.name} needs an even head dimension, got {head_dim}")
        self.head_dim, self.base = head_dim, float(base)
        self.window = whole_number(window, f"{self.name} window")
        self.inv_freq = rope_inv_freq(head_dim, base)  # (Dh/2,): plain RoPE frequencies, never scaled
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # (far, device, dtype) -> (cos, sin)

    def rotate(self, q, k, pos, seq_len=None):
        return q, k  # the rotation depends on the (query, key) pair: the attention kernels apply it per part

    def rotate_at(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, Dh) rotated at float positions (T,), exactly as `Rotary` rotates at integers."""
        cos, sin = rotary_cos_sin(positions, self.inv_freq, self.attention_factor)
        return apply_rotary(x, cos, sin)

    def rotate_from(self, x: torch.Tensor, start: int, far: bool = False) -> torch.Tensor:
        """x: (B, H, T, Dh) of positions start … start + T - 1, rotated at those positions (far: at
        `far_key`'s), exactly as `rotate_at` rotates them. The (n, Dh) cos and sin of positions 0 … n - 1 are
        kept, n doubling as a cache grows, so a decoding step does not recompute every cached key's angles."""
        stop = start + x.shape[2]
        key = (far, x.device, x.dtype)
        table = self._tables.get(key)
        if table is None or table[0].shape[0] < stop:
            size = max(stop, 2 * table[0].shape[0]) if table is not None else stop
            positions = torch.arange(size, device=x.device)
            far_or_near = self.far_key(positions) if far else positions.float()
            cos, sin = rotary_cos_sin(far_or_near, self.inv_freq, self.attention_factor)
            table = self._tables[key] = (cos.to(x.dtype), sin.to(x.dtype))  # the cast apply_rotary would make
        return apply_rotary(x, table[0][start:stop], table[1][start:stop])

    def far_query(self, pos: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def far_key(self, pos: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def two_part_form(self) -> TwoPartRotary:
        return TwoPartRotary(self.window, self.rotate_at, self.far_query, self.far_key, self.rotate_from)

    def relative_position(self, query: int, distance: int) -> float:
        """The relative position the query at `query` sees a key `distance` tokens back at."""
        if distance < self.window:
            return float(distance)
        q, k = torch.tensor([query]), torch.tensor([query - distance])
        return float(self.far_query(q)[0] - self.far_key(k)[0])


def show_two_part(build):
    """`encodings show` for a two-part encoding built by `build(shape)` (its spec's build) from the query's
    head size, base, factor, L and options: its parameters and the relative position of each of
    `--distances` at the last query of `--seq-len` (default L·s)."""

    def show(query: ShowQuery) -> dict:
        encoding = build(
            Shape(
                0,
                query.heads,
                query.head_dim,
                query.original_len,
                query.base,
                query.factor,
                query.original_len,
                query.options or {},
            )
        )
        seq_len = query.seq_len if query.seq_len is not None else round(query.original_len * query.factor)
        last = seq_len - 1
        distances = [d for d in (query.distances or []) if 0 <= d <= last]
        return {
            "head_dim": query.head_dim,
            "base": query.base,
            "factor": query.factor,
            "original_len": query.original_len,
            "seq_len": seq_len,
            **encoding.describe(),
            "distances": distances,
            "relative_position": [encoding.relative_position(last, d) for d in distances],
        }

    return show
