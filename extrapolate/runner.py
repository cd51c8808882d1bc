"""`extrapolate run`: train (or reuse) a model with an encoding, evaluate it past its training length,
write the results table, the position-loss table, a plot and a summary."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .attention import KERNELS, attention_plan
from .batches import BatchSource
from .config import PRESETS, ModelConfig, TrainConfig, config_hash
from .corpora import Corpus, load_corpus
from .defaults import DEFAULT_PASSKEY_FRACTION, DEFAULT_RETRIEVAL_TASK, DEFAULT_STEPS
from .device import activation_dtype, resolve_device
from .encodings import build_encoding, get_spec
from .errors import PositionOutOfRange, UserError
from .model import TransformerLM
from .registry import require_known
from .results import append_positions, append_results, check_tables, provenance
from .passkey.prompt import PromptBuilder
from .taskfiles import list_task_names, load_task
from .tasks.passkey import attention_shapes, evaluate_passkey
from .tasks.perplexity import PROTOCOLS, evaluate_perplexity
from .tokenizers import keep_with_model, load_tokenizer, parse_spec
from .train import StepCallback, TrainingDiverged, train

TASKS = ("perplexity", "passkey")


@dataclass(frozen=True)
class RunRequest:
    encoding: str = "rope"
    train_len: int | None = None  # None: 256 for presets, the checkpoint's own context for pretrained models
    eval_lens: tuple[int, ...] = ()  # empty: L, 2L, … up to eval_len
    eval_len: int | None = None  # default 8·L
    factor: float | None = None  # RoPE scalings; default max eval length / L
    model: str = "small"
    width: int | None = None  # overrides of the preset
    layers: int | None = None
    heads: int | None = None
    corpus: str = "shakespeare"
    tokenizer: str = "bpe"  # models trained here: bytes | bpe | bpe:N; a pretrained model uses its own
    tasks: tuple[str, ...] = ("perplexity",)
    steps: int = DEFAULT_STEPS
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"  # evaluation precision
    train_dtype: str = "bfloat16"
    protocol: str = "full"
    stride: int = 256
    eval_tokens: int = 8192  # tokens scored per held-out document, the same at every length
    eval_docs: int | None = None  # at most this many held-out documents (None: all)
    learned_policy: str = "error"
    kernel: str = "auto"
    # share of training rows that are passkey prompts (within L); None: 0.2 when L leaves room, else 0
    passkey_fraction: float | None = None
    passkey_task: str | None = None  # a task name under tasks/ or a TOML path; None: see DEFAULT_RETRIEVAL_TASK
    out: Path | None = None
    name: str | None = None


class Reporter:
    """Progress sink for long work; the CLI renders it, the library never prints."""

    def training(self, total: int, reused: bool) -> StepCallback | None:
        return None

    def evaluating(self, what: str, length: int) -> None:
        pass

    def done_training(self) -> None:
        pass

    def cell(self, cell) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


def lengths_for(request: RunRequest) -> list[int]:
    L = request.train_len
    if request.eval_lens:
        return sorted(set(request.eval_lens))
    longest = request.eval_len if request.eval_len is not None else 8 * L
    lengths, n = [], L
    while n < longest:
        lengths.append(n)
        n *= 2
    return lengths + [longest]


def is_pretrained(model: str) -> bool:
    from .pretrained import KNOWN

    if model in PRESETS:
        return False
    return model in KNOWN or model.endswith(".gguf") or Path(model).expanduser().exists() or "/" in model


_PRETRAINED: dict = {}


def load_pretrained_once(spec: str):
    """Pretrained models are loaded once per process (a sweep evaluates several scalings on one)."""
    from .pretrained import load_pretrained

    if spec not in _PRETRAINED:
        _PRETRAINED.clear()
        _PRETRAINED[spec] = load_pretrained(spec)
    return _PRETRAINED[spec]


def resolve(request: RunRequest) -> RunRequest:
    """Fill the defaults that depend on the model: the retrieval task, the training length of a pretrained
    checkpoint."""
    named = [t for t in request.tasks if t not in TASKS and t in list_task_names()]
    if named:  # `--tasks ruler-multikey`: the retrieval task, with that task file
        if len(named) > 1 or (request.passkey_task not in (None, named[0])):
            raise UserError(f"one retrieval task per run: {', '.join(named)} (and --passkey-task {request.passkey_task})")
        tasks = tuple(dict.fromkeys("passkey" if t == named[0] else t for t in request.tasks))
        request = dataclasses.replace(request, tasks=tasks, passkey_task=named[0])
    if request.passkey_task is None:
        kind = "pretrained" if is_pretrained(request.model) else "trained"
        request = dataclasses.replace(request, passkey_task=DEFAULT_RETRIEVAL_TASK[kind])
    if is_pretrained(request.model):
        if get_spec(request.encoding).kind != "rotary":
            raise UserError(f"pretrained models use RoPE: --encoding must be rope or a RoPE scaling, not {request.encoding}")
        # a checkpoint brings its own tokenizer (whatever --tokenizer says): the request records that one
        pretrained = load_pretrained_once(request.model)
        train_len = pretrained.original_len if request.train_len is None else request.train_len
        return dataclasses.replace(request, train_len=train_len, tokenizer=pretrained.tokenizer.identity)
    if request.train_len is not None:
        return request
    return dataclasses.replace(request, train_len=256)


def validate(request: RunRequest) -> None:
    request = resolve(request)
    if request.train_len < 2:
        raise UserError(f"--train-len must be at least 2, got {request.train_len}")
    if request.eval_len is not None and request.eval_len < request.train_len:
        raise UserError(f"--eval-len ({request.eval_len}) is shorter than --train-len ({request.train_len})")
    if any(n < 1 for n in request.eval_lens):
        raise UserError("--eval-lens must be positive")
    if request.factor is not None and not request.factor > 0:
        raise UserError(f"--factor must be > 0, got {request.factor}")
    if request.steps < 1 or request.batch_size < 1:
        raise UserError("--steps and --batch-size must be at least 1")
    if request.protocol not in PROTOCOLS:
        raise UserError(f"unknown protocol {request.protocol!r}; valid: {', '.join(PROTOCOLS)}")
    if request.stride < 1:
        raise UserError(f"--stride must be at least 1, got {request.stride}")
    require_known("kernel", request.kernel, KERNELS)
    if request.learned_policy not in ("error", "clamp"):
        raise UserError("--learned-policy must be error or clamp")
    if request.passkey_fraction is not None and not 0 <= request.passkey_fraction < 1:
        raise UserError("--passkey-fraction must be in [0, 1)")
    for task in request.tasks:
        require_known("task", task, TASKS)
    if request.eval_docs is not None and request.eval_docs < 1:
        raise UserError("--eval-docs must be at least 1")
    spec = get_spec(request.encoding)
    if is_pretrained(request.model):
        if spec.kind != "rotary":
            raise UserError(f"pretrained models use RoPE: --encoding must be rope or a RoPE scaling, not {spec.name}")
        return
    parse_spec(request.tokenizer)  # a bad --tokenizer fails here, before the corpus is read
    config = model_config(request, spec.base_encoding)
    from .encodings.catalog import validate_shape

    validate_shape(spec, n_heads=config.n_heads, head_dim=config.head_dim, factor=request.factor or 1.0)


def model_config(request: RunRequest, base_encoding: str) -> ModelConfig:
    if request.model not in PRESETS:
        from .pretrained import KNOWN
        from .registry import unknown_name_message

        raise UserError(unknown_name_message("model", request.model, list(PRESETS) + list(KNOWN)))
    overrides = {k: v for k, v in (("d_model", request.width), ("n_layers", request.layers), ("n_heads", request.heads))
                 if v is not None}
    for name, value in overrides.items():
        if value < 1:
            raise UserError(f"--{ {'d_model': 'width', 'n_layers': 'layers', 'n_heads': 'heads'}[name] } must be at least 1, got {value}")
    config = ModelConfig(**{**PRESETS[request.model], **overrides}, encoding=base_encoding, max_len=request.train_len)
    return config.validate()


def train_config(request: RunRequest, prepared: "Prepared", base_encoding: str) -> TrainConfig:
    steps, corpus = request.steps, prepared.corpus
    # one embedding row (and one output logit) per id of the tokenizer the model is trained with
    model = dataclasses.replace(model_config(request, base_encoding), vocab_size=prepared.tokenizer.vocab_size)
    return TrainConfig(
        model=model, corpus=corpus.name, tokenizer=prepared.tokenizer.identity, seq_len=request.train_len,
        batch_size=request.batch_size, steps=steps, lr=request.lr, warmup_steps=max(1, min(60, steps // 10)),
        seed=request.seed, dtype=request.train_dtype, passkey_fraction=prepared.extra["passkey_fraction"],
        passkey_task=prepared.extra["passkey_identity"],
        checkpoint_every=max(1, min(200, steps // 4)),
    )


def output_folder(request: RunRequest) -> Path:
    if request.out is not None:
        return Path(request.out)
    return Path("results") / (request.name or f"{request.encoding}-L{request.train_len}")


def check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create output folder {folder}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise UserError(f"output folder {folder} is not writable")


@dataclass
class Prepared:
    """Everything a run needs before evaluating: shared by `run` and `sweep`."""

    corpus: Corpus
    tokenizer: object  # ByteTokenizer, BPETokenizer or a pretrained model's own
    heldout: list[torch.Tensor]
    stream: torch.Tensor
    device: torch.device
    lengths: list[int]
    extra: dict = field(default_factory=dict)


def prepare(request: RunRequest) -> Prepared:
    validate(request)
    request = resolve(request)
    device = resolve_device(request.device)
    lengths = lengths_for(request)
    corpus = load_corpus(request.corpus)
    pretrained = load_pretrained_once(request.model) if is_pretrained(request.model) else None
    tokenizer = pretrained.tokenizer if pretrained else load_tokenizer(request.tokenizer, corpus)
    longest = max(lengths)
    heldout = [t for t in (tokenizer.encode_tensor(d) for d in corpus.heldout) if t.numel() > longest]
    if not heldout:
        raise UserError(f"corpus {corpus.name} has no held-out document longer than {longest} tokens")
    heldout = heldout[: request.eval_docs]
    # a pretrained model is not trained here: its training stream is never needed
    stream = tokenizer.encode_tensor("\n\n".join(corpus.train)) if pretrained is None else torch.zeros(request.train_len + 2, dtype=torch.int64)
    if stream.numel() < request.train_len + 2:
        raise UserError(f"corpus {corpus.name} has {stream.numel()} training tokens, too few for --train-len {request.train_len}")
    builder = PromptBuilder(load_task(request.passkey_task), tokenizer)
    need = builder.fixed_tokens() + 32  # room for some filler
    fraction = request.passkey_fraction if pretrained is None else 0.0
    if fraction is None:
        fraction = DEFAULT_PASSKEY_FRACTION if request.train_len >= need else 0.0
    extra = {"passkey_fraction": fraction, "passkey_identity": builder.task.identity if fraction > 0 else "",
             "pretrained": pretrained}
    if fraction > 0 or "passkey" in request.tasks:
        if fraction > 0 and request.train_len < need:
            raise UserError(f"--train-len {request.train_len} leaves no room for passkey training prompts "
                            f"(≥ {need} tokens); use --passkey-fraction 0 or a longer length")
        if "passkey" in request.tasks and min(lengths) < builder.fixed_tokens() + 16:
            raise UserError(f"passkey prompts need at least {builder.fixed_tokens() + 16} tokens; "
                            f"the shortest evaluation length is {min(lengths)}")
        extra.update(passkey_builder=builder, passkey_rows=builder.training_row)
    return Prepared(corpus, tokenizer, heldout, stream, device, lengths, extra)


def pretrained_hash(spec: str) -> str:
    return config_hash({"pretrained": spec})


def trained_model(request: RunRequest, prepared: Prepared, reporter: Reporter):
    pretrained = prepared.extra.get("pretrained")
    if pretrained is not None:
        from .train import TrainedModel

        model = pretrained.model.to(prepared.device)
        summary = {"config_hash": pretrained_hash(request.model), "pretrained": request.model,
                   "params": model.num_parameters()}
        return TrainedModel(model, Path(request.model), None, summary, reused=True)
    spec = get_spec(request.encoding)
    config = train_config(request, prepared, spec.base_encoding)
    source = BatchSource(prepared.stream, config.seq_len, config.batch_size, config.seed,
                         config.passkey_fraction, prepared.extra.get("passkey_rows"))
    from . import checkpoint as ckpt
    from .train import model_folder

    reused = ckpt.is_complete(model_folder(config))
    callback = reporter.training(config.steps, reused)
    result = train(config, source, prepared.device, on_step=callback, probe=retrieval_probe(request, prepared, config))
    keep_with_model(prepared.tokenizer, result.folder)
    reporter.done_training()
    return result


PROBE_PROMPTS = 40  # prompts per retrieval probe during training: a 95% interval of about ±15% at 50%


def retrieval_probe(request: RunRequest, prepared: Prepared, config: TrainConfig):
    """Greedy retrieval accuracy at L on a few dozen prompts, every ~1/30 of training, when the model trains
    on retrieval prompts: the step at which retrieval forms is itself a comparison between encodings."""
    builder = prepared.extra.get("passkey_builder")
    if builder is None or config.passkey_fraction <= 0:
        return None
    from .train import Probe

    task = builder.task
    small = PromptBuilder(dataclasses.replace(task, trials=max(1, PROBE_PROMPTS // len(task.depths))), builder.tokenizer)
    length = request.train_len

    def measure(model) -> float:
        model.kernel = request.kernel
        cells = evaluate_passkey(model, small, length, prepared.device, "float32", rank=False)
        return sum(c.accuracy for c in cells) / len(cells)

    return Probe(every=max(10, config.steps // 30), measure=measure)


def evaluation_encoding(request: RunRequest, model: TransformerLM, lengths: list[int]):
    """The encoding to evaluate with: a RoPE scaling swapped onto the RoPE model, or the model's own."""
    spec = get_spec(request.encoding)
    config = model.config
    if spec.kind != "rotary":  # the model's own encoding (and its trained parameters, if any)
        if spec.name == "learned":
            model.encoding.policy = request.learned_policy
        return model.encoding, 1.0
    # rotary kinds are parameter-free: always a fresh encoding, so a model shared by several cells (a loaded
    # pretrained checkpoint) never keeps the scaling of an earlier cell
    factor = 1.0 if spec.name == "rope" else (request.factor if request.factor is not None else max(lengths) / request.train_len)
    encoding = build_encoding(spec.name, d_model=config.d_model, n_heads=config.n_heads, head_dim=config.head_dim,
                              max_len=config.max_len, base=config.rope_base, factor=factor,
                              original_len=request.train_len)
    return encoding.to(next(model.parameters()).device), factor


