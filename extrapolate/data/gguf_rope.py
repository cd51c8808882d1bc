"""The RoPE a GGUF file ships, as transformers' `rope_parameters`: transformers' GGUF loader reads the base and
the context but drops the scaling (the `{arch}.rope.scaling.*` keys) and the per-pair factor tensors
(`rope_freqs`, which llama.cpp's converter writes for Llama 3.1's scaling; `rope_factors_long` / `_short` for
LongRoPE), so a released long-context GGUF would load as plain RoPE. Read here, they become the parameters the
checkpoint is evaluated with as released.
"""

from __future__ import annotations

import functools
from pathlib import Path

from extrapolate.core.errors import UserError


def gguf_reader(path: Path):
    """gguf's reader of the file at `path`, parsed once per version of the file: parsing the header of a file
    with a tokenizer in it takes seconds, and one load reads it to check it and again for its RoPE."""
    stat = Path(path).stat()
    return parsed_gguf(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=2)
def parsed_gguf(path: str, mtime_ns: int, size: int):  # the version keys the cache; the reader reads `path`
    from gguf import GGUFReader

    return GGUFReader(path)


def gguf_rope_parameters(path: Path, base: float, context: int) -> dict | None:
    """transformers' `rope_parameters` of the GGUF file at `path` (`base`, `context`: its rope_theta and
    max_position_embeddings as transformers read them); None for plain RoPE. A per-pair factor tensor is a
    LongRoPE with one list for every length (llama.cpp divides θ_j by factor_j at every position, with no
    attention factor); a scaling the project does not compute is refused by name."""
    reader = gguf_reader(path)
    arch = field(reader, "general.architecture")

    def key(name: str):
        return field(reader, f"{arch}.rope.scaling.{name}")

    original = int(key("original_context_length") or context)
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    long, short = tensors.get("rope_factors_long.weight"), tensors.get("rope_factors_short.weight")
    freqs = tensors.get("rope_freqs.weight")
    kind = key("type")
    if freqs is not None or long is not None:
        long = freqs if freqs is not None else long
        short = freqs if freqs is not None else (short if short is not None else long)
        params = {
            "rope_type": "longrope",
            "rope_theta": base,
            "short_factor": [float(x) for x in short.data.reshape(-1)],
            "long_factor": [float(x) for x in long.data.reshape(-1)],
            "original_max_position_embeddings": original,
        }
        if freqs is not None:  # one list at every length, θ_j / factor_j and nothing else
            params.update(factor=1.0, attention_factor=1.0)
        elif key("attn_factor") is not None:
            params["attention_factor"] = float(key("attn_factor"))
        return params
    if kind in (None, "none"):
        return None
    factor = float(key("factor") or 1.0)
    if kind == "linear":
        return {"rope_type": "linear", "rope_theta": base, "factor": factor}
    if kind == "yarn":
        if key("yarn_log_multiplier"):
            raise UserError(f"{path}: a YaRN log multiplier (DeepSeek's form) is not computed here")
        params = {"rope_type": "yarn", "rope_theta": base, "factor": factor}
        params["original_max_position_embeddings"] = original
        for name, gguf_key in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
            if key(gguf_key) is not None:
                params[name] = float(key(gguf_key))
        if key("attn_factor") is not None:
            params["attention_factor"] = float(key("attn_factor"))
        return params
    raise UserError(f"{path}: the GGUF's RoPE scaling {kind!r} has no counterpart here")


def field(reader, name: str):
    """A metadata value of a GGUF file: a number, a string, or None where the file has no such key."""
    entry = reader.get_field(name)
    return None if entry is None else entry.contents()
