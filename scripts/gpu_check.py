"""The project's own check of its CUDA paths, run on a machine with a GPU; writes one table.

    python scripts/gpu_check.py --out results/gpu-check                # everything (about 5 minutes on an H100)
    python scripts/gpu_check.py --lengths 16384 --skip-speed           # quicker
    python scripts/gpu_check.py --device cpu --lengths 512 --quick     # rehearse the script on a CPU
    python scripts/gpu_check.py --parts compare,kernels --shard 2/8 --deadline 200   # one of 8 parallel shards
    python scripts/gpu_check.py --parts speed --tag speed              # rows into gpu_check-speed.csv
    python scripts/gpu_check.py --merge --out results/gpu-check        # the shards' rows into one table

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
Encodings named `name@variant` run `name` the way a released model's layers wrap it: `@softcap` (Gemma 2's soft
cap of attention scores), `@window` (Mistral's sliding window), `@partial` (Phi's partial rotation).
Each row is written as it is measured (`gpu_check[-shard].csv`), so a run stopped by its `--deadline` or from
outside keeps what it measured; a part past its deadline records the encodings it did not reach.
Prints the table and exits 1 when a row is not ok. The card, driver, CUDA and torch versions are in
`gpu_check.md`.
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
from extrapolate.encodings.base import Decayed  # noqa: E402
from extrapolate.encodings.partial import partially_rotated  # noqa: E402
from extrapolate.encodings.softcap import capped  # noqa: E402
from extrapolate.encodings.window import windowed  # noqa: E402
from extrapolate.kernels.attention import attention_plan, causal_attention  # noqa: E402
from extrapolate.model import TransformerLM  # noqa: E402

ROWS: list[dict] = []
ROW_FILE: list[Path] = []  # where each row is appended as it is measured
COLUMNS = ("part", "encoding", "length", "kernel", "value", "limit", "ok")
# the model fields a released model's layers wrap an encoding with (ModelConfig's names)
VARIANTS = {
    "softcap": dict(attention_softcap=30.0),
    "window": dict(sliding_window=700),  # shorter than the kernel check's keys, so it cuts
    "partial": dict(rotary_dim=32),  # half of a 64-feature head
}
DEFAULT_VARIANTS = ("rope@softcap", "alibi@softcap", "rope@window", "alibi@window", "rope@partial", "yarn@partial")


def split_variant(label: str) -> tuple[str, dict]:
    name, _, variant = label.partition("@")
    if variant and variant not in VARIANTS:
        raise SystemExit(f"unknown variant @{variant}: one of {', '.join(VARIANTS)}")
    return name, VARIANTS.get(variant, {})


def wrapped(encoding, fields: dict):
    """`encoding` (built for `rotary_dim` features where the variant rotates part of each head) wrapped as
    `TransformerLM.set_encoding` wraps it for a model with these fields."""
    encoding = partially_rotated(encoding, fields.get("rotary_dim"))
    return windowed(capped(encoding, fields.get("attention_softcap")), fields.get("sliding_window"))


def record(part: str, encoding: str, length: int, kernel: str, value: float, limit: float | None) -> None:
    value = float(value.detach() if isinstance(value, torch.Tensor) else value)
    ok = bool(limit is None or value <= limit)
    row = dict(part=part, encoding=encoding, length=length, kernel=kernel, value=value, limit=limit, ok=ok)
    ROWS.append(row)
    if ROW_FILE:
        new = not ROW_FILE[0].exists()
        with ROW_FILE[0].open("a") as f:
            f.write((",".join(COLUMNS) + "\n" if new else "") + ",".join(csv_cell(row[c]) for c in COLUMNS) + "\n")
    print(
        f"{part:19} {encoding:22} {length:7} {kernel:24} {value:12.4g} {'' if limit is None else f'≤ {limit:g}':10}"
        f" {'ok' if ok else 'FAILED'}",
        flush=True,
    )


def csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return f'"{text}"' if "," in text else text


class Deadline:
    """A part's time limit: `reached(label)` is True once `seconds` have passed since the part began, and
    records (once) which encodings the part did not reach."""

    def __init__(self, part: str, seconds: float | None, names):
        self.part, self.names, self.said = part, list(names), False
        self.end = None if seconds is None else time.monotonic() + seconds

    def reached(self, name: str) -> bool:
        if self.end is None or time.monotonic() < self.end:
            return False
        if not self.said:
            self.said = True
            left = self.names[self.names.index(name) :]
            record(f"{self.part} not reached", ";".join(left), 0, "deadline", len(left), None)
        return True


def model_for(label: str, length: int, device, seed: int = 0) -> TransformerLM:
    """The `small` preset with `label`'s encoding as `run` evaluates it (a RoPE scaling on the RoPE model,
    s = 4), its variant's fields set as a released model's config sets them."""
    name, fields = split_variant(label)
    spec = get_spec(name)
    config = ModelConfig(
        **PRESETS["small"], vocab_size=2048, encoding=spec.base_encoding, max_len=max(length, 256), **fields
    )
    torch.manual_seed(seed)
    model = TransformerLM(config)
    for p in model.encoding.parameters():  # zero-initialised tables would hide a wrong lookup
        torch.nn.init.normal_(p, std=0.5)
    if not spec.trains_own_model:
        model.set_encoding(encoding_for(config, name, factor=4.0, original_len=256))
    return model.to(device)


def cuda_vs_cpu(names, lengths, device, deadline: float | None = None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    limit = Deadline("cuda-vs-cpu", deadline, names)
    for name in names:
        if limit.reached(name):
            return
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


def kernels_vs_reference(names, device, deadline: float | None = None) -> None:
    shapes = {"full": (1024, 1024), "continued prompt": (300, 2048), "decoding": (1, 2049), "rank scoring": (6, 2048)}
    limit = Deadline("kernel-vs-reference", deadline, names)
    for name in names:
        if limit.reached(name):
            return
        base, fields = split_variant(name)
        head = fields.get("rotary_dim", 64)
        encoding = build_encoding(base, d_model=256, n_heads=4, head_dim=head, max_len=256, factor=4.0).to(device)
        encoding = wrapped(encoding, fields)
        for p in encoding.parameters():
            torch.nn.init.normal_(p, std=0.5)
        for what, (queries, keys) in shapes.items():
            torch.manual_seed(queries)
            q = torch.randn(1, 4, queries, 64, device=device, requires_grad=True)
            k, v = (torch.randn(1, 2, keys, 64, device=device, requires_grad=True) for _ in range(2))
            inputs, attends = (q, k, v), encoding
            if encoding.forgets:  # FoX: the kernels read the cumulative log forget gate of every key
                gate = torch.randn(1, 4, keys, device=device).sigmoid().log().cumsum(-1).requires_grad_()
                inputs, attends = (q, k, v, gate), Decayed(encoding, gate)
            got = causal_attention(q, k, v, attends, "auto")
            want = causal_attention(q, k, v, attends, "reference")
            plan = attention_plan(attends, "auto", device, torch.float32, queries, keys, backward=True).name
            record("kernel-vs-reference", name, keys, f"{plan} ({what})", (got - want).abs().max(), 1e-4)
            grad_got = torch.autograd.grad(got.square().sum(), inputs)
            grad_want = torch.autograd.grad(want.square().sum(), inputs)
            worst = max(
                ((a - b).abs().max() / b.abs().max().clamp(min=1e-3)).item() for a, b in zip(grad_got, grad_want)
            )
            record("kernel-vs-reference grads", name, keys, f"{plan} ({what})", worst, 1e-3)


def speed(names, lengths, device, repeats: int, deadline: float | None = None) -> None:
    from extrapolate.core.device import synchronize

    order = ["rope", *[x for x in names if x != "rope"]]
    limit = Deadline("speed", deadline, [f"{name}:{n}" for n in lengths for name in order])
    for n in lengths:
        measured = {}
        for name in order:
            if limit.reached(f"{name}:{n}"):
                return
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


PARTS = ("compare", "kernels", "speed", "retrieval", "oom")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--encodings", default=",".join([*(name for name, _ in ENCODINGS), *DEFAULT_VARIANTS]), help="names, a@variant"
    )
    parser.add_argument("--lengths", default="16384,65536,131072", help="speed and memory lengths")
    parser.add_argument("--compare-lengths", default="512,4096", help="CUDA vs CPU lengths")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which parts: {', '.join(PARTS)}")
    parser.add_argument("--shard", default="1/1", help="k/n: the k-th of n round-robin shares of the encodings")
    parser.add_argument("--deadline", type=float, default=None, help="seconds each part may take")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--quick", action="store_true", help="small shapes only (a rehearsal on a CPU)")
    parser.add_argument("--tag", default=None, help="write rows to gpu_check-TAG.csv, for --merge to join")
    parser.add_argument("--merge", action="store_true", help="only join the shards' rows in --out into one table")
    parser.add_argument("--out", type=Path, default=Path("results/gpu-check"))
    args = parser.parse_args()
    if args.merge:
        ok = merge(args.out)
        sys.exit(0 if ok else 1)
    device = torch.device(args.device)
    index, count = (int(x) for x in args.shard.split("/"))
    names = args.encodings.split(",")[index - 1 :: count]
    for name in names:
        split_variant(name)
    parts = (
        set(args.parts.split(","))
        - ({"speed"} if args.skip_speed else set())
        - ({"retrieval"} if args.quick else set())
    )
    lengths = [int(x) for x in args.lengths.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    tag = args.tag or (f"{index}-of-{count}" if count > 1 else None)
    ROW_FILE.append(args.out / ("gpu_check.csv" if tag is None else f"gpu_check-{tag}.csv"))
    ROW_FILE[0].unlink(missing_ok=True)
    if device.type == "cuda" and "compare" in parts:
        cuda_vs_cpu(names, [int(x) for x in args.compare_lengths.split(",")], device, args.deadline)
    if "kernels" in parts:
        kernels_vs_reference(names, device, args.deadline)
    if "speed" in parts:
        speed(names, lengths, device, args.repeats, args.deadline)
    if "retrieval" in parts:
        retrieval(device, 16384)
    if device.type == "cuda" and "oom" in parts:
        out_of_memory(device)
    write_summary(args.out, ROW_FILE[0].name)
    sys.exit(0 if all(row["ok"] for row in ROWS) else 1)


def versions() -> str:
    """The card, its driver, CUDA and torch, as one line."""
    import subprocess

    if not torch.cuda.is_available():
        return f"cpu, torch {torch.__version__}"
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        driver = "unknown"
    return f"{torch.cuda.get_device_name()}, driver {driver}, CUDA {torch.version.cuda}, torch {torch.__version__}"


def merge(folder: Path) -> bool:
    """gpu_check.csv and gpu_check.md from the shards' files in `folder` (removed once joined)."""
    import pandas as pd

    shards = sorted(folder.glob("gpu_check-*.csv"))
    tables = [pd.read_csv(f) for f in shards]
    if (folder / "gpu_check.csv").exists():
        tables.insert(0, pd.read_csv(folder / "gpu_check.csv"))
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(folder / "gpu_check.csv", index=False)
    for f in shards:
        f.unlink()
    write_summary(folder, "gpu_check.csv")
    return bool(table["ok"].all())


def write_summary(folder: Path, name: str) -> None:
    import pandas as pd

    table = pd.read_csv(folder / name)
    failed = table[~table["ok"].astype(bool)]
    lines = [
        f"# GPU check on {versions()}",
        "",
        f"{len(table) - len(failed)} of {len(table)} rows within their limits.",
        "",
        "| part | encoding | length | kernel | value | limit | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.part} | {r.encoding} | {r.length} | {r.kernel} | {r.value:.4g} | "
        f"{'' if r.limit != r.limit else r.limit} | {'ok' if r.ok else '**no**'} |"
        for r in table.itertuples()
    ]
    (folder / name.replace(".csv", ".md")).write_text("\n".join(lines) + "\n")
    print(f"wrote {folder}/{name} and its .md ({versions()})")


if __name__ == "__main__":
    main()
