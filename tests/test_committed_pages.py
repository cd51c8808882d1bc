"""Every committed results folder's report.md and summary.md are what `extrapolate report` writes from its
results table today: a folder whose table, samples or training log changed (answers recovered, intervals added)
or whose pages the report code now writes differently fails here until `extrapolate report FOLDER` is run."""

import shutil

import pytest

from extrapolate.report.pages import write_report

from .helpers import ROOT, project_files

RESULTS = ROOT / "results"
# the committed folders only: a user's own results folders are ignored by git and may be written by older code
FOLDERS = sorted(p.parent.name for p in project_files("results/*/report.md") if (p.parent / "results.csv").exists())
PAGES = ("report.md", "summary.md")


def test_there_are_committed_reports_to_check():
    assert {"showcase", "showcase-seeds", "smollm2-retrieval", "reference"} <= set(FOLDERS)


@pytest.mark.parametrize("name", FOLDERS)
def test_a_committed_report_is_what_the_report_command_writes(name, tmp_path):
    folder = tmp_path / name
    shutil.copytree(RESULTS / name, folder)
    write_report(folder)
    for page in PAGES:
        committed = RESULTS / name / page
        if committed.exists():
            assert (folder / page).read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), (
                f"results/{name}/{page} is not what the report code writes: run `extrapolate report results/{name}`"
            )


def test_every_folder_says_which_rows_predate_the_machine_column():
    """A committed row names the machine it ran on, or its folder's README counts the rows that predate it."""
    import pandas as pd

    for table in sorted((ROOT / "results").glob("*/results.csv")):
        rows = pd.read_csv(table)
        missing = len(rows) if "machine" not in rows else int(rows["machine"].isna().sum())
        readme = " ".join((table.parent / "README.md").read_text(encoding="utf-8").split())
        said = f"{missing} of {len(rows)} rows predate the `machine` column"
        assert (said in readme) == (missing > 0), f"{table.parent.name}: {said}"


def test_every_run_has_its_record_or_its_folder_names_it():
    import pandas as pd

    for table in sorted((ROOT / "results").glob("*/results.csv")):
        runs = sorted(pd.read_csv(table)["run_id"].astype(str).unique())
        recorded = {path.stem for path in (table.parent / "runs").glob("*.json")}
        missing = [run for run in runs if run not in recorded]
        readme = " ".join((table.parent / "README.md").read_text(encoding="utf-8").split())
        if missing:
            assert f"{len(missing)} of the folder's {len(runs)} runs have no record" in readme, table.parent.name
            assert all(f"`{run}`" in readme for run in missing), table.parent.name


def test_the_remeasured_folder_says_why_with_the_numbers_of_both():
    """showcase-seeds-v2's README: seed 0's RoPE at L as trained again here, against the first folder's row."""
    import pandas as pd

    def at_l(folder: str) -> float:
        rows = pd.read_csv(ROOT / "results" / folder / "results.csv")
        rope = rows[(rows.encoding == "rope") & (rows.seed == 0) & (rows.eval_len == 256) & (rows.metric == "nll")]
        return float(rope["value"].iloc[0])

    readme = " ".join((ROOT / "results" / "showcase-seeds-v2" / "README.md").read_text(encoding="utf-8").split())
    assert f"scores {at_l('showcase-seeds-v2'):.3f} at L where the row says {at_l('showcase-seeds'):.3f}" in readme


def test_every_folder_the_results_index_lists_is_committed():
    """results/README.md's list of committed folders against the tree (a folder the ignore file leaves out is
    on the machine that made it and nowhere else)."""
    import re

    index = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- `([\w.-]+)/`:", index, flags=re.M)
    assert len(listed) > 10
    missing = [name for name in listed if not (ROOT / "results" / name / "README.md").is_file()]
    assert not missing, missing


def test_no_listed_folder_is_left_out_by_the_ignore_file():
    """The check above only fails on a clean clone; this one fails where the folder was made, before the commit."""
    import re
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    index = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- `([\w.-]+)/`:", index, flags=re.M)
    readmes = [f"results/{name}/README.md" for name in listed]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *readmes], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert not ignored, ignored
