"""The benchmark's pieces measure what they say: FLOP accounting, and both implementations timed side by side."""

import math

import pytest

from extrapolate.bench import measure as bench


def test_train_flops_follow_the_palm_accounting():
    config = bench.model_config("tiny", "rope", 128)
    d, ff, layers, vocab = config.d_model, config.ff_dim, config.n_layers, config.vocab_size
    assert config.kv_heads == config.n_heads and config.mlp == "swiglu" and config.norm == "rmsnorm"
    per_layer = 4 * d * d + 3 * d * ff + 2 * d  # q, k, v, o; gate, up, down; two norm weights
    weights = layers * per_layer + d + vocab * d  # final norm, output head (the embedding is not counted)
    assert bench.train_flops_per_token(config, 128) == 6 * weights + 12 * layers * 128 * d


def test_paired_speed_rows_time_both_implementations_in_one_process():
    pytest.importorskip("transformers")
    pairs = [("extrapolate", "rope"), ("transformers", "rope"), ("extrapolate", "alibi")]
    rows = bench._paired_worker(("eval-paired", "tiny", 256, "cpu", "float32", 1, pairs, 256, 256, None))
    assert [(r["implementation"], r["encoding"]) for r in rows] == pairs
    assert rows[2]["kernel"] == "fused-bias"
    assert all(
        r["what"] == "eval-paired" and r["tokens_per_second"] > 0 and math.isnan(r["peak_memory_mb"]) for r in rows
    )


def test_profiled_pairs_write_an_op_table_and_a_trace_per_contender(tmp_path):
    """`bench --profile`: each contender's evaluation profiled once, its ops by self time and a trace viewer's
    file beside the timing rows."""
    import gzip
    import json

    pairs = [("extrapolate", "rope"), ("extrapolate", "alibi")]
    bench._paired_worker(("eval-paired", "tiny", 128, "cpu", "float32", 1, pairs, 128, 128, str(tmp_path / "p")))
    for _, encoding in pairs:
        table = (tmp_path / "p" / f"eval-paired-extrapolate-{encoding}-128.txt").read_text()
        assert "Self CPU" in table and "aten::" in table
        trace = json.loads(gzip.open(tmp_path / "p" / f"eval-paired-extrapolate-{encoding}-128.json.gz").read())
        assert any(event.get("name", "").startswith("aten::") for event in trace["traceEvents"])
    assert "scaled_dot_product" in (tmp_path / "p" / "eval-paired-extrapolate-rope-128.txt").read_text()


