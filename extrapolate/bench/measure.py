"""`extrapolate bench`: evaluation speed and peak memory per encoding and length, training throughput and
model FLOP utilisation against the machine's measured matmul peak, and an equivalent transformers Llama
measured in the same process tree, so every ratio is taken under the same conditions.

Each memory measurement runs in a fresh process (peak resident memory is per process and never resets).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from extrapolate.bench.timing import (
    alternating_best,
    best_time,
    in_fresh_process,
    matmul_peak,
    peak_rss_mb,
    profile_call,
)
from extrapolate.core.config import PRESETS, ModelConfig
from extrapolate.core.device import activation_dtype, autocast, resolve_device, training_dtype
from extrapolate.encodings import encoding_for, get_spec
from extrapolate.kernels.attention import COMPILED
from extrapolate.model import token_cross_entropy

TRAIN_LEN = 256  # the L the bench trains at and RoPE's scalings are scaled from (the default sweep's)


@dataclass
class BenchRow:
    what: str  # eval | eval-paired | eval-vs-transformers | decode | retrieval | train | matmul
    implementation: str  # extrapolate | transformers | torch
    encoding: str
    length: int
    tokens_per_second: float
    peak_memory_mb: float
    kernel: str
    dtype: str
    mfu: float | None = None
    gflops: float | None = None
    warmup_seconds: float | None = None  # first call at the measured shape (flex_attention: its compile)
    seconds: float | None = None  # a retrieval row's whole depth (bench/retrieval.py)
    prompts: int | None = None  # a retrieval row's prompts (one depth's)
    memory_budget: str | None = None  # the retrieval row's micro-batch budget (--eval-memory's default)


def model_config(preset: str, encoding: str, length: int) -> ModelConfig:
    """The preset with the vocabulary `run` trains it with by default (the default BPE)."""
    from extrapolate.data.tokenizers import DEFAULT_BPE_VOCAB

    return ModelConfig(**PRESETS[preset], vocab_size=DEFAULT_BPE_VOCAB, encoding=encoding, max_len=length)


def train_flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """6·N (weights, forward + backward) + 12·layers·T·d (attention scores and values), the PaLM accounting;
    N excludes the embedding table but counts the output head."""
    n = sum(p.numel() for name, p in build(config).named_parameters() if not name.startswith("embed."))
    if config.tie_embeddings:
        n += config.vocab_size * config.d_model
    return 6 * n + 12 * config.n_layers * seq_len * config.d_model


def build(config: ModelConfig):
    from extrapolate.model import TransformerLM

    torch.manual_seed(0)
    return TransformerLM(config)


def eval_model(preset: str, encoding: str, length: int, device: torch.device, train_len: int, longest: int):
    """(model, config) evaluating `encoding` at `length` as `run` would: a RoPE scaling is swapped onto the RoPE
    model with factor = longest length / L and original length L = `train_len`; any other encoding is the
    model's own. The catalog says which is which, so a scaling added there is measured scaled here too."""
    spec = get_spec(encoding)
    # the model trained at L, as `run` evaluates it (CoPE's table has L + 1 rows, SSMax's s starts at 1/ln L);
    # a learned table, which has no rows past L, is given `length` rows so that it can be timed there
    config = model_config(preset, spec.base_encoding, length if spec.name == "learned" else train_len)
    model = build(config).to(device).eval()
    if spec.kind == "rotary" and not spec.trains_own_model:
        model.set_encoding(
            encoding_for(config, spec.name, factor=max(1.0, longest / train_len), original_len=train_len).to(device)
        )
    return model, config


