"""Every option of an encoding, declared once (`OptionSpec`): its name, how its value is read, its default, the
range in which it means something, its help and its key in transformers' `rope_parameters`. What reads them:
`--encoding-option NAME=VALUE` of `run` and `sweep` (parsed and checked here, its help in cli/options.py), the
flags of `encodings show` (their help, and their bounds in the command line's checks), the defaults each
encoding lists (`option_defaults`) and the `rope_parameters` of a RoPE scaling (data/rope_config.py, from
each scaling's `TransformersRope` in frequencies.py).

The options of the training-free encodings (a RoPE scaling's β, LongRoPE's factor lists, Self-Extend's window
and group, ReRoPE's window and leak, the sinks of StreamingLLM and LM-Infinite) are applied when the model is
evaluated: `--encoding-option` takes them, and they are part of a cell's identity (its run id) and recorded in
run.json. The options of encodings that train their own model (p-RoPE's fraction, xPos's γ, …) would change
the trained model, whose identity is its config; `encodings show` takes them, `run` and `sweep` not yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from extrapolate.core.errors import UserError
from extrapolate.core.numbers import POSITIVE, Bound, at_least, check_number, parse_float_list

FLAG = "--encoding-option"

# YaRN's ramp runs from the pair that turns β_fast times in L (kept as it is) to the pair that turns β_slow
# times (interpolated): the paper's values, and transformers' defaults
YARN_BETA_FAST = 32.0
YARN_BETA_SLOW = 1.0
YARN_TRUNCATE = True  # the ramp's ends floored and ceiled to whole pairs, as the reference code does
# Llama 3.1's bands: wavelengths longer than L/1 are interpolated, shorter than L/4 kept (Meta's release)
LLAMA3_LOW_FREQ_FACTOR = 1.0
LLAMA3_HIGH_FREQ_FACTOR = 4.0
P_ROPE_FRACTION = 0.75  # one of the fractions the paper trains (p = 0.25 and 0.75 on Gemma 2B)
XPOS_SCALE_BASE = 512.0  # γ in the paper and in torchscale
# FIRE's c and L_thr are learned; these are their initial values in the paper's published code
FIRE_INITIAL_C = 0.1
FIRE_INITIAL_THRESHOLD = 512.0
# Llama 4's attention temperature: transformers' Llama4TextConfig defaults (Meta's release)
LLAMA4_FLOOR_SCALE = 8192
LLAMA4_ATTN_SCALE = 0.1
# FoPE's coefficients: xavier normal with this gain plus an identity, the smallest shipped config's (60M)
FOPE_GAIN = 0.3
DAPE_WIDTH = 32  # DAPE's MLP hidden width, `mlp_width` in every config of the authors


@dataclass(frozen=True)
class OptionSpec:
    """One option of one or more encodings. `name` is how `--encoding-option` spells it (`encodings show`
    takes it as --name, with - for _); `type` is how its value is read: float, int, bool, or list (comma-
    separated numbers), or str (one of `choices`)."""

    name: str
    type: type
    help: str  # what it sets: the help of its `encodings show` flag, where it has one
    # what an encoding uses when the option is not given; None: nothing, or a value each encoding computes
    # (the help and the encoding's listed parameters say how)
    default: object = None
    bound: Bound | None = None  # the range in which it means something (a float is checked to be finite anyway)
    hf_key: str | None = None  # its key in transformers' rope_parameters; None: transformers has no such option
    training_free: bool = True  # False: it shapes a model trained with it, so only `encodings show` takes it
    shown: bool = True  # `encodings show` takes it as a flag
    choices: tuple[str, ...] = ()  # the words a text option takes

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


# In the order of `encodings show --help` and of the `--encoding-option` names listed in its help and errors.
def by_name(declared: tuple[OptionSpec, ...]) -> dict[str, OptionSpec]:
    """The declarations by name; a name declared twice (two encodings' options sharing one) is refused, since
    the later would silently take the earlier's place on the command line."""
    named = {}
    for option in declared:
        if option.name in named:
            raise ValueError(f"the encoding option {option.name!r} is declared twice")
        named[option.name] = option
    return named


OPTIONS: dict[str, OptionSpec] = by_name(
    (
        # RoPE scalings (frequencies.py): YaRN, Llama 3.1, LongRoPE; transformers takes each under its own name
        OptionSpec("beta_fast", float, "YaRN β_fast", default=YARN_BETA_FAST, bound=POSITIVE, hf_key="beta_fast"),
        OptionSpec("beta_slow", float, "YaRN β_slow", default=YARN_BETA_SLOW, bound=POSITIVE, hf_key="beta_slow"),
        OptionSpec("truncate", bool, "YaRN: floor/ceil the range", default=YARN_TRUNCATE, hf_key="truncate"),
        OptionSpec(
            "attention_factor",
            float,
            "YaRN, LongRoPE, dual-chunk, STRING: the factor on cos and sin (default 0.1·ln(s)+1, √(1+ln s/ln L), "
            "0.05·ln(n/L)+1 past L, 0.1·ln 2+1; 1: none)",
            bound=POSITIVE,
            hf_key="attention_factor",
        ),
        OptionSpec(
            "low_freq_factor",
            float,
            "Llama 3.1: wavelengths longer than L/low_freq_factor are interpolated",
            default=LLAMA3_LOW_FREQ_FACTOR,
            hf_key="low_freq_factor",
            shown=False,
        ),
        OptionSpec(
            "high_freq_factor",
            float,
            "Llama 3.1: wavelengths shorter than L/high_freq_factor are kept",
            default=LLAMA3_HIGH_FREQ_FACTOR,
            hf_key="high_freq_factor",
            shown=False,
        ),
        OptionSpec(
            "short_factor",
            list,
            "LongRoPE per-pair factors for n ≤ L, comma-separated (default all 1)",
            hf_key="short_factor",
        ),
        OptionSpec(
            "long_factor",
            list,
            "LongRoPE per-pair factors for n > L, comma-separated (default YaRN's ramp)",
            hf_key="long_factor",
        ),
        OptionSpec(
            "logn",
            bool,
            "every RoPE scaling: queries past L scaled by log_L(i + 1) (Qwen's logn_attn; SSMax untrained)",
        ),
        OptionSpec(
            "floor_scale",
            int,
            "Llama 4's attention temperature: positions counted in steps of floor_scale (Meta's 8192)",
            default=LLAMA4_FLOOR_SCALE,
            bound=at_least(1),
        ),
        OptionSpec(
            "attn_scale",
            float,
            "Llama 4's attention temperature: queries × attn_scale·log(⌊(i + 1)/floor_scale⌋ + 1) + 1 (Meta's 0.1)",
            default=LLAMA4_ATTN_SCALE,
            # a scale past this multiplies queries by thousands at any length a model runs (its logits overflow)
            bound=Bound(lambda v: 0 <= v <= 100, "in [0, 100]"),
        ),
        # Self-Extend and ReRoPE (two-part attention), which transformers does not compute
        OptionSpec(
            "window",
            int,
            "Self-Extend neighbour window / ReRoPE window w / StreamingLLM's and LM-Infinite's recent keys / "
            "dual-chunk's local window w / swa-rope-nope's sliding window (default L/4, L/8, L - sink_tokens, L, "
            "L/8, L/2)",
            bound=at_least(1),
        ),
        OptionSpec(
            "sink_tokens",
            int,
            "StreamingLLM's attention sinks / LM-Infinite's global tokens: the first tokens every query sees "
            "(default 4, 10)",
            bound=at_least(1),
        ),
        OptionSpec(
            "shift",
            int,
            "STRING: the distance S from which keys are seen at d - S + W (default 0.33·L)",
            bound=at_least(1),
        ),
        OptionSpec(
            "local",
            int,
            "STRING: the position W the shifted part starts at, at most S (default min(128, L/64))",
            bound=at_least(1),
        ),
        OptionSpec(
            "distance_cap",
            int,
            "LM-Infinite: the relative distance its global tokens are seen at, at most the window (default the window)",
            bound=at_least(1),
        ),
        OptionSpec(
            "chunk_size",
            int,
            "dual-chunk: the chunk size c, the furthest position a query is rotated at; chunks hold c - window "
            "tokens (default 3L/4)",
            bound=at_least(2),
        ),
        OptionSpec(
            "group",
            int,
            "Self-Extend group size G (default: the smallest that fits s·L)",
            bound=at_least(1),
        ),
        OptionSpec(
            "shift_rule",
            str,
            "Self-Extend: the grouped queries' shift, floor (w - ⌊w/G⌋: the paper's, and the authors' code since "
            "their fix 715c1e3; default) or exact (w - w/G, the prefill of their older Llama patch)",
            default="floor",
            choices=("floor", "exact"),
        ),
        OptionSpec(
            "leak",
            float,
            "leaky ReRoPE: slope 1/k past the window (default: none, pure ReRoPE)",
            bound=Bound(lambda v: v >= 1, "≥ 1 (1 is plain RoPE)"),
        ),
        # encodings that train their own model
        OptionSpec(
            "fraction",
            float,
            "p-rope: fraction p of the pairs that rotate, in (0, 1]",
            default=P_ROPE_FRACTION,
            bound=Bound(lambda v: 0 < v <= 1, "in (0, 1]"),
            training_free=False,
        ),
        OptionSpec(
            "nope_every",
            int,
            "rope-nope, swa-rope-nope: every k-th layer attends without positions (default 4, Llama 4's and SmolLM3's)",
            default=4,
            bound=at_least(1),
            training_free=False,
        ),
        OptionSpec(
            "scale_base",
            float,
            "xpos: γ of the decay ζ^((n-m)/γ)",
            default=XPOS_SCALE_BASE,
            bound=POSITIVE,
            training_free=False,
        ),
        OptionSpec(
            "max_position",
            int,
            "randomized kinds: L_max (default 8 × --original-len)",
            bound=at_least(1),
            training_free=False,
        ),
        OptionSpec(
            "cope_positions",
            int,
            "cope: rows P of the position table, positions clamped to P - 1 (default L + 1, the reference's)",
            bound=at_least(2),
            training_free=False,
        ),
        OptionSpec(
            "fourier_gain",
            float,
            "fope: gain of the coefficients' xavier normal draw around the identity",
            default=FOPE_GAIN,
            bound=POSITIVE,
            training_free=False,
        ),
        OptionSpec(
            "dape_width",
            int,
            "dape: hidden width of the MLP over scores and bias",
            default=DAPE_WIDTH,
            bound=at_least(1),
            training_free=False,
        ),
        OptionSpec("r1", float, "kerple: coefficient r1 > 0", bound=POSITIVE, training_free=False),
        OptionSpec("r2", float, "kerple: r2 > 0 (power: ≤ 2)", bound=POSITIVE, training_free=False),
        OptionSpec(
            "fire_c",
            float,
            "fire: c of ψ(x) = log(c·x + 1)",
            default=FIRE_INITIAL_C,
            bound=POSITIVE,
            training_free=False,
        ),
        OptionSpec(
            "threshold",
            float,
            "fire: L_thr of ψ(max(L_thr, i))",
            default=FIRE_INITIAL_THRESHOLD,
            bound=POSITIVE,
            training_free=False,
        ),
    )
)
TRAINING_FREE = {name: option for name, option in OPTIONS.items() if option.training_free}  # `--encoding-option`
SHOWN = tuple(option for option in OPTIONS.values() if option.shown)  # the flags of `encodings show`


def option_defaults(*names: str) -> dict:
    """{name: declared default} of the options an encoding takes, in the order given (its listed parameters)."""
    return {name: OPTIONS[name].default for name in names}


def flag_bounds() -> dict[str, Bound]:
    """The range of each `encodings show` flag of an option, by flag, for the command line's checks."""
    return {option.flag: option.bound for option in SHOWN if option.bound is not None}


Options = tuple[tuple[str, object], ...]  # sorted (name, value) pairs: hashable, canonical


def parse_encoding_options(items: list[str] | None) -> Options:
    """NAME=VALUE items (NAME with - or _) into sorted (name, typed value) pairs; each value read as its
    declaration says and checked against its declared range."""
    options = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not text.strip():
            raise UserError(f"{FLAG}: expected NAME=VALUE, got {item!r}")
        if name not in TRAINING_FREE:
            raise UserError(
                f"{FLAG}: unknown option {name!r}; options of training-free encodings: {', '.join(TRAINING_FREE)}"
            )
        if name in options:
            raise UserError(f"{FLAG}: {name} given twice")
        option = TRAINING_FREE[name]
        options[name] = value = read_value(option, text.strip())
        check_number(f"{FLAG} {name}", value, option.bound)
    return tuple(sorted(options.items()))


def read_value(option: OptionSpec, text: str):
    """`text` as the option's declared type, or one line naming the option."""
    what = f"{FLAG} {option.name}"
    if option.type is list:
        return parse_float_list(text, what)
    if option.choices:
        if text not in option.choices:
            raise UserError(f"{what}: one of {', '.join(option.choices)}, got {text!r}")
        return text
    if option.type is bool:
        if text.lower() not in ("true", "false"):
            raise UserError(f"{what}: true or false, got {text!r}")
        return text.lower() == "true"
    try:
        return option.type(text)
    except ValueError:
        needed = "an integer" if option.type is int else "a number"
        raise UserError(f"{what}: {needed} is needed, got {text!r}") from None


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
