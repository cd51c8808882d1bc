"""`extrapolate bench` as one job: check the request, measure (bench.py), write bench.csv, summary.md and
bench.png. The CLI renders what this returns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BenchRequest:
    model: str = "small"
    lengths: tuple[int, ...] = (4096, 8192, 16384, 32768)
    encodings: tuple[str, ...] = ("rope", "alibi", "t5", "sinusoidal", "yarn")
    device: str = "auto"
    dtype: str = "float32"
    transformers: bool = True  # measure an equivalent transformers Llama too
    kernel: str = "auto"
    out: Path = Path("results/bench")
    profile: bool = False  # a profiler table and trace of each paired evaluation, in out/profiles
    decode_steps: int = 0  # tokens greedily decoded after each length's prompt, per encoding (0: none)
    retrieval_prompts: int = 20  # one retrieval depth's prompts timed at each length (0: none)


def variant_lines() -> list[str]:
    """The kernel variants this machine chose by timing (kernels/tuning.py), one line, or none."""
    from extrapolate.kernels.tuning import choices_here, tuning_enabled

    chosen = choices_here() if tuning_enabled() else {}
    if not chosen:
        return []
    return ["- kernel variants timed on this machine: " + "; ".join(f"{k}: {v}" for k, v in sorted(chosen.items()))]


def bench_job(request: BenchRequest, on_row=None) -> tuple[list, list[str]]:
    """(rows, summary lines); every option is checked before any measurement."""
    import pandas as pd

    from extrapolate.bench import measure as bench
    from extrapolate.bench.retrieval import retrieval_lines, retrieval_rows
    from extrapolate.core.atomic import write_text
    from extrapolate.core.config import PRESETS
    from extrapolate.core.device import DTYPES, resolve_device
    from extrapolate.core.errors import UserError
    from extrapolate.core.machine import describe, machine
    from extrapolate.core.paths import folder_target
    from extrapolate.core.registry import require_known
    from extrapolate.encodings import get_spec
    from extrapolate.encodings.catalog import validate_shape
    from extrapolate.kernels.attention import KERNELS
    from extrapolate.report.bench_plot import bench_figure
    from extrapolate.report.plots import save_figure
    from extrapolate.report.table import provenance, write_table

    require_known("model", request.model, PRESETS)
    names = tuple(get_spec(n).name for n in request.encodings)
    for name in names:  # a shape or depth the model cannot take (rope-nope's k past its layers), before any timing
        preset = PRESETS[request.model]
        validate_shape(
            get_spec(name),
            n_heads=preset["n_heads"],
            head_dim=preset["d_model"] // preset["n_heads"],
            n_layers=preset["n_layers"],
        )
    resolve_device(request.device)  # a bad --device fails here, in one line, before any measurement
    require_known("kernel", request.kernel, KERNELS)
    require_known("--dtype", request.dtype, DTYPES)
    if not names:
        raise UserError("--encodings names no encoding")
    folder_target(Path(request.out))  # before the measurements, which take minutes
    rows = bench.run_bench(
        request.model,
        request.lengths,
        names,
        request.device,
        request.dtype,
        compare_transformers=request.transformers,
        kernel=request.kernel,
        on_row=on_row,
        profile_dir=str(Path(request.out) / "profiles") if request.profile else None,
        decode_steps=request.decode_steps,
    )
    if request.retrieval_prompts:
        prompts, train_len = request.retrieval_prompts, bench.TRAIN_LEN
        rows += retrieval_rows(
            request.model, request.lengths, request.device, request.dtype, prompts, train_len, on_row
        )
    out = Path(request.out)
    ran_on = machine(resolve_device(request.device))
    frame = pd.DataFrame([{**dataclasses.asdict(r), "model": request.model, **ran_on, **provenance()} for r in rows])
    write_table(out / "bench.csv", frame)
    summary = [f"- machine: {describe(ran_on)}", *bench.summary_lines(rows), *retrieval_lines(rows), *variant_lines()]
    write_text(
        out / "summary.md", f"# Bench summary ({request.model}, {request.device})\n\n" + "\n".join(summary) + "\n"
    )
    save_figure(bench_figure(frame), out / "bench.png")
    return rows, summary
