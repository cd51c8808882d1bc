"""`--encoding-option NAME=VALUE` of `run` and `sweep`: the own options of the training-free encodings (a RoPE
scaling's β, LongRoPE's factor lists, Self-Extend's window and group, ReRoPE's window and leak), applied when
the model is evaluated. They are part of a cell's identity (its run id) and recorded in run.json.

The options of encodings that train their own model (p-RoPE's fraction, xPos's γ, …) would change the trained
model, whose identity is its config; `encodings show` takes them, `run` and `sweep` not yet.
"""

from __future__ import annotations

from extrapolate.core.errors import UserError

# option -> how its value is read (the same names as `encodings show --beta-fast …`, with _ for -)
KINDS = {"beta_fast": float, "beta_slow": float, "truncate": bool, "attention_factor": float,
         "low_freq_factor": float, "high_freq_factor": float, "short_factor": list, "long_factor": list,
         "window": int, "group": int, "leak": float}
FLAG = "--encoding-option"

Options = tuple[tuple[str, object], ...]  # sorted (name, value) pairs: hashable, canonical


def parse_encoding_options(items: list[str] | None) -> Options:
    """NAME=VALUE items (NAME with - or _) into sorted (name, typed value) pairs; each value checked like the
    matching `encodings show` option."""
    from extrapolate.core.numbers import check_number

    options = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not text.strip():
            raise UserError(f"{FLAG}: expected NAME=VALUE, got {item!r}")
        if name not in KINDS:
            raise UserError(f"{FLAG}: unknown option {name!r}; options of training-free encodings: {', '.join(KINDS)}")
        if name in options:
            raise UserError(f"{FLAG}: {name} given twice")
        options[name] = value = read_value(name, text.strip())
        if not isinstance(value, list):  # the bounds of the matching `encodings show` flag
            flag = f"--{name.replace('_', '-')}"
            try:
                check_number(flag, value)
            except UserError as exc:
                raise UserError(str(exc).replace(flag, f"{FLAG} {name}", 1)) from None
    return tuple(sorted(options.items()))


def read_value(name: str, text: str):
    from extrapolate.core.numbers import parse_float_list

    kind = KINDS[name]
    if kind is list:
        return parse_float_list(text, f"{FLAG} {name}")
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise UserError(f"{FLAG} {name}: true or false, got {text!r}")
        return text.lower() == "true"
    try:
        return kind(text)
    except ValueError:
        raise UserError(f"{FLAG} {name}: {'an integer' if kind is int else 'a number'} is needed, got {text!r}") from None


def options_for(spec, options: Options) -> dict:
    """The options that concern this encoding (a sweep's options apply to the encodings that have them)."""
    return {name: value for name, value in options if name in spec.parameters}


def check_used(specs, options: Options) -> None:
    """Every option must concern at least one of the encodings asked for, and only training-free ones."""
    for name, _ in options:
        users = [spec for spec in specs if name in spec.parameters]
        if not users:
            named = ", ".join(spec.name for spec in specs)
            raise UserError(f"{FLAG} {name}: no encoding asked for ({named}) has this option")
        trained = [spec.name for spec in users if spec.trains_own_model]
        if trained:
            raise UserError(f"{FLAG} {name}: {trained[0]} trains its own model, whose options are fixed by its config")
