"""A task kind as a plug-in: what one kind of evaluation builds at a length, how it scores the model there, which
metrics and rows it records, and what a run, its id, its data and its dry-run estimate need of it. Each kind's
module defines one `TaskKind` and registers it in `TASK_KINDS` (perplexity.py, passkey.py); run/ asks the
registry for the kinds a request names and calls them, so no code outside a kind's module decides anything by
its name. The order of registration is the order in which a cell measures its kinds and writes their rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from extrapolate.core.distributed import SINGLE, World
from extrapolate.core.registry import Registry

Shapes = tuple[tuple[int, int], ...]  # (queries, keys) of each attention call a measurement makes


@dataclass(frozen=True)
class TaskSetup:
    """What a kind reads of a cell and its job to plan, measure and record one length: built by run/ from the
    resolved run and the job's prepared data, so a kind looks nothing up itself."""

    heldout: list  # the held-out documents, 1-D int64 token tensors
    prompts: object | None  # the retrieval task file's PromptBuilder (tasks.prompt), where the job builds prompts
    windows: str  # the perplexity protocol: full | sliding
    stride: int  # the sliding protocol's step
    budget: int  # tokens scored per held-out document at every length
    bucket_width: int  # positions per bucket of the loss by position
    bos: int | None  # the token every window starts with (the tokenizer's BOS), or None
    longppl_short: int = 4096  # LongPPL's short context (the authors' trunc_len)
    longppl_window: int = 1024  # the targets scored a short pass (the authors' sliding_window)
    longppl_evaluator: str | None = None  # the name of the model choosing LongPPL's key tokens (None: its own)


@dataclass(frozen=True)
class MeasureContext:
    """What a kind's measurement runs with, beyond its setup: the model in its evaluation encoding and kernel,
    where and how it runs, and where a long measurement keeps or reports its progress."""

    model: object  # a TransformerLM
    device: object  # torch.device
    dtype: str  # the evaluation precision
    world: World = SINGLE  # under torchrun each rank measures its share and the counts are added up
    log_folder: Path | None = None  # where a resumable measurement keeps its progress (None: it keeps none)
    run_id: str = ""  # the cell's run id, which such progress is kept under
    # (done, total, summary, logged, unit): a measurement finished `done` of its `total` units (prompts, depths,
    # windows); `summary` its score so far, `logged` read back from its log (reporter.evaluation_progress)
    on_progress: Callable[..., None] | None = None
    # the bytes a retrieval cell's prompts may hold at once (core/memory.py); None: each group of prompts whole
    memory: int | None = None
    evaluator: object | None = None  # LongPPL's evaluator (tasks/longppl_evaluator.py); None: the model itself

    def cell_log(self, task_identity: str, length: int):
        """The log of a retrieval cell's finished parts (a stopped cell resumes from them), or None where this
        measurement keeps no progress."""
        if self.log_folder is None:
            return None
        from extrapolate.tasks.depth_log import DepthLog

        world = self.world
        return DepthLog.for_cell(self.log_folder, self.run_id, task_identity, length, world.rank, world.size)

    def length_log(self, kind: str, identity: str, length: int):
        """The log of a measurement finished whole at `length` (`identity`: what its value depends on beyond
        the run id), or None where this measurement keeps no progress."""
        if self.log_folder is None:
            return None
        from extrapolate.tasks.depth_log import LengthLog

        world = self.world
        return LengthLog.for_cell(self.log_folder, self.run_id, kind, identity, length, world.rank, world.size)


def marked(label: str, bos: bool) -> str:
    """A protocol's name as the rows record it: "+bos" where every window or prompt starts with a BOS."""
    return f"{label}+bos" if bos else label


