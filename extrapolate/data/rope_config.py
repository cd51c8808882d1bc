"""A checkpoint's RoPE in the project's terms and back: the scaling a released config ships (`released_rope`),
a scaling written as transformers' `rope_parameters` (`hf_rope_parameters`), and a config given another
(`replace_rope`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from extrapolate.core.errors import UserError
from extrapolate.data.families import ROPE_KEYS, original_context, rope_parameters


@dataclass(frozen=True)
class ReleasedRope:
    """The RoPE a checkpoint is released with, in the project's terms: the encoding (`rope`, or the scaling it
    ships: pi, dynamic-ntk, yarn, llama3, longrope), its factor s and options (as `--encoding-option` gives
    them), the pretraining context L the factor counts from, and the context it is released for."""

    encoding: str
    factor: float | None  # None: plain RoPE, no factor
    options: tuple  # sorted (name, value) pairs
    original_len: int  # L: original_max_position_embeddings, else max_position_embeddings
    released_len: int  # max_position_embeddings

    def describe(self) -> str:
        if self.released_len is None:
            return f"{self.encoding}, no context stated"
        if self.factor is None:
            return f"{self.encoding}, context {self.released_len}"
        return f"{self.encoding} s={self.factor:g} from L={self.original_len}, released context {self.released_len}"


def released_rope(hf) -> ReleasedRope:
    """The checkpoint's own RoPE as the scaling here that computes it (the inverse of `hf_rope_parameters`):
    its transformers `rope_type` names the scaling, each option is read under its declared key, and a factor
    left out is transformers' max_position_embeddings / original_max_position_embeddings. A type or a key
    the project does not compute is refused by name."""
    from extrapolate.encodings.frequencies import SCALINGS
    from extrapolate.encodings.options import OPTIONS

    params = rope_parameters(hf)
    rope_type = params.get("rope_type", params.get("type", "default"))
    matches = [
        name
        for name, scaling in SCALINGS.items()
        if scaling.transformers is not None
        and scaling.transformers.rope_type == rope_type
        and scaling.transformers.theta is None
    ]
    if not matches:
        raise UserError(f"the checkpoint's RoPE type {rope_type!r} has no counterpart here")
    name = matches[0]
    scaling, reads = SCALINGS[name], SCALINGS[name].transformers.reads
    params = with_attention_factor(params)  # its partial_rotary_factor is the config's `rotary_dim`
    option_keys = {OPTIONS[option].hf_key: option for option in scaling.options}
    unknown = sorted(set(params) - set(ROPE_KEYS) - set(reads) - set(option_keys) - {"partial_rotary_factor"})
    if unknown:
        raise UserError(f"the checkpoint's RoPE ({rope_type}) sets {', '.join(unknown)}, which is not computed here")
    original, released = original_context(hf), int(hf.max_position_embeddings)
    factor = None
    if "factor" in reads:
        factor = float(params.get("factor") or released / original)
    options = tuple(sorted((option, params[key]) for key, option in option_keys.items() if params.get(key) is not None))
    return ReleasedRope(name, factor, options, original, released)


def with_attention_factor(params: dict) -> dict:
    """YaRN's `mscale` and `mscale_all_dim` (DeepSeek's form) as the attention factor they give, the way
    transformers reads them: both set and no attention factor given, mscale(s, a) / mscale(s, b) with
    mscale(s, m) = 0.1·m·ln s + 1 (1 for s ≤ 1); otherwise they change nothing and are dropped."""
    params = dict(params)
    mscale, mscale_all_dim = params.pop("mscale", None), params.pop("mscale_all_dim", None)
    if mscale and mscale_all_dim and params.get("attention_factor") is None and params.get("factor"):
        factor = float(params["factor"])

        def scaled(m: float) -> float:
            return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

        params["attention_factor"] = scaled(mscale) / scaled(mscale_all_dim)
    return params


def replace_rope(hf, params: dict) -> None:
    """Give the checkpoint's config `params` as its RoPE, the way transformers reads a replaced scaling: its one
    `rope_parameters`, or, where set per layer type (Gemma 3), its full layers' (the sliding layers keep their
    own, as the project's model keeps them). A partial rotation stays: it is the architecture's (Phi-4-mini's
    heads rotate their first features whatever the scaling), and transformers reads it from `rope_parameters`."""
    current = getattr(hf, "rope_parameters", None) or {}
    fraction = current.get("partial_rotary_factor")
    if fraction is not None and float(fraction) != 1.0:
        params = {**params, "partial_rotary_factor": fraction}
    if isinstance(current.get("full_attention"), dict):
        hf.rope_parameters = {**current, "full_attention": params}
    else:
        hf.rope_parameters = params
    # Phi-3 keeps a copy of L outside its RoPE parameters, which transformers reads first for the scalings that
    # take L (yarn, longrope, llama3): it must say the same L
    if "original_max_position_embeddings" in params and hasattr(hf, "original_max_position_embeddings"):
        hf.original_max_position_embeddings = int(params["original_max_position_embeddings"])


def hf_rope_parameters(
    encoding: str,
    base: float,
    factor: float,
    original_len: int,
    options: dict | None = None,
    head_dim: int | None = None,
) -> dict:
    """The `rope_parameters` a transformers Llama needs to compute what `encoding` computes here, as its scaling
    declares them (`TransformersRope`, frequencies.py) with each option under its declared key (`head_dim`: for
    static NTK's base and LongRoPE's default factor lists, which depend on it)."""
    from extrapolate.encodings.frequencies import SCALINGS
    from extrapolate.encodings.options import OPTIONS

    scaling = SCALINGS.get(encoding)
    rope = scaling.transformers if scaling is not None else None
    if rope is None or (rope.theta is not None and head_dim is None):
        raise UserError(f"{encoding} has no transformers equivalent (a Llama checkpoint cannot compute it)")
    if rope.resolved is not None and head_dim is None:
        raise ValueError(f"{encoding}'s rope_parameters need the head dimension")
    given = options or {}
    if given.get("logn"):
        raise UserError(f"{encoding} with logn has no transformers equivalent (its queries' scale is not a RoPE type)")
    lengths = {"factor": factor, "original_max_position_embeddings": original_len}
    theta = base if rope.theta is None else rope.theta(head_dim, base, factor)
    params = {"rope_type": rope.rope_type, "rope_theta": theta, **{key: lengths[key] for key in rope.reads}}
    computed = rope.resolved(head_dim, base, factor, original_len, given) if rope.resolved is not None else {}
    for name, default in scaling.options.items():
        value = computed.get(name, given.get(name, default if rope.all_options else None))
        if value is not None:
            params[OPTIONS[name].hf_key] = value
    return params
