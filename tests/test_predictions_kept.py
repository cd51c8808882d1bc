"""Every committed results folder keeps what its models answered (`samples/<run id>.jsonl`) for each run with
retrieval or RULER rows, and every samples file gives back its rows: a cell's mean score is the value the table
holds."""

from pathlib import Path

import pandas as pd
import pytest

from extrapolate.report.samples import load_samples

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(path.parent for path in (ROOT / "results").glob("*/results.csv"))


def retrieval_rows(folder: Path) -> pd.DataFrame:
    rows = pd.read_csv(folder / "results.csv")
    rows = rows[(rows["task"] != "perplexity") & (rows["status"].fillna("ok") == "ok")]
    return rows.assign(run_id=rows["run_id"].astype(str))


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_a_folder_keeps_the_predictions_of_every_run(folder):
    runs = list(dict.fromkeys(retrieval_rows(folder)["run_id"]))
    missing = [run for run in runs if not (folder / "samples" / f"{run}.jsonl").exists()]
    assert not missing, f"{folder.name}: runs without samples/<run id>.jsonl: {missing}"


@pytest.mark.parametrize("folder", [f for f in FOLDERS if (f / "samples").is_dir()], ids=lambda path: path.name)
def test_every_samples_file_gives_back_its_rows(folder):
    rows = retrieval_rows(folder)
    rows = rows[rows["metric"].isin(["accuracy", "score"])]
    samples = load_samples(folder)
    if samples.empty:  # only perplexity's and LongPPL's per-document lines
        assert rows.empty, f"{folder.name}: retrieval rows without their prompts' samples"
        pytest.skip("no prompt's samples, and no retrieval row to give back")
    if "depth" not in samples:
        samples = samples.assign(depth=float("nan"))
    # a passkey cell is one (length, depth), a RULER cell one length (its depth empty)
    by = ["run_id", "protocol", "eval_len", "depth"]
    means = samples.assign(depth=samples["depth"].fillna(-1.0)).groupby(by)["score"].mean()
    kept = rows[rows["run_id"].isin(samples["run_id"].unique())]
    assert not kept.empty
    for row in kept.itertuples():
        key = (row.run_id, row.protocol, row.eval_len, -1.0 if pd.isna(row.depth) else row.depth)
        assert means.loc[key] == pytest.approx(row.value, abs=1e-6), (folder.name, key)


@pytest.mark.parametrize("folder", [f for f in FOLDERS if (f / "samples").is_dir()], ids=lambda path: path.name)
def test_every_samples_file_gives_back_its_rank_rows(folder):
    """A passkey cell's rank score is the share of its prompts whose true answer was ranked first, and each
    prompt's rank margin says so by its sign. A cell whose rank did not come back when it was measured again
    (scripts/recover_samples.py) has every prompt's rank empty, none of it half."""
    rows = retrieval_rows(folder)
    samples = load_samples(folder)
    if "ranked_first" not in samples:
        pytest.skip("no samples with a rank score")
    cell = ["run_id", "protocol", "eval_len", "depth"]
    known = samples.assign(known=samples["ranked_first"].notna()).groupby(cell)["known"]
    assert (known.all() | ~known.any()).all(), f"{folder.name}: a cell with some of its prompts' ranks empty"
    unknown = set(known.any()[lambda kept: ~kept].index)
    samples = samples[samples["ranked_first"].notna()]
    if "rank_margin" in samples:  # kept to four decimals: a margin that rounds to 0 has either rank
        margins = samples[samples["rank_margin"].notna()]
        first = margins["ranked_first"].astype(bool)
        assert (margins["rank_margin"][first] >= 0).all() and (margins["rank_margin"][~first] <= 0).all()
    means = samples.assign(ranked_first=samples["ranked_first"].astype(float))
    means = means.groupby(cell)["ranked_first"].mean()
    kept = rows[(rows["metric"] == "rank_accuracy") & rows["run_id"].isin(samples["run_id"].unique())]
    for row in kept.itertuples():
        key = (row.run_id, row.protocol, row.eval_len, row.depth)
        if key not in unknown:
            assert means.loc[key] == pytest.approx(row.value, abs=1e-6), (folder.name, key)