class TaskKind:
    """One kind of evaluation. A subclass names itself and its metrics and implements `attention_shapes`,
    `measure`, `protocol` and `rows`; the other hooks have the defaults of a kind that needs nothing more."""

    name: str  # the `kind` column of its rows; a kind that needs no task file is named so in --tasks and `task` too
    metrics: tuple[str, ...]  # the `metric` column of its rows, in the order they are written
    # its prompts come from the retrieval task file (--passkey-task, or a task file named in --tasks): the file is
    # then read and prepared, and its identity enters the run id
    reads_task_file: bool = False
    # the kind of a task file that names none (the files written before kinds were named: the passkey's)
    default_for_files: bool = False
    # it measures greedy answers alone, so a backend that only generates (vLLM's) computes it
    generates: bool = False
    # its lengths score the same text (a budget set by the longest length): a cell missing some lengths measures
    # every length again, so they stay comparable
    lengths_together: bool = False
    # measured when --tasks is not given (a kind that needs no task file; LongPPL's second passes only when asked)
    by_default: bool = True
    # the RunRequest fields only this kind reads: given while it is not asked for, a warning says they were ignored
    request_options: tuple[str, ...] = ()

    def load_file(self, data: dict, path: Path):
        """A kind that `reads_task_file`: the task of a task file naming this kind (`data`, its parsed TOML
        without `kind`), every field checked (UserError)."""
        raise NotImplementedError

    def prompt_builder(self, task, tokenizer, bos: int | None, chat, heldout: list):
        """A kind that `reads_task_file`: the builder of `task`'s prompts (what `TaskSetup.prompts` holds and
        what training rows are drawn from, with `training_row`)."""
        raise NotImplementedError

    def probe(self, builder, model, length: int, device, prompts: int) -> float:
        """A kind that `reads_task_file`: its accuracy at `length` on about `prompts` of its prompts (the
        retrieval probe during training)."""
        raise NotImplementedError

    def check_request(self, request, lengths: list[int]) -> None:
        """Refuse (UserError) a request (a run.RunRequest) this kind cannot measure at `lengths`, before any
        data is read."""

    def unused_options(self, request, defaults) -> list[str]:
        """One sentence per option of `request` that this kind, asked for, ignores (`defaults`: a RunRequest
        with every default)."""
        return []

    def check_lengths(self, prompts, lengths: tuple[int, ...]) -> None:
        """Refuse (UserError), before any training, evaluation lengths too short for this kind's prompts
        (`prompts`: the job's PromptBuilder)."""

    def attention_shapes(self, setup: TaskSetup, length: int) -> Shapes:
        """(queries, keys) of the attention calls `measure` makes at `length`, for the kernels they run."""
        raise NotImplementedError

    def measure(self, setup: TaskSetup, context: MeasureContext, length: int) -> object:
        """The result of scoring the model at `length` (what `rows` lays out)."""
        raise NotImplementedError

    def non_finite(self, result) -> str:
        """What makes a result no measurement (e.g. "the loss is NaN"); "" for a result that is one."""
        return ""

    def summary(self, result) -> str:
        """A measured length's headline in a few words, for the progress log (e.g. "ppl 41.20")."""
        return ""

    def protocol(self, setup: TaskSetup) -> str:
        """The `protocol` column of its measured rows."""
        raise NotImplementedError

    def task_name(self, setup: TaskSetup) -> str:
        """The `task` column of its rows: the task file's name for a kind that reads one (what --tasks and
        `extrapolate tasks` call it), else the kind's own name."""
        return setup.prompts.task.name if self.reads_task_file else self.name

    def rows(self, setup: TaskSetup, length: int, result) -> list[dict]:
        """The `metric`, `value`, `depth` and `n_tokens` of each row of one measurement at `length`, and its
        spread: `n` (the units measured: prompts, documents), `ci_low`/`ci_high` (95%) and `ci_method`
        (core/intervals.py); `result` None for a length that was not measured (out of memory, unsupported,
        non-finite): NaN values."""
        raise NotImplementedError

    def samples(self, result) -> list[dict]:
        """One record per prompt of a measurement (its index, reference, prediction and score), kept beside the
        results so a reader sees what the model answered; [] for a kind without prompts."""
        return []

    def failed_rows(self, setup: TaskSetup, length: int) -> list[dict]:
        """The `metric` and `depth` of each row it would have written at `length`, for a cell whose training
        failed (every value NaN)."""
        return [{"metric": metric, "depth": None} for metric in self.metrics]

    def position_rows(self, result, length: int) -> list[dict]:
        """Rows of the position table (`bucket_start`, `bucket_end`, `nll`, `n_tokens`) of one measurement."""
        return []

    def evaluated_tokens(self, setup: TaskSetup, lengths: Iterable[int]) -> int:
        """About how many tokens its measurements at `lengths` run through the model (a dry run's estimate for
        an engine that generates, vLLM's, priced at its measured prompt rate)."""
        return 0

    def forward_calls(self, setup: TaskSetup, length: int) -> list[tuple[int, int, int, int]]:
        """(rows, queries, keys, positions through the output head) of each forward call its measurement at
        `length` makes, decoding steps included: what a dry run prices (run/eval_cost.py); [] for none."""
        return []

    def decode_steps(self, setup: TaskSetup, lengths: Iterable[int]) -> list[tuple[int, int]]:
        """(batch, context length) of each one-token decoding call its measurements make at `lengths`, where
        generation and not the prompt's forward pass sets the time (a dry run's estimate); [] for none."""
        return []


