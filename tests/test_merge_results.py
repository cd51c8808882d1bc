"""scripts/merge_results.py: a folder of cells made apart merges back into the folder it was split from, rows,
records and answers, and gives the same folder, whether split by run or by length within one run; a row or
answer measured differently in the two is refused with nothing written."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from extrapolate.report.table import key_strings
from tests.helpers import load_script

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "showcase-vt-learned"


def make_folder(folder: Path, rows: pd.DataFrame) -> Path:
    """A results folder of the committed rows given, with their runs' records and the answers of their cells."""
    (folder / "runs").mkdir(parents=True)
    (folder / "samples").mkdir()
    rows.to_csv(folder / "results.csv", index=False)
    for run in rows.run_id.unique():
        shutil.copy(COMMITTED / "runs" / f"{run}.json", folder / "runs")
        cells = set(rows[rows.run_id == run].eval_len)
        lines = (COMMITTED / "samples" / f"{run}.jsonl").read_text().splitlines()
        (folder / "samples" / f"{run}.jsonl").write_text(
            "".join(line + "\n" for line in lines if json.loads(line)["eval_len"] in cells)
        )
    return folder


def committed() -> pd.DataFrame:
    return pd.read_csv(COMMITTED / "results.csv", dtype={"run_id": str})


def sorted_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path, dtype={"run_id": str})
    return rows.assign(_k=key_strings(rows, ["run_id", "task", "eval_len", "metric"])).sort_values("_k")


def assert_whole(folder: Path) -> None:
    merged, expected = sorted_rows(folder / "results.csv"), sorted_rows(COMMITTED / "results.csv")
    assert merged["_k"].tolist() == expected["_k"].tolist()
    assert merged["value"].tolist() == pytest.approx(expected["value"].tolist())
    for run in expected.run_id.unique():
        lines = sorted((folder / "samples" / f"{run}.jsonl").read_text().splitlines())
        assert lines == sorted((COMMITTED / "samples" / f"{run}.jsonl").read_text().splitlines())
        assert (folder / "runs" / f"{run}.json").is_file()


def test_a_run_made_apart_merges_back_and_merging_again_changes_nothing(tmp_path):
    rows = committed()
    whole = make_folder(tmp_path / "whole", rows[rows.encoding == "rope"])
    part = make_folder(tmp_path / "part", rows[rows.encoding == "alibi"])
    moved = rows[rows.encoding == "alibi"].run_id.iloc[0]
    (whole / ".partial").mkdir()
    stale = whole / ".partial" / f"{moved}-ruler-256-rank0.json"  # a batch log of a cell the part finished
    stale.write_text("{}")
    script = load_script("merge_results")
    assert script.main([str(part), str(whole)]) == 0
    assert_whole(whole)
    assert not stale.exists()
    assert "alibi" in (whole / "report.md").read_text()
    before = (whole / "results.csv").read_text()
    assert script.main([str(part), str(whole)]) == 0
    assert (whole / "results.csv").read_text() == before


def test_one_run_split_by_length_merges_cell_by_cell(tmp_path):
    rows = committed()
    short = rows.eval_len <= 512
    whole = make_folder(tmp_path / "whole", rows[short])
    part = make_folder(tmp_path / "part", rows[~short])
    (whole / ".partial").mkdir()
    run = rows.run_id.iloc[0]
    running = whole / ".partial" / f"{run}-ruler-4096-rank0.json"  # a cell at a length neither folder has
    running.write_text("{}")
    assert load_script("merge_results").main([str(part), str(whole)]) == 0
    assert_whole(whole)
    assert running.exists()  # a cell not merged keeps its log


def test_a_row_or_answer_measured_differently_is_refused_and_nothing_written(tmp_path, capsys):
    rows = committed()
    whole = make_folder(tmp_path / "whole", rows)
    part = make_folder(tmp_path / "part", rows[rows.encoding == "alibi"])
    changed = pd.read_csv(part / "results.csv", dtype={"run_id": str})
    changed.loc[changed.index[0], "value"] += 0.5
    changed.to_csv(part / "results.csv", index=False)
    script = load_script("merge_results")
    (whole / ".table.lock").touch()  # the lock file the merge takes: the one file it may add

    def files() -> dict:
        return {p: p.read_bytes() for p in whole.rglob("*") if p.is_file()}

    before = files()
    assert script.main([str(part), str(whole)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 rows or answers differ, nothing merged") and len(err.splitlines()) == 1
    # the rows agree, one answer does not
    make_folder(tmp_path / "part2", rows[rows.encoding == "alibi"])
    samples = next((tmp_path / "part2" / "samples").glob("*.jsonl"))
    lines = samples.read_text().splitlines()
    first = json.loads(lines[0]) | {"prediction": "something else"}
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert script.main([str(tmp_path / "part2"), str(whole)]) == 2
    assert "answered differently" in capsys.readouterr().err
    assert files() == before


@pytest.mark.parametrize("case", ["no table", "no target", "a row twice"])
def test_bad_input_is_a_one_line_error(tmp_path, capsys, case):
    rows = committed()
    part = make_folder(tmp_path / "part", rows[rows.encoding == "alibi"])
    whole = make_folder(tmp_path / "whole", rows[rows.encoding == "rope"])
    if case == "no table":
        part = tmp_path / "none"
    elif case == "no target":
        whole = tmp_path / "typo"
    else:
        doubled = pd.read_csv(part / "results.csv", dtype={"run_id": str})
        pd.concat([doubled, doubled.iloc[:1]]).to_csv(part / "results.csv", index=False)
    assert load_script("merge_results").main([str(part), str(whole)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "typo").exists()