def run_id(request: RunRequest, model_hash: str, factor: float) -> str:
    identity = {"model": model_hash, "encoding": request.encoding, "factor": factor, "protocol": request.protocol,
                "stride": request.stride if request.protocol == "sliding" else None, "dtype": request.dtype,
                "eval_tokens": request.eval_tokens, "learned_policy": request.learned_policy,
                "passkey_task": request.passkey_task if "passkey" in request.tasks else None}
    return config_hash(identity, 10)


def bucket_width(train_len: int) -> int:
    return max(1, train_len // 4)


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def measure(device: torch.device, evaluate):
    """(status, result) of one evaluation cell: `unsupported` when the encoding has no representation for a
    position (a learned table past its rows), `oom` when the device runs out of memory; other errors raise."""
    try:
        return "ok", evaluate()
    except PositionOutOfRange:
        return "unsupported", None
    except (RuntimeError, MemoryError) as exc:
        if not is_oom(exc):
            raise
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return "oom", None


def evaluate_run(request: RunRequest, prepared: Prepared, trained, reporter: Reporter) -> tuple[list[dict], list[dict]]:
    model = trained.model
    model.kernel = request.kernel
    encoding, factor = evaluation_encoding(request, model, prepared.lengths)
    model.set_encoding(encoding)
    rid = planned_run_id(request, prepared)  # the id the sweep looks for when it skips finished cells
    spec = get_spec(request.encoding)
    budget = max(request.eval_tokens, max(prepared.lengths))
    common = {
        "run_id": rid, "encoding": spec.name, "base_encoding": spec.base_encoding, "factor": factor,
        "train_len": request.train_len, "seed": request.seed, "protocol": protocol_label(request),
        "model": request.model, "params": model.num_parameters(), "corpus": prepared.corpus.name,
        "tokenizer": prepared.tokenizer.identity, "device": prepared.device.type, "dtype": request.dtype,
        **provenance(),
    }
    rows, positions = [], []
    for length in prepared.lengths if "perplexity" in request.tasks else []:
        reporter.evaluating("perplexity", length)
        status, result = measure(prepared.device, lambda: evaluate_perplexity(
            model, prepared.heldout, length, protocol=request.protocol, stride=request.stride, budget=budget,
            bucket_width=bucket_width(request.train_len), device=prepared.device, dtype=request.dtype))
        nll = result.nll if result else float("nan")
        tokens = result.tokens if result else 0
        kernel = recorded_kernel(encoding, request, [(length, length)])  # full windows, no cache
        for metric, value in (("nll", nll), ("ppl", float(torch.tensor(nll).exp()))):
            rows.append({**common, "kernel": kernel, "eval_len": length,
                         "task": "perplexity", "metric": metric, "value": value,
                         "depth": None, "n_tokens": tokens, "status": status})
        if result:
            for b in sorted(result.bucket_nll):
                width = result.bucket_width
                positions.append({"run_id": rid, "encoding": spec.name, "seed": request.seed,
                                  "train_len": request.train_len, "eval_len": length, "bucket_start": b * width,
                                  "bucket_end": min((b + 1) * width, length),
                                  "nll": result.bucket_nll[b] / result.bucket_tokens[b],
                                  "n_tokens": result.bucket_tokens[b]})
    builder = prepared.extra.get("passkey_builder")
    for length in prepared.lengths if "passkey" in request.tasks else []:
        reporter.evaluating("passkey", length)
        status, cells = measure(prepared.device, lambda: evaluate_passkey(model, builder, length, prepared.device,
                                                                         request.dtype))
        passkey_common = {**common, "kernel": recorded_kernel(encoding, request, attention_shapes(builder, length)),
                          "protocol": builder.task.identity, "eval_len": length, "task": "passkey"}
        if status != "ok":
            cells_or_depths = [(d, float("nan"), float("nan"), 0) for d in builder.task.depths]
        else:
            cells_or_depths = [(c.depth, c.accuracy, c.rank_accuracy, c.trials) for c in cells]
        for depth, accuracy, rank_accuracy, trials in cells_or_depths:
            for metric, value in (("accuracy", accuracy), ("rank_accuracy", rank_accuracy)):
                rows.append({**passkey_common, "metric": metric, "value": value, "depth": depth,
                             "n_tokens": trials * length, "status": status})
    return rows, positions


def recorded_kernel(encoding, request: RunRequest, shapes: list[tuple[int, int]]) -> str:
    """The kernels an evaluation ran for its attention calls of these (queries, keys) shapes, as
    `attention_plan` decided them for `causal_attention`. Asked after the evaluation, so a flex_attention that
    failed to compile is recorded as the blocked kernel it fell back to.

    Distinct kernels are joined by "+" in call order: passkey's prompt pass and its continuations from the KV
    cache can run different kernels (RoPE: "sdpa+blocked", as fused causal SDPA cannot continue a cache; a
    bias encoding on CUDA: "flex+blocked", as a few queries never compile flex), and one name would hide that."""
    device = resolve_device(request.device)
    dtype = activation_dtype(device, request.dtype)
    kernels = [attention_plan(encoding, request.kernel, device, dtype, queries, keys) for queries, keys in shapes]
    return "+".join(dict.fromkeys(kernels))


def protocol_label(request: RunRequest) -> str:
    return "full-window" if request.protocol == "full" else f"sliding-window-stride-{request.stride}"


def planned_run_id(request: RunRequest, prepared: Prepared) -> str:
    """The run id a request will get, known before any training (used to skip finished sweep cells)."""
    spec = get_spec(request.encoding)
    request = resolve(request)
    if prepared.extra.get("pretrained") is not None:
        model_hash = pretrained_hash(request.model)
    else:
        model_hash = config_hash(train_config(request, prepared, spec.base_encoding))
    factor = 1.0 if spec.trains_own_model else (request.factor or max(prepared.lengths) / request.train_len)
    return run_id(request, model_hash, factor)


def run_cell(request: RunRequest, prepared: Prepared, folder: Path, reporter: Reporter) -> TrainingDiverged | None:
    """Train or reuse, evaluate, append to the folder's tables: one (encoding, seed) cell. A diverged
    training is recorded as `status=diverged` rows (and returned) instead of stopping everything."""
    try:
        trained = trained_model(request, prepared, reporter)
    except TrainingDiverged as diverged:
        reporter.done_training()
        append_results(folder, diverged_rows(request, prepared))
        return diverged
    rows, positions = evaluate_run(request, prepared, trained, reporter)
    write_outputs(folder, request, trained, rows, positions)
    return None


def diverged_rows(request: RunRequest, prepared: Prepared) -> list[dict]:
    spec = get_spec(request.encoding)
    common = {"run_id": planned_run_id(request, prepared), "encoding": spec.name, "base_encoding": spec.base_encoding,
              "factor": None, "train_len": request.train_len, "seed": request.seed, "model": request.model,
              "params": None, "corpus": prepared.corpus.name, "tokenizer": prepared.tokenizer.identity,
              "device": prepared.device.type, "dtype": request.dtype,
              "kernel": None, "value": float("nan"), "n_tokens": 0, "status": "diverged", "protocol": protocol_label(request),
              **provenance()}
    rows = []
    for length in prepared.lengths:
        if "perplexity" in request.tasks:
            rows += [{**common, "eval_len": length, "task": "perplexity", "metric": m, "depth": None} for m in ("nll", "ppl")]
        if "passkey" in request.tasks:
            for depth in prepared.extra["passkey_builder"].task.depths:
                rows += [{**common, "eval_len": length, "task": "passkey", "metric": m, "depth": depth}
                         for m in ("accuracy", "rank_accuracy")]
    return rows


def run(request: RunRequest, reporter: Reporter | None = None) -> Path:
    """The main job. Returns the output folder."""
    from .lock import folder_lock

    reporter = reporter or Reporter()
    validate(request)
    request = resolve(request)
    folder = output_folder(request)
    check_tables(folder)  # a damaged table in the output folder is refused before training, not after
    prepared = prepare(request)
    with new_folder_guard(folder):
        with folder_lock(folder):
            diverged = run_cell(request, prepared, folder, reporter)
    if diverged is not None:
        raise diverged
    return folder


@contextlib.contextmanager
def new_folder_guard(folder: Path):
    """Create the output folder; if it was new and the job fails before writing anything, remove it again,
    so a mistake never leaves an empty or half-made folder behind."""
    existed = folder.exists()
    check_writable(folder)
    try:
        yield
    except BaseException:
        if not existed and folder.exists() and not any(folder.iterdir()):
            folder.rmdir()
        raise


def write_outputs(folder: Path, request: RunRequest, trained, rows: list[dict], positions: list[dict]) -> None:
    from .atomic import write_text
    from .report import write_run_report

    table = append_results(folder, rows)
    append_positions(folder, positions)
    if trained.config is not None and rows:
        from .training_log import append_training, probe_rows

        common = {"run_id": rows[0]["run_id"], "encoding": rows[0]["encoding"], "seed": request.seed,
                  "train_len": request.train_len}
        append_training(folder, probe_rows(trained.summary, common))
    config_file = trained.folder / "config.json"
    record = {"request": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(request).items()},
              "train_config": json.loads(config_file.read_text()) if trained.config is not None else None,
              "model_config": asdict(trained.model.config),
              "model_folder": trained.folder.name,  # under the cache's models/ folder
              "training": {k: v for k, v in trained.summary.items() if k != "losses"},
              **provenance()}
    text = json.dumps(record, indent=2, default=str)
    write_text(folder / "run.json", text)  # the latest run in this folder
    write_text(folder / "runs" / f"{rows[0]['run_id']}.json", text)  # every run, kept
    write_run_report(folder, table)
