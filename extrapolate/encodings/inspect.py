"""What an encoding computes, as plain data: the payload of `extrapolate encodings show`."""

from __future__ import annotations

import torch

from ..errors import UserError
from .absolute import sinusoidal_table
from .bias import alibi_slopes, t5_bucket
from .catalog import get_spec, validate_shape
from .frequencies import SCALINGS, rope_inv_freq


def describe_encoding(
    name: str,
    *,
    head_dim: int = 64,
    base: float = 10000.0,
    factor: float = 1.0,
    original_len: int = 2048,
    seq_len: int | None = None,
    heads: int = 8,
    distances: list[int] | None = None,
    position: int = 1,
    width: int = 8,
    options: dict | None = None,
) -> dict:
    spec = get_spec(name)
    validate_shape(spec, n_heads=heads, head_dim=head_dim, factor=factor)
    if original_len < 1:
        raise UserError(f"original length must be at least 1, got {original_len}")
    out: dict = {"encoding": spec.name, "kind": spec.kind}
    if spec.kind == "rotary":
        seq_len = seq_len if seq_len is not None else round(original_len * factor)
        if seq_len < 1:
            raise UserError(f"sequence length must be at least 1, got {seq_len}")
        fn = SCALINGS[spec.name].fn
        try:
            inv_freq, attention_factor = fn(head_dim, base, factor, original_len, seq_len, **(options or {}))
        except TypeError as exc:
            raise UserError(f"{spec.name}: {exc}") from None
        theta = rope_inv_freq(head_dim, base)
        out.update(
            head_dim=head_dim, base=base, factor=factor, original_len=original_len, seq_len=seq_len,
            inv_freq=inv_freq.tolist(), ratio=(inv_freq / theta).tolist(), attention_factor=attention_factor,
        )
    elif spec.name == "alibi":
        out.update(heads=heads, slopes=alibi_slopes(heads))
    elif spec.name == "t5":
        distances = distances if distances is not None else [0, 1, 5, 20, 200, 1000]
        if any(d < 0 for d in distances):
            raise UserError("t5 distances are how far back the key is: use numbers ≥ 0")
        buckets = t5_bucket(-torch.tensor(distances, dtype=torch.int64)).tolist()
        out.update(distances=distances, buckets=buckets, num_buckets=32, max_distance=128)
    elif spec.name == "sinusoidal":
        if position < 0 or width < 2 or width % 2:
            raise UserError("sinusoidal needs a position ≥ 0 and an even width ≥ 2")
        vector = sinusoidal_table(torch.tensor([position]), width)[0]
        out.update(position=position, width=width, vector=vector.tolist())
    elif spec.name == "learned":
        out.update(note="a trained table: no closed form; positions past its rows are unsupported",
                   parameters=spec.parameters)
    else:
        out.update(note="no positional signal")
    return out
