"""Every encoding by name, in the order of tables and figures. Adding one is a module with its class and
`EncodingSpec`, plus one `register` line here (a RoPE scaling: one entry of `frequencies.SCALINGS`; a
training-free extension that changes attention, like Self-Extend, a `two_part_form` and a spec here)."""

from __future__ import annotations

import dataclasses

from extrapolate.core.errors import UserError
from extrapolate.core.identity import GPT2_INIT_STD, as_built
from extrapolate.core.registry import Registry
from extrapolate.encodings.absolute import LEARNED, NOPE, SINUSOIDAL
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.bias import ALIBI, T5
from extrapolate.encodings.contextual import COPE
from extrapolate.encodings.dape import DAPE_SPEC
from extrapolate.encodings.drope import DROPE
from extrapolate.encodings.dual_chunk import DUAL_CHUNK
from extrapolate.encodings.fire import FIRE
from extrapolate.encodings.fope import FOPE
from extrapolate.encodings.forget import FOX, FOX_ROPE
from extrapolate.encodings.frequencies import SCALINGS, check_scaling
from extrapolate.encodings.hybrid import ROPE_NOPE, SWA_ROPE_NOPE
from extrapolate.encodings.kerple import KERPLE_LOG, KERPLE_POWER
from extrapolate.encodings.partial import partially_rotated
from extrapolate.encodings.prope import PROPE
from extrapolate.encodings.randomized import ROPE_RANDOMIZED, SINUSOIDAL_RANDOMIZED
from extrapolate.encodings.rerope import REROPE
from extrapolate.encodings.rotary import rotary_specs
from extrapolate.encodings.self_extend import SELF_EXTEND
from extrapolate.encodings.sinks import LM_INFINITE, STREAMING_LLM
from extrapolate.encodings.spec import EncodingSpec, Shape
from extrapolate.encodings.ssmax import SSMAX
from extrapolate.encodings.stick_breaking import STICK_BREAKING
from extrapolate.encodings.string import STRING_SPEC
from extrapolate.encodings.xpos import XPOS

ENCODINGS: Registry[EncodingSpec] = Registry("encoding")


def register(spec: EncodingSpec) -> EncodingSpec:
    return ENCODINGS.add(spec.name, spec)


_LATER_SCALINGS = ("longrope", "logn", "llama4-temperature")  # RoPE scalings that belong with the newer methods
for _spec in (SINUSOIDAL, LEARNED, T5, ALIBI, *[s for s in rotary_specs() if s.name not in _LATER_SCALINGS], NOPE):
    register(_spec)
# the newer methods, after the classic ones so the figures and tables of earlier sweeps keep their order
for _spec in (
    SINUSOIDAL_RANDOMIZED,
    ROPE_RANDOMIZED,
    XPOS,
    PROPE,
    KERPLE_LOG,
    KERPLE_POWER,
    FIRE,
    ROPE_NOPE,
    SWA_ROPE_NOPE,
    *[s for s in rotary_specs() if s.name in _LATER_SCALINGS],
    SELF_EXTEND,
    REROPE,
    STREAMING_LLM,
    LM_INFINITE,
    STRING_SPEC,
    DUAL_CHUNK,
    SSMAX,
    FOX,
    FOX_ROPE,
    STICK_BREAKING,
    COPE,
    FOPE,
    DAPE_SPEC,
    DROPE,
):
    register(dataclasses.replace(_spec, group="newer"))


# names users give as encodings that are modes of a fine-tune (listed under `extrapolate encodings`)
FINETUNE_MODE_NAMES = {"pose": "--finetune-positions pose (PoSE's skipped ids, a fine-tune of a RoPE scaling)"}


def get_spec(name: str) -> EncodingSpec:
    mode = FINETUNE_MODE_NAMES.get(str(name).strip().lower())
    if mode is not None and name not in ENCODINGS:
        raise UserError(f"{name} is not an encoding but a fine-tune mode: {mode}")
    return ENCODINGS.get(name)


def sweep_order() -> list[str]:
    """Every encoding in the order of tables and figures: the order of registration."""
    return ENCODINGS.names()


def encoding_groups() -> dict[str, list[str]]:
    """Group name -> its encodings in sweep order (`sweep --encodings classic` or `newer`)."""
    groups: dict[str, list[str]] = {}
    for name, spec in ENCODINGS:
        groups.setdefault(spec.group, []).append(name)
    return groups


def validate_shape(
    spec: EncodingSpec,
    *,
    n_heads: int,
    head_dim: int,
    factor: float = 1.0,
    n_layers: int | None = None,
    options: dict | None = None,
) -> None:
    """User-facing checks, each failing with one line; the depth's only where the model's is known."""
    if n_heads < 1:
        raise UserError(f"heads must be at least 1, got {n_heads}")
    if not factor > 0:
        raise UserError(f"factor must be > 0, got {factor}")
    if spec.kind == "rotary" and (head_dim < 2 or head_dim % 2):
        raise UserError(f"{spec.name} needs an even head dimension, got {head_dim}")
    if spec.name in SCALINGS:  # its head size and factor, before any model is trained for it
        check_scaling(spec.name, head_dim, factor)
    if n_layers is not None and spec.check_depth is not None:
        spec.check_depth(n_layers, options or {})


def build_encoding(
    name: str,
    *,
    d_model: int,
    n_heads: int,
    head_dim: int,
    max_len: int,
    base: float = 10000.0,
    factor: float = 1.0,
    original_len: int | None = None,
    options: dict | None = None,
    learned_policy: str = "error",
    position_std: float = GPT2_INIT_STD,
    position_lr_scale: float = 1.0,
    n_layers: int | None = None,  # None: a model's depth not known (an encoding inspected on its own)
) -> PositionalEncoding:
    spec = get_spec(name)
    validate_shape(spec, n_heads=n_heads, head_dim=head_dim, factor=factor, n_layers=n_layers, options=options)
    return spec.build(
        Shape(
            d_model,
            n_heads,
            head_dim,
            max_len,
            base,
            factor,
            original_len,
            options or {},
            learned_policy,
            position_std,
            position_lr_scale,
            n_layers or 1,
        )
    )


def encoding_for(
    config, name: str | None = None, *, factor: float = 1.0, original_len: int | None = None, **options
) -> PositionalEncoding:
    """The encoding `name` (default: the config's own) shaped for a model config: its width, heads, head size,
    length, RoPE base and learned-table recipe (an unset recipe field is built as the identity rules say it
    means). Where the config rotates a part of each head (`rotary_dim`), the encoding is built for that part
    and rotates it alone (`partial.PartialRotary`). The one place a model's encoding is built from its config."""
    table = {k: as_built(k, getattr(config, k, None)) for k in ("position_std", "position_lr_scale")}
    encoding = build_encoding(
        name or config.encoding,
        d_model=config.d_model,
        n_heads=config.n_heads,
        head_dim=config.rotated_dim,
        max_len=config.max_len,
        n_layers=config.n_layers,
        base=config.rope_base,
        factor=factor,
        original_len=original_len,
        **table,
        **options,
    )
    return partially_rotated(encoding, config.rotary_dim)
