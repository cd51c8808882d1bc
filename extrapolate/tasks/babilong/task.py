"""A BABILong task file (`kind = "babilong"`): which bAbI task (qa1–qa10), BABILong's prompt around the context
and question, the answer length, samples a length, and where in the haystack the story's sentences go.

It reads as a RULER task file does (tasks/ruler/task.py) and is prompted by the same builder: the fields the
builder reads are RULER's, so a BABILong prompt is exact in tokens, framed by a BOS or chat template, and
continued from a shared prefix as RULER's are. Every field is validated on load; `version` changes whenever
prompts would change."""

from __future__ import annotations

from dataclasses import dataclass

from extrapolate.core.config import config_hash
from extrapolate.core.errors import UserError
from extrapolate.tasks.babilong.world import FEWEST_FACTS, STORY_FACTS
from extrapolate.tasks.files import is_count, template_names
from extrapolate.tasks.ruler.task import DEFAULT_THRESHOLD, NOISE, check_fields

GENERATOR = "babilong"
ARGUMENTS = ("facts_from", "facts_to", "min_facts", "max_facts")  # a task file's [args]


@dataclass(frozen=True)
class BabilongTask:
    version: int
    name: str
    description: str
    qa: int  # bAbI's task: 1 single supporting fact … 10 indefinite knowledge
    template: str  # BABILong's prompt: instruction, examples, post-prompt, {context} and {question}
    answer_prefix: str  # after the prompt: the answer is generated after it
    tokens_to_generate: int
    samples: int  # prompts per length
    seed: int
    threshold: float  # the effective length's bar: a score (0–1) a length must reach
    noise: str  # tops a prompt up to its exact length (the builder's filler)
    args: tuple[tuple[str, object], ...]  # facts_from, facts_to, min_facts, max_facts: every one filled, sorted
    task: str = GENERATOR  # the builder's generator
    metric: str = GENERATOR  # BABILong's compare_answers (tasks/babilong/score.py)
    kind: str = GENERATOR

    @property
    def identity(self) -> str:
        """Recorded with results: the same identity means the same prompts."""
        fields = {k: v for k, v in self.__dict__.items() if k not in ("task", "metric", "kind")}
        return f"{self.name}-v{self.version}-babilong-{config_hash(fields, 8)}"

    @property
    def prompts_per_length(self) -> int:
        return self.samples

    def arg(self, name: str):
        return dict(self.args)[name]


def load_babilong_task(data: dict, path) -> BabilongTask:
    """A BABILong task from a task file's parsed TOML (`kind = "babilong"`), every field checked."""
    name = path.name
    required = ("version", "name", "description", "qa", "template", "answer_prefix", "tokens_to_generate")
    required += ("samples", "seed")
    check_fields(data, required, ("threshold", "noise", "args"), name, ARGUMENTS)

    def need(ok: bool, key: str, what: str) -> None:
        if not ok:
            raise UserError(f"task file {name}: field '{key}' {what}")

    def integer(key: str, low: int, high: int | None = None) -> None:
        need(is_count(data[key], low, high), key, f"must be an integer in [{low}, {high or '∞'}]")

    for key in ("version", "tokens_to_generate", "samples"):
        integer(key, 1)
    integer("seed", 0)
    integer("qa", 1, 10)
    for key in ("name", "description", "template"):
        need(isinstance(data[key], str) and data[key].strip() != "", key, "must be a non-empty string")
    need(isinstance(data["answer_prefix"], str), "answer_prefix", "must be a string")
    used = template_names(data["template"], name, "template", ("context", "question"))
    need(sorted(used) == ["context", "question"], "template", "must contain {context} and {question} once each")
    template_names(data["answer_prefix"], name, "answer_prefix", ())
    threshold = data.get("threshold", DEFAULT_THRESHOLD)
    need(
        isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and 0 < threshold <= 1,
        "threshold",
        "must be in (0, 1]",
    )
    noise = data.get("noise", NOISE)
    need(isinstance(noise, str) and noise.strip() != "", "noise", "must be a non-empty string")
    args = check_args(data.get("args", {}), data["qa"], name)
    values = {k: v for k, v in data.items() if k not in ("args", "threshold", "noise")}
    return BabilongTask(**values, threshold=float(threshold), noise=noise, args=tuple(sorted(args.items())))


def check_args(given, qa: int, name: str) -> dict:
    """Where the facts go (BABILong's task_start_pct and task_end_pct: shares of the context, default all of it)
    and how many sentences a story has (default the task's STORY_FACTS)."""
    if not isinstance(given, dict):
        raise UserError(f"task file {name}: 'args' must be a table")
    low, high = STORY_FACTS[qa]
    defaults = dict(zip(ARGUMENTS, (0.0, 1.0, low, high)))
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise UserError(f"task file {name}: babilong takes no argument '{unknown[0]}' (it takes {', '.join(defaults)})")
    args = {**defaults, **given}
    for key in ("facts_from", "facts_to"):
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise UserError(f"task file {name}: argument '{key}' must be a share in [0, 1]")
        args[key] = float(value)
    if not args["facts_from"] < args["facts_to"]:
        raise UserError(f"task file {name}: argument 'facts_from' must be below 'facts_to'")
    for key in ("min_facts", "max_facts"):
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise UserError(f"task file {name}: argument '{key}' must be an integer ≥ 2")
    fewest = FEWEST_FACTS.get(qa, 2)
    if args["min_facts"] < fewest:
        raise UserError(f"task file {name}: qa{qa}'s question needs stories of at least {fewest} facts (min_facts)")
    if args["min_facts"] > args["max_facts"]:
        raise UserError(f"task file {name}: argument 'min_facts' must not exceed 'max_facts'")
    if qa == 4 and (args["min_facts"], args["max_facts"]) != (2, 2):
        raise UserError(f"task file {name}: qa4's stories are bAbI's two facts (min_facts = max_facts = 2)")
    return args