@pytest.mark.parametrize("name", ["llama3", "dynamic-ntk", "dynamic-yarn", "yarn"])
def test_rope_scalings_are_measured_scaled_as_run_scales_them(name):
    """Every RoPE scaling of the catalog runs scaled, with factor = longest length / L as `run` sets it: its
    frequencies at the measured length differ from plain RoPE's, and so does the loss of the same weights."""
    import torch

    cpu = torch.device("cpu")
    model, config = bench.eval_model("tiny", name, 256, cpu, train_len=64, longest=512)
    assert config.encoding == "rope" and model.encoding.name == name
    assert (model.encoding.factor, model.encoding.original_len) == (512 / 64, 64)
    rope, _ = bench.eval_model("tiny", "rope", 256, cpu, train_len=64, longest=512)
    (scaled_freq, scaled_factor), (rope_freq, rope_factor) = (
        model.encoding.frequencies(256),
        rope.encoding.frequencies(256),
    )
    assert not torch.equal(scaled_freq, rope_freq) or scaled_factor != rope_factor
    tokens = torch.randint(0, config.vocab_size, (1, 257), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        steps = [
            bench.eval_step("extrapolate", "tiny", e, 256, cpu, "auto", "float32", 64, 512)[0] for e in (name, "rope")
        ]
        losses = [step(tokens).nll for step in steps]  # `run`'s perplexity evaluation of one window
    assert losses[0] != losses[1]  # the same weights (seeded), another encoding


def test_bench_plot_takes_speeds_from_the_same_process_rows():
    import pandas as pd

    from extrapolate.report.bench_plot import bench_figure

    def row(what, implementation, encoding, length, speed, memory):
        return dict(
            what=what,
            implementation=implementation,
            encoding=encoding,
            length=length,
            tokens_per_second=speed,
            peak_memory_mb=memory,
        )

    frame = pd.DataFrame(
        [
            row("eval", "extrapolate", "rope", 4096, 100.0, 300.0),
            row("eval", "extrapolate", "rope", 8192, 50.0, 400.0),
            row("eval", "extrapolate", "yarn", 4096, 90.0, 310.0),
            row("eval", "extrapolate", "yarn", 8192, 40.0, 410.0),
            row("eval-paired", "extrapolate", "rope", 4096, 120.0, float("nan")),
            row("eval-paired", "extrapolate", "rope", 8192, 60.0, float("nan")),
            row("eval", "transformers", "rope", 4096, 80.0, 500.0),
            row("eval", "transformers", "rope", 8192, 30.0, 600.0),
            row("eval-vs-transformers", "extrapolate", "rope", 4096, 110.0, float("nan")),
            row("eval-vs-transformers", "extrapolate", "rope", 8192, 55.0, float("nan")),
            row("eval-vs-transformers", "transformers", "rope", 4096, 100.0, float("nan")),
            row("eval-vs-transformers", "transformers", "rope", 8192, 50.0, float("nan")),
        ]
    )
    speed, memory = bench_figure(frame).axes
    lines = {line.get_label(): list(line.get_ydata()) for line in speed.get_lines()}
    # rope: the group timed with the bias encodings; yarn has no same-process rows; transformers: its pair
    assert lines == {"rope": [120.0, 60.0], "yarn": [90.0, 40.0], "transformers (rope)": [100.0, 50.0]}
    assert [list(line.get_ydata()) for line in memory.get_lines()] == [
        [300 / 1024, 400 / 1024],
        [310 / 1024, 410 / 1024],
        [500 / 1024, 600 / 1024],
    ]


def test_summary_takes_each_ratio_from_its_own_group():
    def row(what, implementation, encoding, speed):
        return bench.BenchRow(what, implementation, encoding, 8192, speed, float("nan"), "sdpa", "float32")

    rows = [
        row("eval-paired", "extrapolate", "rope", 100.0),
        row("eval-paired", "extrapolate", "alibi", 80.0),
        row("eval-vs-transformers", "extrapolate", "rope", 90.0),
        row("eval-vs-transformers", "transformers", "rope", 60.0),
    ]
    assert bench.summary_lines(rows) == [
        "- evaluation at 8192 (same process): RoPE vs transformers 1.50× tok/s (90 vs 60, eval-vs-transformers "
        "rows); alibi takes 1.25× RoPE's time (eval-paired rows)"
    ]


def test_paired_rounds_shrink_with_length():
    assert [bench.paired_rounds(n) for n in (1024, 4096, 8192, 16384, 32768, 131072)] == [8, 8, 8, 4, 3, 3]


@pytest.mark.slow  # end to end, tens of seconds: run by .ci/run's slow step
def test_bench_command_writes_table_summary_and_plot(tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    out = tmp_path / "bench"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--model",
            "tiny",
            "--eval-lens",
            "256",
            "--encodings",
            "rope,alibi",
            "--no-transformers",
            "--device",
            "cpu",
            "--decode-steps",
            "2",
            "--retrieval-prompts",
            "3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out / "bench.csv")
    assert sorted(set(frame["what"])) == ["decode", "eval", "eval-paired", "matmul", "retrieval", "train"]
    (retrieval,) = frame[frame["what"] == "retrieval"].to_dict("records")
    assert retrieval["seconds"] > 0 and retrieval["peak_memory_mb"] > 0 and retrieval["kernel"] == "sdpa"
    summary = (out / "summary.md").read_text()
    assert "- retrieval at 256 (3 prompts of one depth" in summary  # the prompts it was asked for
    assert f"budget {retrieval['memory_budget']}): {retrieval['seconds']:.1f} s" in summary
    evals = frame[frame["what"] == "eval"].set_index("encoding")
    assert evals.loc["rope", "kernel"] == "sdpa" and evals.loc["alibi", "kernel"] == "fused-bias"
    # the memory rows time nothing (a cold process's speed is no speed); every encoding is timed in one process
    assert (evals["peak_memory_mb"] > 0).all() and evals["tokens_per_second"].isna().all()
    speeds = frame[frame["what"] == "eval-paired"]
    assert sorted(speeds["encoding"]) == ["alibi", "rope"] and (speeds["tokens_per_second"] > 0).all()
    assert frame[frame["what"] == "matmul"]["tokens_per_second"].isna().all()  # no tokens, so none (not 0)
    # MFU is the training's FLOP rate over the fastest matmul measured (a ratio of two timings, so its bound
    # depends on what else the machine did meanwhile: the definition is checked, not the machine's speed)
    train = frame[frame["what"] == "train"].iloc[0]
    ceiling = frame[frame["what"] == "matmul"]["gflops"].max()
    assert train["mfu"] > 0 and train["mfu"] == pytest.approx(train["gflops"] / ceiling, rel=1e-4)  # 6 digits kept
    summary = (out / "summary.md").read_text()
    assert "training at 256" in summary and "alibi takes" in summary and "peak memory at 256" in summary
    assert "decoding after 256 tokens (batch 1, same process): rope " in summary
    # where it ran, in every row and the summary: the same code is fast on one CPU and slow on another
    import torch

    from extrapolate.core.machine import cpu_model

    assert set(frame["cpu"]) == {cpu_model()} and set(frame["torch"]) == {torch.__version__}
    assert set(frame["threads"]) == {torch.get_num_threads()}
    assert frame["isa"].iloc[0].startswith(torch.backends.cpu.get_cpu_capability())
    assert f"- machine: {cpu_model()} (" in summary
    assert (out / "bench.png").stat().st_size > 0


def test_the_bench_table_shows_a_slow_matmul_and_a_missing_peak_as_such():
    """An emulated bf16 matmul (0.28 GFLOP/s on an AVX2-only CPU) is not "0"; a row without a peak is "–"."""
    from types import SimpleNamespace

    from extrapolate.cli.render import bench_extra, megabytes

    assert bench_extra(SimpleNamespace(mfu=None, gflops=0.28)) == "0.28 GFLOP/s"
    assert bench_extra(SimpleNamespace(mfu=None, gflops=204.4)) == "204 GFLOP/s"
    assert bench_extra(SimpleNamespace(mfu=0.31, gflops=None)) == "31% MFU"
    assert megabytes(float("nan")) == megabytes(None) == "–" and megabytes(1234.4) == "1,234"


def test_the_per_cpu_ratios_docs_performance_states_come_from_the_committed_bench_files():
    from pathlib import Path

    import pandas as pd

    from extrapolate.bench.measure import BenchRow, summary_lines

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "performance.md").read_text()
    fields = list(BenchRow.__dataclass_fields__)
    for folder in sorted((root / "results" / "bench-cpus").iterdir()):
        if not folder.is_dir():
            continue
        frame = pd.read_csv(folder / "bench.csv")
        rows = [
            BenchRow(**{k: (None if pd.isna(v) else v) for k, v in r.items() if k in fields})
            for r in frame.to_dict("records")
        ]
        (line,) = [x for x in summary_lines(rows) if x.startswith("- evaluation at 16384")]
        alibi, t5 = (float(x.split(" takes ")[1].split("×")[0]) for x in line.split(": ", 1)[1].split("; "))
        (row,) = [x for x in text.splitlines() if f"(`{folder.name}`)" in x]
        assert row.endswith(f"| {alibi:.2f}× | {t5:.2f}× |"), (row, line)


def test_the_earlier_kernels_figures_docs_performance_states_are_the_bench_cpus_notes():
    """The figures of the kernels before the key bias are in results/bench-cpus/NOTES.md (their bench files
    were measured again since): the spans the doc gives are that table's."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    notes = (root / "results" / "bench-cpus" / "NOTES.md").read_text()
    earlier = notes.split("## ")[1]  # the first entry: the kernels before
    rows = re.findall(r"\| [^|]+ \(`[\w-]+`\) \| ([\d.]+)× \| ([\d.]+)× \|", earlier)
    assert len(rows) == 3
    alibi, t5 = ([float(row[i]) for row in rows] for i in (0, 1))
    text = " ".join((root / "docs" / "performance.md").read_text().split())
    assert f"took {min(alibi):.2f}–{max(alibi):.2f}× (ALiBi) and {min(t5):.2f}–{max(t5):.2f}× (T5)" in text
    bf16 = re.search(r"ALiBi ([\d.]+)× and T5 ([\d.]+)× RoPE's time, on the blocked kernel", " ".join(notes.split()))
    low, high = sorted(float(x) for x in bf16.groups())
    assert f"bf16 ran the blocked kernel at {low:.1f}–{high:.1f}×" in text


def test_decoding_rows_time_every_encoding_from_its_cache_in_one_process():
    rows = bench._decode_worker(("tiny", ("rope", "string", "dual-chunk"), 96, "cpu", "float32", 3, 1, 32, 96))
    assert [(r["what"], r["encoding"], r["length"]) for r in rows] == [
        ("decode", "rope", 96),
        ("decode", "string", 96),
        ("decode", "dual-chunk", 96),
    ]
    assert [r["kernel"] for r in rows] == ["sdpa-cache", "two-part", "dual-chunk"]  # the kernels decoding runs
    assert all(r["tokens_per_second"] > 0 for r in rows)


def test_decoding_summary_gives_each_encodings_time_against_ropes():
    def row(encoding, tps):
        return bench.BenchRow("decode", "extrapolate", encoding, 16384, tps, float("nan"), "k", "bfloat16")

    assert bench.summary_lines([row("rope", 40.0), row("string", 10.0)]) == [
        "- decoding after 16384 tokens (batch 1, same process): rope 40.0 tok/s; string 10.0 tok/s (4.00× RoPE's time)"
    ]


def test_the_decoding_ratios_quoted_come_from_the_committed_bench_files():
    from pathlib import Path

    import pandas as pd

    from extrapolate.bench.measure import BenchRow, summary_lines

    root = Path(__file__).resolve().parents[1]
    fields = list(BenchRow.__dataclass_fields__)
    ratios = {}
    for stage in ("before", "after"):
        frame = pd.read_csv(root / "results" / "bench-decode" / stage / "bench.csv")
        rows = [
            BenchRow(**{k: (None if pd.isna(v) else v) for k, v in r.items() if k in fields})
            for r in frame.to_dict("records")
        ]
        (line,) = [x for x in summary_lines(rows) if x.startswith("- decoding after 16384")]
        ratios[stage] = {
            part.split()[0]: part.split("(")[1].split("×")[0]
            for part in line.split(": ", 1)[1].split("; ")
            if "(" in part
        }
    readme = (root / "results" / "bench-decode" / "README.md").read_text()
    names = {"string": "STRING", "self-extend": "Self-Extend", "streaming-llm": "StreamingLLM"}
    names |= {"lm-infinite": "LM-Infinite", "dual-chunk": "dual chunk attention"}
    for encoding, label in names.items():
        assert f"| {label} | {ratios['before'][encoding]}× | {ratios['after'][encoding]}× |" in readme, encoding
    doc = " ".join((root / "docs" / "performance.md").read_text().split())
    assert f"STRING {ratios['before']['string']}× → {ratios['after']['string']}× RoPE's time" in doc
    assert f"Self-Extend {ratios['before']['self-extend']}× → {ratios['after']['self-extend']}×" in doc
    assert f"dual chunk attention {ratios['before']['dual-chunk']}× → {ratios['after']['dual-chunk']}×" in doc
    assert f"({ratios['after']['streaming-llm']}×, {ratios['after']['lm-infinite']}×)" in doc


def test_a_retrieval_row_times_one_depth_as_the_evaluation_runs_it(monkeypatch):
    """The depth's prompts go through the evaluation's own passes (a shared trunk, micro-batches of the budget,
    greedy answers): with a budget of one prompt, one pass a prompt; tokens/s is the suffix tokens over the time."""
    from extrapolate.bench import retrieval
    from extrapolate.tasks import prompt_passes

    calls = []
    greedy = prompt_passes.greedy_answers
    monkeypatch.setattr(
        prompt_passes,
        "greedy_answers",
        lambda m, c, last, *a, **k: calls.append(len(last)) or greedy(m, c, last, *a, **k),
    )
    monkeypatch.setattr(
        retrieval,
        "eval_memory",
        lambda device, asked: prompt_passes.prompt_bytes(bench.model_config("tiny", "rope", 96), 96, 48),
    )
    row = retrieval.retrieval_worker(("tiny", 96, "cpu", "float32", 3, 32, 96))
    assert calls == [1, 1, 1]  # three prompts, a micro-batch each
    assert row["what"] == "retrieval" and row["length"] == 96 and row["seconds"] > 0
    assert row["prompts"] == 3 and row["tokens_per_second"] == pytest.approx(3 * 48 / row["seconds"], rel=1e-9)
    line = retrieval.retrieval_lines([bench.BenchRow(**row)])
    budget, seconds, peak = row["memory_budget"], row["seconds"], row["peak_memory_mb"]
    expected = f"- retrieval at 96 (3 prompts of one depth in micro-batches, budget {budget}): {seconds:.1f} s"
    assert line == [f"{expected}, peak {peak:,.0f} MB"]


def test_an_encoding_the_preset_cannot_take_is_refused_before_any_timing(tmp_path):
    """rope-nope's NoPE layer is every 4th: the 2-layer `tiny` has none, said before rope is timed."""
    from typer.testing import CliRunner

    from extrapolate.cli.app import app

    args = ["bench", "--model", "tiny", "--encodings", "rope,rope-nope", "--eval-lens", "256", "--no-transformers"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "bench")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no NoPE layer in a model of 2 layers" in lines[0], result.output
    assert not (tmp_path / "bench").exists()
