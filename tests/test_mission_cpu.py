"""The numbers README.md, results/mission-cpu and results/bench-estimate state about the mission's command are
the committed files' (estimate.csv, the run's rows, record and report)."""

import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MISSION = ROOT / "results" / "mission-cpu"


def flat(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def estimates() -> dict:
    return {
        row["case"]: row for row in pd.read_csv(ROOT / "results" / "bench-estimate" / "estimate.csv").to_dict("records")
    }


def test_the_readme_quotes_the_measured_time_and_estimate():
    mission = estimates()["mission"]
    readme = flat(ROOT / "README.md")
    took, said = round(mission["run_s"] / 60), round(mission["estimate_s"] / 60)
    assert f"took {took} min on a 2-core CPU from an empty cache in one run (the dry run said {said})" in readme
    assert "on a GPU: not yet measured" in readme  # until a card has run it


def test_every_estimate_is_within_a_quarter_of_its_run():
    for case, row in estimates().items():
        assert row["ratio"] == round(row["estimate_s"] / row["run_s"], 3), case
        assert 0.75 <= row["ratio"] <= 1.25, case
    notes = flat(ROOT / "results" / "bench-estimate" / "NOTES.md")
    for row in estimates().values():
        assert f"{row['estimate_s']:.0f} s" in notes and f"{row['run_s']:.0f} s" in notes
        assert f"ratio {row['ratio']:.2f}" in notes


def report_line(start: str) -> list[str]:
    """The cells of the first report.md line that starts with `start`."""
    line = next(line for line in (MISSION / "report.md").read_text().splitlines() if line.startswith(start))
    return [cell.strip() for cell in line.strip(" |").split(" | ")]


def test_the_mission_folder_states_its_rows():
    rows = pd.read_csv(MISSION / "results.csv")
    readme = flat(MISSION / "README.md")
    record = json.loads((MISSION / "run.json").read_text())
    assert record["training"]["train_seconds"] + record["evaluation"]["seconds"] <= estimates()["mission"]["run_s"]
    stages = record["train_config"]["curriculum"]  # the default curriculum at L = 4096, as the README says
    assert stages == [[256, 600], [512, 150], [1024, 150], [2048, 150]] and record["train_config"]["steps"] == 1200
    assert "rows of 256 for 600 steps, then 512, 1024, 2048 and 4096 for 150 each" in readme
    at_l = rows[(rows.eval_len == 4096) & (rows.metric == "accuracy")]
    assert len(at_l) == 5 and at_l["n"].sum() == 100
    grid = report_line("| yarn | 4096 | yes |")  # the greedy grid: retrieves at L, then a cell a length
    assert grid[3] == "100% at every depth" and (at_l["value"] == 1).all()
    assert f"{grid[4].split()[0]} of the 100 passkey prompts at 4096 ({grid[4].split()[1]}, exact 95%)" in readme
    assert f"to 32768: {grid[7]}" in readme
    ppl = rows[(rows.metric == "ppl") & (rows.eval_len == 4096)]["value"].iloc[0]
    assert f"perplexity at 4096 is {ppl:.1f}" in readme
    relative = report_line("| yarn | 4096 | 1.00×")
    assert f"{relative[-1]} that" in readme  # the ratio at 32768, paired by document
    assert f"about {round(estimates()['mission']['run_s'] / 60)} minutes" in readme


def test_the_first_run_without_the_curriculum_is_kept_in_the_notes():
    notes = flat(MISSION / "NOTES.md")
    assert "`--curriculum none`" in notes and "0% of the 100 passkey prompts at 4096" in notes
    assert "perplexity at 4096 127.5" in notes