TASK_KINDS: Registry[TaskKind] = Registry("task")


def register(kind: TaskKind) -> TaskKind:
    return TASK_KINDS.add(kind.name, kind)


def asked_kinds(tasks: Iterable[str]) -> list[TaskKind]:
    """The registered kinds named in `tasks`, in the order of registration (other names are left out: a request
    is checked for unknown names where it is resolved)."""
    asked = set(tasks)
    return [kind for name, kind in TASK_KINDS if name in asked]


def reads_task_file(tasks: Iterable[str]) -> bool:
    """Whether a kind named in `tasks` measures the retrieval task file's prompts."""
    return any(kind.reads_task_file for kind in asked_kinds(tasks))


def options_read(tasks: Iterable[str]) -> set[str]:
    """The request options the kinds named in `tasks` read (`request_options`): another kind's change nothing."""
    return {option for kind in asked_kinds(tasks) for option in kind.request_options}


def file_kind(task) -> TaskKind:
    """The kind that measures a task file's prompts (the kind the file names): what `--tasks <task file>`
    stands for."""
    return TASK_KINDS.get(task.kind)


def without_task_file() -> list[str]:
    """The names of the kinds that need no task file (a name --tasks takes besides the task files')."""
    return [name for name, kind in TASK_KINDS if not kind.reads_task_file]


# The name --tasks gives the run's retrieval task, whichever file that is: --passkey-task's, or the model's default
# (core/defaults.DEFAULT_RETRIEVAL_TASK). Every other name in --tasks is one task: a kind that needs no task file
# (perplexity) or a task file's name (`passkey` is tasks/passkey.toml, on every model).
RETRIEVAL = "retrieval"
# Kinds renamed since tables and run records were written: the `task` column of such a row held its kind's name
# (every retrieval row said "passkey"), as did a record's `tasks` and a task file's `kind`.
RENAMED_KINDS = {"passkey": "needle"}


def legacy_task_names() -> set[str]:
    """What the `task` of a retrieval row or sample line held before it named task files: the name of a kind
    that reads them, then or now."""
    return {*RENAMED_KINDS, *(name for name, kind in TASK_KINDS if kind.reads_task_file)}


def is_retrieval(name: str) -> bool:
    """Whether a name in a request's tasks stands for the run's retrieval task (`retrieval`, or a kind that reads
    the task file, as a resolved request names it)."""
    return name == RETRIEVAL or (name in TASK_KINDS and TASK_KINDS.get(name).reads_task_file)


def default_tasks() -> tuple[str, ...]:
    """What `run` and `sweep` measure when --tasks is not given: every kind that needs no task file and is
    measured by default (perplexity; LongPPL only when asked), then the run's retrieval task."""
    measured = [name for name in without_task_file() if TASK_KINDS.get(name).by_default]
    return (*measured, RETRIEVAL)
