"""A RULER task file: one of RULER's five generators, its template, answer length, metric and arguments.

The fields follow RULER's own configuration (`synthetic.yaml` and each generator's arguments, under their
names there), so a RULER task reads the same here; every field is validated on load and `version` changes
whenever prompts would change."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from extrapolate.core.config import config_hash
from extrapolate.core.errors import UserError
from extrapolate.data.fetch import sha256_file
from extrapolate.tasks.files import is_count, template_names

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
METRICS = ("string_match_all", "string_match_part")
DEFAULT_THRESHOLD = 0.856  # RULER's bar: Llama-2-7B's average at 4k (85.6 on its 0–100 scale)
# each generator's arguments and their defaults (RULER's): a task file may set these and no others
ARGUMENTS: dict[str, dict[str, object]] = {
    "niah": {
        "type_haystack": "essay",  # essay (held-out books), noise (one repeated sentence), needle (distractor needles)
        "type_needle_k": "words",
        "type_needle_v": "numbers",
        "num_needle_k": 1,
        "num_needle_v": 1,
        "num_needle_q": 1,
        "needle": NEEDLE,
    },
    "variable_tracking": {"type_haystack": "noise", "num_chains": 1, "num_hops": 4, "example_tokens": 500},
    "common_words_extraction": {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10, "num_fewshot": 1},
    "freq_words_extraction": {"alpha": 2.0, "coded_wordlen": 6, "vocab_size": 0},
    "qa": {"dataset": "squad", "data": ""},
}
CHOICES = {
    "type_haystack": {"niah": ("essay", "noise", "needle"), "variable_tracking": ("essay", "noise")},
    "type_needle_k": ("numbers", "words", "uuids"),
    "type_needle_v": ("numbers", "words", "uuids"),
    "dataset": ("squad", "hotpotqa"),
}
PLACEHOLDERS = {  # what each generator fills in its template and answer prefix, besides {context}
    "niah": ("type_needle_v", "query"),
    "variable_tracking": ("query", "num_v"),
    "common_words_extraction": ("num_cw", "query"),
    "freq_words_extraction": ("query",),
    "qa": ("query",),
}


def check_fields(data: dict, required: tuple[str, ...], optional: tuple[str, ...], name: str, arguments) -> None:
    """Every required field given and none unknown; an argument given as a field (`max_facts = 6` above `[args]`)
    is pointed to where it goes."""
    for field in required:
        if field not in data:
            raise UserError(f"task file {name}: missing field '{field}'")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        where = f" ('{unknown[0]}' is an argument: give it under [args])" if unknown[0] in arguments else ""
        raise UserError(f"task file {name}: unknown field '{unknown[0]}'{where}")


@dataclass(frozen=True)
class RulerTask:
    version: int
    name: str
    description: str
    task: str  # the generator: niah, variable_tracking, common_words_extraction, freq_words_extraction or qa
    template: str  # the prompt, {context} where the haystack goes
    answer_prefix: str  # appended to the prompt: the answer is generated after it
    tokens_to_generate: int
    metric: str  # string_match_all (the share of references in the output) or string_match_part (any of them)
    samples: int  # prompts per length
    seed: int
    threshold: float  # the effective length's bar: a score (0–1) a length must reach
    noise: str  # the noise haystack's sentence, and the filler that tops a prompt up to its exact length
    args: tuple[tuple[str, object], ...]  # the generator's arguments, every default filled, sorted by name
    folder: str = ""  # the task file's folder (a relative `data` path is read from there); not in the identity
    data_sha256: str = ""  # QA's local data file's digest: its prompts change with the file's contents
    kind: str = "ruler"

    @property
    def identity(self) -> str:
        """Recorded with results: the same identity means the same prompts."""
        fields = {k: v for k, v in self.__dict__.items() if k not in ("folder", "kind")}
        if not self.data_sha256:  # the tasks without a data file keep the identity they had before it was added
            fields.pop("data_sha256")
        return f"{self.name}-v{self.version}-ruler-{config_hash(fields, 8)}"

    @property
    def prompts_per_length(self) -> int:
        return self.samples

    def arg(self, name: str):
        return dict(self.args)[name]

    @property
    def data_path(self) -> Path | None:
        """QA's local dataset file, resolved against the task file's folder; None when none is named."""
        data = str(dict(self.args).get("data", ""))
        return (Path(self.folder) / data) if data else None


def load_ruler_task(data: dict, path: Path) -> RulerTask:
    """A RULER task from a task file's parsed TOML (`kind = "ruler"`), every field checked."""
    name = path.name
    required = ("version", "name", "description", "task", "template", "answer_prefix", "tokens_to_generate")
    required += ("metric", "samples", "seed", "threshold")
    check_fields(data, required, ("kind", "noise", "args"), name, {a for args in ARGUMENTS.values() for a in args})

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise UserError(f"task file {name}: field '{field}' {what}")

    def integer(value, field: str, low: int) -> None:
        need(
            is_count(value, low),
            field,
            f"must be an integer ≥ {low}",
        )

    generator = data["task"]
    need(generator in ARGUMENTS, "task", f"must be one of {', '.join(ARGUMENTS)}")
    for field in ("name", "description", "template"):
        need(isinstance(data[field], str) and data[field].strip() != "", field, "must be a non-empty string")
    need(isinstance(data["answer_prefix"], str), "answer_prefix", "must be a string")
    integer(data["version"], "version", 1)
    integer(data["tokens_to_generate"], "tokens_to_generate", 1)
    integer(data["samples"], "samples", 1)
    integer(data["seed"], "seed", 0)
    need(data["metric"] in METRICS, "metric", f"must be one of {', '.join(METRICS)}")
    threshold = data["threshold"]
    need(
        isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and 0 < threshold <= 1,
        "threshold",
        "must be in (0, 1] (RULER's 85.6 is 0.856)",
    )
    noise = data.get("noise", NOISE)
    need(isinstance(noise, str) and noise.strip() != "", "noise", "must be a non-empty string")
    allowed = PLACEHOLDERS[generator]
    for field in ("template", "answer_prefix"):
        used = template_names(data[field], name, field, allowed + ("context",) * (field == "template"))
        need(field != "template" or used.count("context") == 1, field, "must contain {context} exactly once")
    args = check_args(data.get("args", {}), generator, name)
    values = {k: v for k, v in data.items() if k not in ("args", "kind", "threshold", "noise")}
    task = RulerTask(
        **values, threshold=float(threshold), noise=noise, args=tuple(sorted(args.items())), folder=str(path.parent)
    )
    data_file = task.data_path
    if data_file is not None and data_file.is_file():
        task = replace(task, data_sha256=sha256_file(data_file))
    return task