def eval_step(
    implementation: str,
    preset: str,
    encoding: str,
    length: int,
    device: torch.device,
    kernel_choice: str,
    dtype: str,
    train_len: int,
    longest: int,
):
    """(step(tokens), kernel label, config): one full-length evaluation of either implementation, in `dtype`
    (under `autocast`). Ours is `run`'s own perplexity evaluation of one window (the code path `run` times);
    `train_len` and `longest` (the longest benchmarked length) set a RoPE scaling's factor, as in `run`. The
    label is the kernel `causal_attention` runs for that forward."""
    from extrapolate.kernels.attention import attention_plan
    from extrapolate.tasks.perplexity import evaluate_perplexity

    if implementation == "transformers":
        config = model_config(preset, "rope", length)
        theirs = TokenNLL(hf_llama(config)).to(device).eval()
        return (lambda tokens: theirs.token_nll(tokens[:, :-1], tokens[:, 1:])), "transformers-sdpa", config
    model, config = eval_model(preset, encoding, length, device, train_len, longest)
    model.use_kernel(kernel_choice)
    plan = attention_plan(model.encoding, kernel_choice, device, activation_dtype(device, dtype), length, length)
    kernel = plan.name

    def run_nll(tokens):  # tokens (1, n + 1): one window of n tokens, every token scored
        n = tokens.shape[1] - 1
        return evaluate_perplexity(
            model, [tokens[0]], n, budget=n, bucket_width=max(1, train_len // 4), device=device, dtype=dtype
        )

    return run_nll, kernel, config


def _eval_worker(args) -> dict:
    implementation, preset, encoding, length, device_name, dtype, kernel_choice, train_len, longest = args
    device = resolve_device(device_name)
    step, kernel, config = eval_step(
        implementation, preset, encoding, length, device, kernel_choice, dtype, train_len, longest
    )
    tokens = torch.randint(0, config.vocab_size, (1, length + 1), device=device)
    with torch.no_grad(), autocast(device, dtype):
        # warm-up; a compiled kernel (flex) warms up at the measured shape, and that time is reported apart
        compiled = kernel in {plan.name for plan in COMPILED}
        warmup = best_time(lambda: step(tokens[:, : (length if compiled else min(length, 512)) + 1]), 1, device)
        best_time(lambda: step(tokens), 1, device)  # the full length once: its peak memory
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else peak_rss_mb()
    return asdict(
        BenchRow(
            "eval",
            implementation,
            encoding,
            length,
            float("nan"),  # no speed: a cold process's is not comparable; the paired rows time every encoding
            peak,
            kernel,
            dtype,
            warmup_seconds=round(warmup, 2),
        )
    )


def _paired_worker(args) -> list[dict]:
    """Evaluation speed of several (implementation, encoding) pairs in one process, timed in alternation
    (best of `rounds` each): their ratios are taken under the same conditions however noisy the machine.
    Memory is measured apart, in fresh processes (`_eval_worker`)."""
    what, preset, length, device_name, dtype, rounds, contenders, train_len, longest, profile_dir = args
    device = resolve_device(device_name)
    steps = {
        pair: eval_step(pair[0], preset, pair[1], length, device, "auto", dtype, train_len, longest)
        for pair in contenders
    }
    tokens = torch.randint(0, next(iter(steps.values()))[2].vocab_size, (1, length + 1), device=device)
    with torch.no_grad(), autocast(device, dtype):
        for step, _, _ in steps.values():
            step(tokens[:, : min(length, 512) + 1])  # warm-up
        best = alternating_best(
            {pair: (lambda step=step: step(tokens)) for pair, (step, _, _) in steps.items()}, rounds, device
        )
        if profile_dir is not None:
            for (implementation, encoding), (step, _, _) in steps.items():
                profile_call(
                    lambda step=step: step(tokens), device, f"{profile_dir}/{what}-{implementation}-{encoding}-{length}"
                )
    return [
        asdict(BenchRow(what, pair[0], pair[1], length, length / best[pair], float("nan"), kernel, dtype))
        for pair, (_, kernel, _) in steps.items()
    ]


def _decode_worker(args) -> list[dict]:
    """Greedy decoding speed per encoding: `steps` tokens after a prompt of `length` tokens, from the KV cache,
    at batch 1 (the path passkey and RULER answer by: `prompt_passes.greedy_answers`). Every encoding's prompt is
    encoded first, then the decodings are timed in alternation, so their ratios share the machine's conditions."""
    from extrapolate.kernels.attention import attention_plan
    from extrapolate.tasks.prompt_passes import greedy_answers

    preset, encodings, length, device_name, dtype, steps, rounds, train_len, longest = args
    device = resolve_device(device_name)
    total = length + steps
    contenders, kernels = {}, {}
    with torch.no_grad(), autocast(device, dtype):
        for encoding in encodings:
            model, config = eval_model(preset, encoding, total, device, train_len, longest)
            tokens = torch.randint(0, config.vocab_size, (1, length), device=device)
            cache = model.new_cache()
            last = model.lm_head(model.hidden_states(tokens, cache=cache, seq_len=total)[:, -1]).float()  # (1, V)

            def decode(model=model, cache=cache, last=last):  # a copy of the cache: every call decodes afresh
                greedy_answers(model, [dict(layer) for layer in cache], last, steps, total)

            decode()  # warm-up
            contenders[encoding] = decode
            kernels[encoding] = attention_plan(
                model.encoding, "auto", device, activation_dtype(device, dtype), 1, length + 1
            ).name
        best = alternating_best(contenders, rounds, device)
    return [
        asdict(BenchRow("decode", "extrapolate", e, length, steps / best[e], float("nan"), kernels[e], dtype))
        for e in encodings
    ]


def hf_llama(config: ModelConfig):
    """A transformers Llama with the same width, depth, heads, vocabulary and tying, SDPA attention."""
    from extrapolate.data.families import llama_config
    from extrapolate.data.hf_extra import require_transformers

    hf_config = llama_config(config, attn_implementation="sdpa")
    torch.manual_seed(0)
    return require_transformers().LlamaForCausalLM(hf_config)


class TokenNLL(torch.nn.Module):
    """A transformers causal LM behind the project's `token_nll`, so one training step serves both."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def token_nll(self, inputs, targets):  # (B, T) each -> (B, T) float32: all logits, then the loss
        return token_cross_entropy(self.model(inputs).logits.float(), targets)  # the project's loss layout: a fair race


def train_step(implementation: str, preset: str, seq_len: int, batch: int, device: torch.device, dtype: str):
    """A closure running one optimizer step (`train.training_step`, as training runs it) of the
    implementation's RoPE model on a fixed random batch."""
    from extrapolate.core.config import TrainConfig
    from extrapolate.data.batches import Batch
    from extrapolate.training.train import make_optimizer, training_step

    config = model_config(preset, "rope", seq_len)
    model = (TokenNLL(hf_llama(config)) if implementation == "transformers" else build(config)).to(device)
    train_config = TrainConfig(model=config, seq_len=seq_len, batch_size=batch, lr=1e-4, dtype=dtype)
    optimizer = make_optimizer(model, train_config)
    tokens = torch.randint(0, config.vocab_size, (batch, seq_len + 1), device=device)
    rows = Batch(tokens[:, :-1], tokens[:, 1:], torch.ones(batch, seq_len, device=device))

    def step():
        training_step(model, optimizer, train_config, rows, device)

    return step


def _train_memory_worker(args) -> float:
    """Peak memory (MB) of two training steps of one implementation, in the fresh process it runs in."""
    implementation, preset, seq_len, batch, device_name, dtype = args
    device = resolve_device(device_name)
    step = train_step(implementation, preset, seq_len, batch, device, dtype)
    step(), step()
    return torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else peak_rss_mb()


def train_throughputs(
    implementations,
    preset: str,
    seq_len: int,
    batch: int,
    steps: int,
    device: torch.device,
    dtype: str,
    rounds: int = 5,
) -> dict[str, float]:
    """Training tokens/s per implementation, timed in alternating rounds of `steps` steps (best round of
    each), so a ratio between them is taken under the same machine conditions."""
    runners = {name: train_step(name, preset, seq_len, batch, device, dtype) for name in implementations}
    for step in runners.values():  # two warm-up steps each
        step(), step()
    best = alternating_best(
        {name: (lambda step=step: [step() for _ in range(steps)]) for name, step in runners.items()}, rounds, device
    )
    return {name: batch * seq_len * steps / seconds for name, seconds in best.items()}


def run_bench(
    preset: str = "small",
    lengths=(4096, 8192, 16384, 32768),
    encodings=("rope", "alibi", "t5", "sinusoidal"),
    device_name: str = "auto",
    eval_dtype: str = "float32",
    train_dtype: str = "auto",
    compare_transformers: bool = True,
    train_len: int = TRAIN_LEN,
    batch: int = 32,
    train_steps: int = 5,
    kernel: str = "auto",
    on_row=None,
    profile_dir: str | None = None,
    decode_steps: int = 0,
) -> list[BenchRow]:
    device = resolve_device(device_name)
    train_dtype = training_dtype(device, train_dtype)
    rows: list[BenchRow] = []

    def emit(row: BenchRow):
        rows.append(row)
        if on_row:
            on_row(row)

    peaks = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        peaks[name] = matmul_peak(dtype, device)
        # a matmul scores no tokens: its rate is the GFLOP/s, its tokens/s is none (not 0)
        emit(BenchRow("matmul", "torch", "-", 2048, float("nan"), peak_rss_mb(), "matmul", name, gflops=peaks[name]))
    implementations = ["extrapolate"] + (["transformers"] if compare_transformers and has_transformers() else [])
    flops = train_flops_per_token(model_config(preset, "rope", train_len), train_len)
    throughputs = train_throughputs(implementations, preset, train_len, batch, train_steps, device, train_dtype)
    # the ceiling is the fastest matmul the machine has: on a CPU without native bf16 (AVX2 only) a bf16
    # matmul is emulated, hundreds of times slower than fp32, and autocast's kernels do not run at that rate
    ceiling = max(peaks.values())
    for implementation, tps in throughputs.items():
        # its memory in a process of its own: a process's peak never resets, and both trained in this one
        memory = in_fresh_process(
            _train_memory_worker, (implementation, preset, train_len, batch, device_name, train_dtype)
        )
        emit(
            BenchRow(
                "train",
                implementation,
                "rope",
                train_len,
                tps,
                memory,
                "-",
                train_dtype,
                mfu=tps * flops / (ceiling * 1e9),
                gflops=tps * flops / 1e9,
            )
        )
    scaling = (train_len, max(lengths))  # a RoPE scaling's L and longest length: factor = longest / L, as in `run`
    for length in lengths:
        for encoding in encodings:
            args = ("extrapolate", preset, encoding, length, device_name, eval_dtype, kernel, *scaling)
            emit(BenchRow(**in_fresh_process(_eval_worker, args)))
        if "transformers" in implementations:  # its memory in a fresh process; the speed ratio from one process
            args = ("transformers", preset, "rope", length, device_name, eval_dtype, "auto", *scaling)
            emit(BenchRow(**in_fresh_process(_eval_worker, args)))
        # speeds, each group timed in alternation in a process of its own: every encoding together, RoPE first
        # (what the others are divided by, timed even where not asked), so every speed the table prints is
        # comparable with the others; then RoPE against transformers
        ordered = ["rope", *(e for e in encodings if e != "rope")]
        groups = [("eval-paired", [("extrapolate", e) for e in ordered])]
        if "transformers" in implementations:
            groups.append(("eval-vs-transformers", [("extrapolate", "rope"), ("transformers", "rope")]))
        for what, contenders in groups:
            rounds = paired_rounds(length)
            args = (what, preset, length, device_name, eval_dtype, rounds, contenders, *scaling, profile_dir)
            for row in in_fresh_process(_paired_worker, args):
                emit(BenchRow(**row))
        if decode_steps:
            args = (preset, encodings, length, device_name, eval_dtype, decode_steps, 3, *scaling)
            for row in in_fresh_process(_decode_worker, args):
                emit(BenchRow(**row))
    return rows


def paired_rounds(length: int) -> int:
    """Alternating rounds for the same-process ratios: more where a call is short (8 at 8k tokens, 3 at 32k),
    so a few disturbed calls cannot decide a ratio."""
    return max(3, min(8, 65536 // length))


def has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def summary_lines(rows: list[BenchRow]) -> list[str]:
    """The acceptance-style ratios of a bench run, as Markdown bullet lines: training and evaluation speed
    against transformers and bias encodings against RoPE (all from same-process rows), and peak memory."""
    lines = []
    train = {r.implementation: r for r in rows if r.what == "train"}
    if "extrapolate" in train:
        ours = train["extrapolate"]
        line = f"- training at {ours.length} ({ours.dtype}): {ours.tokens_per_second:,.0f} tok/s, MFU {ours.mfu:.0%}"
        if "transformers" in train:
            theirs = train["transformers"]
            line += (
                f"; transformers {theirs.tokens_per_second:,.0f} tok/s, MFU {theirs.mfu:.0%}: "
                f"{ours.tokens_per_second / theirs.tokens_per_second:.2f}×"
            )
        lines.append(line)
    paired = {(r.what, r.implementation, r.encoding, r.length): r.tokens_per_second for r in rows}
    for length in sorted({r.length for r in rows if r.what in ("eval-paired", "eval-vs-transformers")}):
        parts = []
        theirs = paired.get(("eval-vs-transformers", "transformers", "rope", length))
        if theirs is not None:
            ours = paired[("eval-vs-transformers", "extrapolate", "rope", length)]
            parts.append(
                f"RoPE vs transformers {ours / theirs:.2f}× tok/s ({ours:,.0f} vs {theirs:,.0f}, "
                "eval-vs-transformers rows)"
            )
        rope = paired.get(("eval-paired", "extrapolate", "rope", length))
        times = [
            f"{name} takes {rope / paired[('eval-paired', 'extrapolate', name, length)]:.2f}× RoPE's time"
            for name in dict.fromkeys(r.encoding for r in rows if r.what == "eval-paired" and r.length == length)
            if rope and name != "rope"
        ]
        if times:
            parts.append("; ".join(times) + " (eval-paired rows)")
        if parts:
            lines.append(f"- evaluation at {length} (same process): " + "; ".join(parts))
    for length in sorted({r.length for r in rows if r.what == "decode"}):
        decoding = {r.encoding: r.tokens_per_second for r in rows if r.what == "decode" and r.length == length}
        rope = decoding.get("rope")
        parts = [
            f"{name} {tps:,.1f} tok/s" + (f" ({rope / tps:.2f}× RoPE's time)" if rope and name != "rope" else "")
            for name, tps in decoding.items()
        ]
        lines.append(f"- decoding after {length} tokens (batch 1, same process): " + "; ".join(parts))
    evals = [r for r in rows if r.what == "eval"]
    if evals:
        longest = max(r.length for r in evals)
        at_longest = {
            f"{r.encoding}"
            if r.implementation == "extrapolate"
            else f"{r.implementation} ({r.encoding})": r.peak_memory_mb
            for r in evals
            if r.length == longest
        }
        lines.append(f"- peak memory at {longest}: " + ", ".join(f"{k} {v:,.0f} MB" for k, v in at_longest.items()))
    return lines
