"""What an encoding computes, as plain data: the payload of `extrapolate encodings show`."""

from __future__ import annotations

from dataclasses import replace

from extrapolate.core.errors import UserError
from extrapolate.encodings.catalog import get_spec, validate_shape
from extrapolate.encodings.frequencies import INT64_MAX
from extrapolate.encodings.spec import ShowQuery

MAX_SHOWN = 1 << 16  # heads, head dimension, width: what a terminal can still show
SHARED_INPUTS = ("head_dim", "base", "factor", "original_len", "seq_len", "heads", "position", "width", "layers")


def describe_encoding(name: str, **query) -> dict:
    """`query`: the fields of `ShowQuery`; each encoding's spec says what it shows for them."""
    spec = get_spec(name)
    query = _show_query(query)
    options = query.options or {}
    unknown = sorted(set(options) - set(spec.parameters))
    if unknown:
        raise UserError(f"--{unknown[0].replace('_', '-')} does not apply to {spec.name}")
    # positions, distances and lengths become int64 tensors: a larger number would overflow there, not here
    numbers = {
        **{k: v for k, v in vars(query).items() if k != "options"},
        **options,
        "distances": max(query.distances or [0]),
    }
    for key, value in numbers.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > INT64_MAX:
            raise UserError(f"--{key.replace('_', '-')} {value} is past the largest int64 ({INT64_MAX})")
    for key, unit in (
        ("heads", "head"),
        ("head_dim", "pair"),
        ("width", "dimension"),
        ("layers", "layer"),
    ):  # vectors printed in full
        if getattr(query, key) > MAX_SHOWN:
            raise UserError(
                f"--{key.replace('_', '-')} is at most {MAX_SHOWN} here (one printed value per {unit}), "
                f"got {getattr(query, key)}"
            )
    validate_shape(spec, n_heads=query.heads, head_dim=query.head_dim, factor=query.factor)
    if query.original_len < 1:
        raise UserError(f"original length must be at least 1, got {query.original_len}")
    if query.layers < 1:
        raise UserError(f"layers must be at least 1, got {query.layers}")
    return {"encoding": spec.name, "kind": spec.kind, **_shown(spec, query)}


def unused_inputs(name: str, **query) -> list[str]:
    """The shared inputs given a non-default value that change nothing `name` shows (e.g. --factor for
    alibi): each is tried at its default, and an identical result means the encoding never read it."""
    spec = get_spec(name)
    query = _show_query(query)
    defaults, shown, unused = ShowQuery(), _shown(spec, query), []
    for key in SHARED_INPUTS:
        if getattr(query, key) == getattr(defaults, key):
            continue
        try:
            same = _shown(spec, replace(query, **{key: getattr(defaults, key)})) == shown
        except UserError:  # the default is invalid with the other inputs: the value given matters
            same = False
        if same:
            unused.append(key)
    return unused


def _show_query(query: dict) -> ShowQuery:
    return ShowQuery(**{k: v for k, v in query.items() if v is not None or k == "seq_len"})


def _shown(spec, query: ShowQuery) -> dict:
    return spec.show(query) if spec.show is not None else {"note": spec.description}
