"""Rotary encodings: q and k rotated per head by `pos · inv_freq`, angles computed in float32.

Layout: half pairs `(x_j, x_{j+d/2})` (`rotate_half`), the layout of Llama checkpoints. Every scaling is a
frequency function from `frequencies.py`; this module only applies what it returns.
"""

from __future__ import annotations

import math

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.frequencies import SCALINGS, check_scaling, rope_inv_freq
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rotary_cos_sin(
    pos: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, Dh) cos and sin, both multiplied by the attention factor (the one place it is applied)."""
    angle = pos.to(torch.float32)[:, None] * inv_freq.to(pos.device)[None, :]  # (T, Dh/2)
    angle = torch.cat((angle, angle), dim=-1)  # (T, Dh)
    return angle.cos() * attention_factor, angle.sin() * attention_factor


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, T, Dh); cos, sin: (T, Dh), computed in float32 and cast to x's dtype (as Llama code does)."""
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class Rotary(PositionalEncoding):
    kind = "rotary"

    def __init__(
        self,
        head_dim: int,
        scaling: str = "rope",
        base: float = 10000.0,
        factor: float = 1.0,
        original_len: int = 2048,
        **options,
    ):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary encodings need an even head dimension, got {head_dim}")
        spec = SCALINGS[scaling]
        # Qwen's logn attention: queries past L scaled by log_L(i + 1), on top of any scaling (`logn_scale`)
        # (the `logn` encoding is that alone, on RoPE's own angles)
        self.logn = bool(options.pop("logn", None)) or scaling == "logn"
        if self.logn and scaling == "llama4-temperature":
            raise UserError("llama4-temperature scales the queries itself: logn does not combine with it")
        unknown = set(options) - set(spec.options)
        if unknown:
            raise ValueError(f"{scaling} has no option(s) {sorted(unknown)}; it takes {sorted(spec.options)}")
        check_scaling(scaling, head_dim, factor, original_len, **options)
        self.name, self.head_dim, self.scaling = scaling, head_dim, scaling
        self.base, self.factor, self.original_len = float(base), float(factor), int(original_len)
        self.options = {**spec.options, **options}
        self.dynamic = spec.dynamic
        self._static: tuple[torch.Tensor, float] | None = None
        # the last angles: (positions, length, (cos, sin))
        self._memo: tuple[torch.Tensor, int, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.frequencies(self.original_len)  # options a scaling rejects (LongRoPE's factor lists) fail here, at build

    def frequencies(self, seq_len: int) -> tuple[torch.Tensor, float]:
        """(inv_freq (Dh/2,), attention_factor) for a sequence of `seq_len` tokens. Pure: no state is kept
        from one length to the next (only the length-independent result of a static scaling is cached)."""
        fn = SCALINGS[self.scaling].fn
        args = (self.head_dim, self.base, self.factor, self.original_len, seq_len)
        if self.dynamic:
            return fn(*args, **self.options)
        if self._static is None:
            self._static = fn(*args, **self.options)
        return self._static

    def rotate(self, q, k, pos, seq_len=None):
        if seq_len is None:
            seq_len = int(pos[-1]) + 1  # positions increase; the dynamic kinds key on the furthest one
        cos, sin = self.angles(pos, seq_len)
        q = apply_rotary(q, cos, sin)
        scale = self.query_scale(pos)
        if scale is not None:
            q = q * scale.to(q.dtype)[:, None]  # (T, 1): each query position's
        return q, apply_rotary(k, cos, sin)

    def angles(self, pos: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) at `pos` (T,), computed once for the layers of one forward: the last ones are kept with
        the positions and length they were for, and reused where those come again (the same tensor, which
        every layer of a forward is given, or equal ids: PoSE's skipped ones as much as contiguous ones)."""
        if self._memo is not None:
            kept, kept_len, angles = self._memo
            same = kept is pos or (kept.shape == pos.shape and kept.device == pos.device and torch.equal(kept, pos))
            if same and kept_len == seq_len:
                return angles
        inv_freq, attention_factor = self.frequencies(seq_len)
        angles = rotary_cos_sin(pos, inv_freq, attention_factor)
        self._memo = (pos, seq_len, angles)
        return angles

    def query_scale(self, pos: torch.Tensor) -> torch.Tensor | None:
        """(T,) float32 factor of each query position's whole query (rotated and unrotated features alike), or
        None where queries are not scaled: log-n's past L, Llama 4's temperature."""
        if self.logn:
            return logn_scale(pos, self.original_len)
        if self.scaling == "llama4-temperature":
            return temperature_scale(pos, self.options["floor_scale"], self.options["attn_scale"])
        return None

    def describe(self):
        return {
            "base": self.base,
            "factor": self.factor,
            "original_len": self.original_len,
            **{k: v for k, v in self.options.items() if v is not None},
            **({"logn": True} if self.logn else {}),
        }


def logn_scale(pos: torch.Tensor, original_len: int) -> torch.Tensor:
    """(T,) float32: Qwen's `logn_attn` factor of each query position p, log_L(p + 1) past L and 1 within it
    (its `logn_list`), so attention entropy does not grow with the number of keys (SSMax's form, untrained)."""
    ahead = (pos.double() + 1).clamp(min=original_len)  # (T,)
    return (ahead.log() / math.log(original_len)).float()


def temperature_scale(pos: torch.Tensor, floor_scale: int, attn_scale: float) -> torch.Tensor:
    """(T,) float32: Llama 4's attention temperature of each query position p, attn_scale·log(⌊(p + 1)/floor_scale⌋
    + 1) + 1, as transformers' Llama4TextAttention computes it from the cache position (1 below floor_scale - 1:
    the temperature rises by steps, a query's keys growing by floor_scale between two)."""
    steps = torch.floor((pos.float() + 1.0) / floor_scale)  # (T,)
    return torch.log1p(steps) * attn_scale + 1.0


ROTARY_PARAMETERS = {"base": 10000.0, "factor": 1.0, "original_len": "train length"}


def rotary_specs() -> list[EncodingSpec]:
    """One spec per entry of `SCALINGS`: `rope` trains its own model, every other scaling is evaluated on it."""
    return [
        EncodingSpec(
            name,
            "rotary",
            scaling.description,
            build_rotary(name),
            {
                **ROTARY_PARAMETERS,
                **scaling.options,
                **({} if name in ("rope", "logn", "llama4-temperature") else {"logn": None}),
            },
            scaling.colour,
            show_rotary(name),
            trains_own_model=name == "rope",
        )
        for name, scaling in SCALINGS.items()
    ]


def build_rotary(name: str):
    return lambda shape: Rotary(
        shape.head_dim,
        name,
        base=shape.base,
        factor=shape.factor,
        original_len=shape.original_len or shape.max_len,
        **shape.options,
    )


def show_rotary(name: str):
    def show(query: ShowQuery) -> dict:
        check_scaling(name, query.head_dim, query.factor, query.original_len, **query.options)
        seq_len = query.seq_len if query.seq_len is not None else round(query.original_len * query.factor)
        if seq_len < 1:
            raise UserError(f"sequence length must be at least 1, got {seq_len}")
        try:
            inv_freq, attention_factor = SCALINGS[name].fn(
                query.head_dim, query.base, query.factor, query.original_len, seq_len, **query.options
            )
        except TypeError as exc:
            raise UserError(f"{name}: {exc}") from None
        theta = rope_inv_freq(query.head_dim, query.base)
        return {
            "head_dim": query.head_dim,
            "base": query.base,
            "factor": query.factor,
            "original_len": query.original_len,
            "seq_len": seq_len,
            "inv_freq": inv_freq.tolist(),
            "ratio": (inv_freq / theta).tolist(),
            "attention_factor": attention_factor,
            **(temperature_steps(query.options) if name == "llama4-temperature" else {}),
        }

    return show


def temperature_steps(options: dict) -> dict:
    """Llama 4's query scale at the positions where it steps: 0, floor_scale - 2 and - 1, then 2, 4 and 16 steps on."""
    values = {**SCALINGS["llama4-temperature"].options, **options}
    floor_scale, attn_scale = int(values["floor_scale"]), float(values["attn_scale"])
    positions = sorted({0, max(0, floor_scale - 2), *(n * floor_scale - 1 for n in (1, 2, 4, 16))})
    scale = temperature_scale(torch.tensor(positions), floor_scale, attn_scale)
    return {"positions": positions, "query_scale": scale.tolist()}
