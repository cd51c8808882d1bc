"""results/bench-attention quotes its rows: every ratio and memory figure in its README is computed here from
bench.csv and reach.csv, and the summary's lines are what `summary_lines` writes for bench.csv."""

from pathlib import Path

import pandas as pd

from extrapolate.bench.measure import summary_lines
from tests.helpers import bench_rows

FOLDER = Path(__file__).resolve().parent.parent / "results" / "bench-attention"


def times_rope(length: int, encoding: str) -> str:
    frame = pd.read_csv(FOLDER / "bench.csv")
    paired = frame[(frame.what == "eval-paired") & (frame.length == length)].set_index("encoding").tokens_per_second
    return f"{paired['rope'] / paired[encoding]:.2f}×"


def test_the_summary_is_what_the_bench_writes_for_its_rows():
    summary = (FOLDER / "summary.md").read_text()
    for line in summary_lines(bench_rows(FOLDER)):
        assert line in summary


def test_the_readme_quotes_the_rows():
    text = " ".join((FOLDER / "README.md").read_text().split())
    at16 = {name: times_rope(16384, name) for name in ("stick-breaking", "cope", "fox")}
    at4 = {name: times_rope(4096, name) for name in ("stick-breaking", "cope")}
    assert f"stick-breaking takes {at16['stick-breaking']} RoPE's time, CoPE {at16['cope']} (FoX {at16['fox']})" in text
    assert f"at 4096 {at4['stick-breaking'].rstrip('×')}× and {at4['cope']}" in text
    frame = pd.read_csv(FOLDER / "bench.csv")
    memory = frame[(frame.what == "eval") & (frame.length == 16384)].set_index("encoding").peak_memory_mb
    assert (
        f"RoPE {memory['rope']:.0f} MB, stick-breaking {memory['stick-breaking']:.0f} MB, CoPE {memory['cope']:.0f} MB"
        in text
    )
    reach = pd.read_csv(FOLDER / "reach.csv").set_index(["regime", "encoding"]).vs_rope
    settling = (
        f"settling: stick-breaking {reach['settling', 'stick-breaking']:.2f}×, CoPE {reach['settling', 'cope']:.2f}×"
    )
    far = f"far: {reach['far', 'stick-breaking']:.2f}× and {reach['far', 'cope']:.2f}×"
    assert settling in text and far in text
    assert reach["far", "stick-breaking"] > 3 and reach["settling", "stick-breaking"] < 3  # what the page says


def test_every_row_names_its_machine():
    for name in ("bench.csv", "reach.csv"):
        frame = pd.read_csv(FOLDER / name)
        assert frame.cpu.str.contains("Xeon").all() and frame.torch.notna().all()
