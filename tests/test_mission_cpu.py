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


def test_the_mission_folder_states_its_rows():
    rows = pd.read_csv(MISSION / "results.csv")
    readme = flat(MISSION / "README.md")
    record = json.loads((MISSION / "run.json").read_text())
    assert record["training"]["train_seconds"] + record["evaluation"]["seconds"] <= estimates()["mission"]["run_s"]
    at_l = rows[(rows.eval_len == 4096) & (rows.metric == "accuracy")]
    assert len(at_l) == 5 and at_l["n"].sum() == 100 and (at_l["value"] == 0).all()
    retrieval = next(
        line for line in (MISSION / "report.md").read_text().splitlines() if "**not learned at L**" in line
    )
    quoted = retrieval.split(" | ")[4]  # the cell at 4096, with its exact interval over the 100 prompts
    assert (
        quoted == "0% [0–4]"
        and f"0% of the 100 passkey prompts at 4096 ({quoted[3:]}, exact 95%)" in readme
        and "not learned at L" in flat(MISSION / "report.md")
    )
    ppl = rows[(rows.metric == "ppl") & (rows.eval_len == 4096)]["value"].iloc[0]
    assert f"perplexity at 4096 is {ppl:.1f}" in readme
    relative = next(
        line for line in (MISSION / "report.md").read_text().splitlines() if line.startswith("| yarn | 4096 | 1.00×")
    )
    assert relative.rstrip(" |").endswith("1.02× [1.01–1.02]") and "1.02× [1.01–1.02] that" in readme
    assert f"about {round(estimates()['mission']['run_s'] / 60)} minutes" in readme
