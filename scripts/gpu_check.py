"""The project's own check of its CUDA paths, run on a machine with a GPU; writes one table.

    python scripts/gpu_check.py --out results/gpu-check                # everything (about 5 minutes on an H100)
    python scripts/gpu_check.py --lengths 16384 --skip-speed           # quicker
    python scripts/gpu_check.py --device cpu --lengths 512 --quick     # rehearse the script on a CPU

Parts, each a group of rows in `gpu_check.csv` (columns: part, encoding, length, kernel, value, limit, ok):
- `cuda-vs-cpu`: every encoding's hidden states of one `small` model, CUDA against CPU (float32, TF32 off),
  max |difference|; and the gradients of one training step, max relative difference.
- `kernel-vs-reference`: every encoding's attention plan on CUDA (a full pass, a prompt continuing a cache,
  decoding) against the full-matrix reference kernel on the same card, float32, forward and gradients.
- `speed`: one bf16 forward of the `small` model per encoding and length (16k / 64k / 128k by default): time
  and peak memory, and each as a multiple of RoPE's (the issue's bounds: time ≤ 3× at 65536, memory ≤ 2× at
  131072).
- `retrieval`: the time of one retrieval prompt (passkey-word, one depth, one trial) at 16384 tokens.
- `oom`: a cell larger than a lowered memory fraction ends as an `oom` row with one message, not a crash.
Prints the table and exits 1 when a row is not ok. The card and torch version are in `gpu_check.md`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a checkout without an install

from extrapolate.core.config import PRESETS, ModelConfig  # noqa: E402
from extrapolate.encodings import ENCODINGS, build_encoding, encoding_for, get_spec  # noqa: E402
from extrapolate.kernels.attention import attention_plan, causal_attention  # noqa: E402
from extrapolate.model import TransformerLM  # noqa: E402

ROWS: list[dict] = []


def record(part: str, encoding: str, length: int, kernel: str, value: float, limit: float | None) -> None:
    value = float(value)
    ok = bool(limit is None or value <= limit)
    ROWS.append(dict(part=part, encoding=encoding, length=length, kernel=kernel, value=value, limit=limit, ok=ok))
    print(
        f"{part:19} {encoding:22} {length:7} {kernel:24} {value:12.4g} {'' if limit is None else f'≤ {limit:g}':10}"
        f" {'ok' if ok else 'FAILED'}",
        flush=True,
    )


def model_for(name: str, length: int, device, seed: int = 0) -> TransformerLM:
    """The `small` preset with `name` as `run` evaluates it (a RoPE scaling on the RoPE model, s = 4)."""
    spec = get_spec(name)
    config = ModelConfig(**PRESETS["small"], vocab_size=2048, encoding=spec.base_encoding, max_len=max(length, 256))
    torch.manual_seed(seed)
    model = TransformerLM(config)
    for p in model.encoding.parameters():  # zero-initialised tables would hide a wrong lookup
        torch.nn.init.normal_(p, std=0.5)
    if not spec.trains_own_model:
        model.set_encoding(encoding_for(config, name, factor=4.0, original_len=256))
    return model.to(device)


def cuda_vs_cpu(names, lengths, device) -> None:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    for name in names:
        for n in lengths:
            tokens = torch.randint(0, 2048, (1, n), generator=torch.Generator().manual_seed(n))
            cpu, gpu = model_for(name, n, "cpu").eval(), model_for(name, n, device).eval()
            with torch.no_grad():
                diff = (gpu.hidden_states(tokens.to(device)).cpu() - cpu.hidden_states(tokens)).abs().max()
            plan = attention_plan(gpu.encoding, "auto", device, torch.float32, n, n).name
            record("cuda-vs-cpu", name, n, plan, diff, 5e-4)
        tokens = torch.randint(0, 2048, (2, 257), generator=torch.Generator().manual_seed(1))
        grads = []
        for where in ("cpu", device):
            model = model_for(name, 256, where).train()
            model.token_nll(tokens[:, :-1].to(where), tokens[:, 1:].to(where)).mean().backward()
            grads.append({k: p.grad.cpu() for k, p in model.named_parameters() if p.grad is not None})
        # relative to each parameter's gradient scale; a gradient that is zero in truth compares absolutely
        worst = max(
            ((grads[1][k] - g).abs().max() / max(g.abs().max().item(), 1e-3)).item() for k, g in grads[0].items()
        )
        plan = attention_plan(model.encoding, "auto", device, torch.float32, 256, 256, backward=True).name
        record("cuda-vs-cpu grads", name, 256, plan, worst, 1e-3)


def kernels_vs_reference(names, device) -> None:
    shapes = {"full": (1024, 1024), "continued prompt": (300, 2048), "decoding": (1, 2049), "rank scoring": (6, 2048)}
    for name in names:
        encoding = build_encoding(name, d_model=256, n_heads=4, head_dim=64, max_len=256, factor=4.0).to(device)
        for p in encoding.parameters():
            torch.nn.init.normal_(p, std=0.5)
        for what, (queries, keys) in shapes.items():
            torch.manual_seed(queries)
            q = torch.randn(1, 4, queries, 64, device=device, requires_grad=True)
            k, v = (torch.randn(1, 2, keys, 64, device=device, requires_grad=True) for _ in range(2))
            got = causal_attention(q, k, v, encoding, "auto")
            want = causal_attention(q, k, v, encoding, "reference")
            plan = attention_plan(encoding, "auto", device, torch.float32, queries, keys, backward=True).name
            record("kernel-vs-reference", name, keys, f"{plan} ({what})", (got - want).abs().max(), 1e-4)
            grad_got = torch.autograd.grad(got.square().sum(), (q, k, v))
            grad_want = torch.autograd.grad(want.square().sum(), (q, k, v))
            worst = max(
                ((a - b).abs().max() / b.abs().max().clamp(min=1e-3)).item() for a, b in zip(grad_got, grad_want)
            )
            record("kernel-vs-reference grads", name, keys, f"{plan} ({what})", worst, 1e-3)


def speed(names, lengths, device, repeats: int) -> None:
    from extrapolate.core.device import synchronize

    for n in lengths:
        measured = {}
        for name in ["rope", *[x for x in names if x != "rope"]]:
            model = model_for(name, n, device).eval()
            tokens = torch.randint(0, 2048, (1, n), device=device)
            plan = attention_plan(model.encoding, "auto", device, torch.bfloat16, n, n).name
            try:
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
                    model.hidden_states(tokens)  # warm-up and compile
                    torch.cuda.reset_peak_memory_stats() if device.type == "cuda" else None
                    best = float("inf")
                    for _ in range(repeats):
                        synchronize(device)
                        start = time.perf_counter()
                        model.hidden_states(tokens)
                        synchronize(device)
                        best = min(best, time.perf_counter() - start)
                peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
            except torch.OutOfMemoryError:
                record("speed", name, n, plan, float("inf"), None)
                continue
            finally:
                del model
                torch.cuda.empty_cache() if device.type == "cuda" else None
            measured[name] = best, peak
            record("speed seconds", name, n, plan, best, None)
            record("speed peak GiB", name, n, plan, peak, None)
            if name != "rope":
                rope_time, rope_peak = measured["rope"]
                record("speed time / rope", name, n, plan, best / rope_time, 3.0 if n >= 65536 else None)
                record("speed memory / rope", name, n, plan, peak / rope_peak, 2.0 if n >= 131072 else None)


def retrieval(device, length: int) -> None:
    from extrapolate.data.tokenizers import ByteTokenizer
    from extrapolate.tasks.files import load_task
    from extrapolate.tasks.passkey import evaluate_passkey
    from extrapolate.tasks.prompt import PromptBuilder

    task = dataclasses.replace(load_task("passkey"), trials=1, depths=(0.5,))
    model = model_for("rope", length, device).eval()
    builder = PromptBuilder(task, ByteTokenizer())
    evaluate_passkey(model, builder, length, device, "bfloat16")  # warm-up
    start = time.perf_counter()
    evaluate_passkey(model, builder, length, device, "bfloat16")
    record("retrieval seconds", "rope", length, "one prompt", time.perf_counter() - start, None)


def out_of_memory(device) -> None:
    """A forward far beyond a lowered memory fraction: the cell is an `oom` row, the process goes on."""
    from extrapolate.run.evaluate import measure

    torch.cuda.set_per_process_memory_fraction(0.05)
    try:
        said = []
        model = model_for("alibi", 262144, device).eval()
        tokens = torch.randint(0, 2048, (8, 262144), device=device)
        status, _ = measure(device, lambda: model.token_nll(tokens[:, :-1], tokens[:, 1:]), said.append)
        record("oom", "alibi", 262144, status + (f" ({said[0]})" if said else ""), float(status != "oom"), 0.0)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--encodings", default=",".join(name for name, _ in ENCODINGS))
    parser.add_argument("--lengths", default="16384,65536,131072", help="speed and memory lengths")
    parser.add_argument("--compare-lengths", default="512,4096", help="CUDA vs CPU lengths")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--quick", action="store_true", help="small shapes only (a rehearsal on a CPU)")
    parser.add_argument("--out", type=Path, default=Path("results/gpu-check"))
    args = parser.parse_args()
    device = torch.device(args.device)
    names = args.encodings.split(",")
    lengths = [int(x) for x in args.lengths.split(",")]
    if device.type == "cuda":
        cuda_vs_cpu(names, [int(x) for x in args.compare_lengths.split(",")], device)
    kernels_vs_reference(names, device)
    if not args.skip_speed:
        speed(names, lengths, device, args.repeats)
    if not args.quick:
        retrieval(device, 16384)
    if device.type == "cuda":
        out_of_memory(device)
    write(args.out, device)
    sys.exit(0 if all(row["ok"] for row in ROWS) else 1)


def write(folder: Path, device) -> None:
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(ROWS)
    table.to_csv(folder / "gpu_check.csv", index=False)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    failed = table[~table["ok"]]
    lines = [
        f"# GPU check on {card}, torch {torch.__version__}",
        "",
        f"{len(table) - len(failed)} of {len(table)} rows within their limits.",
        "",
        "| part | encoding | length | kernel | value | limit | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.part} | {r.encoding} | {r.length} | {r.kernel} | {r.value:.4g} | "
        f"{'' if r.limit is None or r.limit != r.limit else r.limit} | {'ok' if r.ok else '**no**'} |"
        for r in table.itertuples()
    ]
    (folder / "gpu_check.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {folder}/gpu_check.csv and gpu_check.md ({card}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
