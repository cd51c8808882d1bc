"""results/bench-fope-dape quotes its rows: every ratio and memory figure in its README is computed here from
bench.csv, and the summary's lines are what `summary_lines` writes for it."""

from pathlib import Path

import pandas as pd

from extrapolate.bench.measure import summary_lines
from tests.helpers import bench_rows

FOLDER = Path(__file__).resolve().parent.parent / "results" / "bench-fope-dape"


def test_the_summary_is_what_the_bench_writes_for_its_rows():
    rows = bench_rows(FOLDER)
    summary = (FOLDER / "summary.md").read_text()
    for line in summary_lines(rows):
        assert line in summary


def test_the_readme_quotes_the_rows():
    text = " ".join((FOLDER / "README.md").read_text().split())
    frame = pd.read_csv(FOLDER / "bench.csv")
    paired = frame[(frame.what == "eval-paired") & (frame.length == 16384)].set_index("encoding").tokens_per_second
    fope, dape = (paired["rope"] / paired[name] for name in ("fope", "dape"))
    assert f"FoPE takes {fope:.2f}× RoPE's time and DAPE {dape:.2f}×" in text
    memory = frame[(frame.what == "eval") & (frame.length == 16384)].set_index("encoding").peak_memory_mb
    assert f"RoPE {memory['rope']:.0f} MB, FoPE {memory['fope']:.0f} MB, DAPE {memory['dape']:.0f} MB" in text
    assert set(frame.cpu) == {"AMD EPYC"} and set(frame.threads) == {2} and "avx512_bf16" in frame.isa.iloc[0]


def test_the_readme_counts_the_mlps_work_at_the_small_models_shape():
    from extrapolate.core.config import PRESETS
    from extrapolate.encodings.options import DAPE_WIDTH

    text = " ".join((FOLDER / "README.md").read_text().split())
    size = PRESETS["small"]
    heads, head_dim = size["n_heads"], size["d_model"] // size["n_heads"]
    per_pair = 2 * heads * DAPE_WIDTH + DAPE_WIDTH * heads
    assert (
        f"({per_pair} at H = {heads}, w = {DAPE_WIDTH}), where attention itself does 2·d_head ({2 * head_dim})" in text
    )
