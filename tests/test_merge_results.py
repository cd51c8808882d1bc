"""scripts/merge_results.py: a folder of runs made apart merges back into the folder it was split from, rows,
records and answers, and gives the same folder; a run measured differently in the two is refused."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from extrapolate.report.table import key_strings
from tests.helpers import load_script

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "showcase-vt-learned"


def split(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """The committed two-run folder cut in two: `whole` keeps RoPE's run, `part` holds ALiBi's."""
    rows = pd.read_csv(COMMITTED / "results.csv")
    keep, moved = (str(rows[rows.encoding == e].run_id.iloc[0]) for e in ("rope", "alibi"))
    folders = {}
    for name, run in (("whole", keep), ("part", moved)):
        folder = tmp_path / name
        (folder / "runs").mkdir(parents=True)
        (folder / "samples").mkdir()
        rows[rows.run_id == run].to_csv(folder / "results.csv", index=False)
        shutil.copy(COMMITTED / "runs" / f"{run}.json", folder / "runs")
        shutil.copy(COMMITTED / "samples" / f"{run}.jsonl", folder / "samples")
        folders[name] = folder
    return folders["whole"], folders["part"], keep, moved


def sorted_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path)
    return rows.assign(_k=key_strings(rows, ["run_id", "task", "eval_len", "metric"])).sort_values("_k")


def test_a_part_merges_back_into_the_whole(tmp_path):
    whole, part, _, moved = split(tmp_path)
    (whole / ".partial").mkdir()
    stale = whole / ".partial" / f"{moved}-passkey-256-rank0.json"  # a batch log of the cell the part finished
    stale.write_text("{}")
    script = load_script("merge_results")
    assert script.main([str(part), str(whole)]) == 0
    merged = sorted_rows(whole / "results.csv")
    expected = sorted_rows(COMMITTED / "results.csv")
    assert merged["_k"].tolist() == expected["_k"].tolist()
    assert merged["value"].tolist() == pytest.approx(expected["value"].tolist())
    assert (whole / "samples" / f"{moved}.jsonl").read_bytes() == (part / "samples" / f"{moved}.jsonl").read_bytes()
    assert (whole / "runs" / f"{moved}.json").is_file()
    assert not stale.exists()
    assert "alibi" in (whole / "report.md").read_text()
    # merging again changes nothing
    before = (whole / "results.csv").read_text()
    assert script.main([str(part), str(whole)]) == 0
    assert (whole / "results.csv").read_text() == before


def test_a_run_measured_differently_is_refused_and_nothing_written(tmp_path, capsys):
    whole, part, _, moved = split(tmp_path)
    script = load_script("merge_results")
    assert script.main([str(part), str(whole)]) == 0
    rows = pd.read_csv(part / "results.csv")
    rows.loc[rows.index[0], "value"] += 0.5
    rows.to_csv(part / "results.csv", index=False)
    before = (whole / "results.csv").read_text()
    assert script.main([str(part), str(whole)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 rows differ, nothing merged") and moved in err and len(err.splitlines()) == 1
    assert (whole / "results.csv").read_text() == before


def test_a_folder_without_a_table_is_a_one_line_error(tmp_path, capsys):
    script = load_script("merge_results")
    assert script.main([str(tmp_path / "none"), str(tmp_path / "whole")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