def check_args(given, generator: str, name: str) -> dict:
    """The generator's arguments with the task file's values over RULER's defaults, each checked."""
    if not isinstance(given, dict):
        raise UserError(f"task file {name}: 'args' must be a table")
    defaults = ARGUMENTS[generator]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise UserError(
            f"task file {name}: {generator} takes no argument '{unknown[0]}' (it takes {', '.join(defaults)})"
        )
    args = {**defaults, **given}
    for key, value in args.items():
        default = defaults[key]
        ok = isinstance(value, type(default)) and not isinstance(value, bool)
        if isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            args[key] = float(value)
        if not ok:
            raise UserError(f"task file {name}: argument '{key}' must be a {type(default).__name__}")
        choices = CHOICES.get(key)
        choices = choices.get(generator) if isinstance(choices, dict) else choices
        if choices and value not in choices:
            raise UserError(f"task file {name}: argument '{key}' must be one of {', '.join(choices)}")
        least = 0 if key in ("example_tokens", "vocab_size", "num_fewshot") else 1
        if isinstance(default, int) and value < least:
            raise UserError(f"task file {name}: argument '{key}' must be at least {least}")
    if generator == "niah":
        template_names(args["needle"], name, "needle", ("type_needle_v", "key", "value"))
        if args["num_needle_q"] > max(args["num_needle_k"], 1):
            args["num_needle_k"] = args["num_needle_q"]  # RULER: at least as many keys as questions
    if generator == "freq_words_extraction" and not 1 < args["alpha"] <= 10:
        raise UserError(f"task file {name}: argument 'alpha' must be in (1, 10]")
    if generator == "common_words_extraction" and args["freq_ucw"] >= args["freq_cw"]:
        raise UserError(f"task file {name}: argument 'freq_ucw' must be below 'freq_cw'")
    return args
