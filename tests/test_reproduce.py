"""`reproduce`'s comparison rule, claims and suite files, on synthetic tables (no training)."""

import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from extrapolate.cli.app import app
from extrapolate.core.distributions import student_t_cdf, student_t_quantile
from extrapolate.core.errors import UserError
from extrapolate.report.table import COLUMNS
from extrapolate.reproduce import Rule, claims_over_seeds, compare, load_suite, measure_spread, quantities, read_spread
from extrapolate.reproduce.quantities import write_spread
from extrapolate.reproduce.suite import SUITES_DIR

L = 128
DEPTHS = (0.0, 0.5, 1.0)
TRIALS = 10


def table(
    nll: dict[tuple[str, int], float],
    accuracy: dict[tuple[str, int], list[float]] | None = None,
    seed: int = 0,
    statuses: dict | None = None,
) -> pd.DataFrame:
    """A results table: nll/ppl cells per (encoding, length), accuracy cells per depth."""
    rows = []
    base = {c: None for c in COLUMNS} | {"run_id": f"r{seed}", "train_len": L, "seed": seed, "protocol": "p"}
    for (encoding, length), value in nll.items():
        status = (statuses or {}).get((encoding, length), "ok")
        for metric, v in (("nll", value), ("ppl", math.exp(value))):
            rows.append(
                base
                | {
                    "encoding": encoding,
                    "eval_len": length,
                    "task": "perplexity",
                    "metric": metric,
                    "value": v if status == "ok" else float("nan"),
                    "n_tokens": 4096,
                    "status": status,
                }
            )
    for (encoding, length), per_depth in (accuracy or {}).items():
        for depth, v in zip(DEPTHS, per_depth):
            rows.append(
                base
                | {
                    "encoding": encoding,
                    "eval_len": length,
                    "task": "passkey",
                    "metric": "accuracy",
                    "value": v,
                    "depth": depth,
                    "n_tokens": TRIALS * length,
                    "status": "ok",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.fixture
def suite():
    return load_suite("reference")


def spread_for(reference_nll: float, sd: float, n: int = 8) -> pd.DataFrame:
    """Seed tables whose NLL at (rope, L) has exactly standard deviation `sd` around `reference_nll`."""
    half = n // 2
    offsets = [sd * math.sqrt((n - 1) / n)] * half + [-sd * math.sqrt((n - 1) / n)] * half
    tables = [
        table({("rope", L): reference_nll + o}, {("rope", L): [0.5, 0.5, 0.5]}, seed=i) for i, o in enumerate(offsets)
    ]
    return measure_spread(tables)


def test_student_t_quantiles_match_the_table():
    for df, value in ((1, 12.706), (2, 4.303), (4, 2.776), (7, 2.365), (30, 2.042)):
        assert student_t_quantile(0.975, df) == pytest.approx(value, abs=1e-3)
    assert student_t_cdf(student_t_quantile(0.9999, 7), 7) == pytest.approx(0.9999, abs=1e-9)
    assert student_t_quantile(0.025, 5) == pytest.approx(-student_t_quantile(0.975, 5))


def test_measured_spread_is_the_seed_standard_deviation():
    spread = spread_for(2.0, 0.02)
    row = spread[spread["metric"] == "nll"].iloc[0]
    assert row["sd"] == pytest.approx(0.02) and row["n_seeds"] == 8 and row["mean"] == pytest.approx(2.0)


def test_tolerance_follows_the_rule():
    rule = Rule(confidence=0.99, nll_floor=0.005, n_quantities=10)
    row = {"metric": "nll", "n_seeds": 8, "sd": 0.02, "mean": 2.0, "trials": 4096}
    k = math.sqrt(1 + 1 / 8) * student_t_quantile(1 - 0.01 / 20, 7)
    assert rule.tolerance(row) == pytest.approx(k * 0.02)
    assert rule.tolerance(row | {"sd": 0.0}) == 0.005  # the floor
    more_seeds = Rule(0.99, 0.005, 10).multiplier(16)
    assert more_seeds < rule.multiplier(8)  # a better-measured spread gives a tighter bound


def test_a_quantity_just_inside_passes_and_just_outside_fails(suite):
    spread = spread_for(2.0, 0.02)
    tolerance = Rule(suite.confidence, suite.nll_floor, len(spread)).tolerance(
        spread[spread["metric"] == "nll"].iloc[0].to_dict()
    )
    reference = table({("rope", L): 2.0}, {("rope", L): [0.5, 0.5, 0.5]})
    inside = compare(
        reference, table({("rope", L): 2.0 + 0.99 * tolerance}, {("rope", L): [0.5, 0.5, 0.5]}), spread, suite
    )
    outside = compare(
        reference, table({("rope", L): 2.0 - 1.01 * tolerance}, {("rope", L): [0.5, 0.5, 0.5]}), spread, suite
    )
    assert inside.failing.empty
    assert list(outside.failing["metric"]) == ["nll"] and not outside.ok


def test_a_committed_value_outside_the_rule_fails_though_the_fresh_run_is_inside(suite):
    """The committed reference is checked too: a number edited by hand (or made by other code) is named."""
    spread = spread_for(2.0, 0.02)
    tolerance = Rule(suite.confidence, suite.nll_floor, len(spread)).tolerance(
        spread[spread["metric"] == "nll"].iloc[0].to_dict()
    )
    fresh = table({("rope", L): 2.0}, {("rope", L): [0.5, 0.5, 0.5]})
    edited = table({("rope", L): 2.0 + 1.01 * tolerance}, {("rope", L): [0.5, 0.5, 0.5]})
    comparison = compare(edited, fresh, spread, suite)
    assert list(comparison.failing["metric"]) == ["nll"] and not comparison.ok
    assert comparison.failing["verdict"].iloc[0].startswith("committed value")
    assert compare(fresh, fresh, spread, suite).failing.empty


def test_accuracy_is_compared_as_the_mean_over_depths(suite):
    spread = spread_for(2.0, 0.02)
    reference = table({("rope", L): 2.0}, {("rope", L): [0.5, 0.5, 0.5]})
    # one depth moves by 0.4 (a 10-trial cell), the mean over depths does not move: nothing fails
    shifted = compare(reference, table({("rope", L): 2.0}, {("rope", L): [0.9, 0.1, 0.5]}), spread, suite)
    assert shifted.failing.empty
    # the mean itself moves far beyond binomial noise of 30 prompts: fails
    moved = compare(reference, table({("rope", L): 2.0}, {("rope", L): [1.0, 1.0, 1.0]}), spread, suite)
    assert list(moved.failing["metric"]) == ["accuracy"]


def test_binomial_floor_lets_an_all_zero_cell_take_a_hit():
    rule = Rule(0.99, 0.005, 40)
    row = {"metric": "accuracy", "n_seeds": 8, "sd": 0.0, "mean": 0.0, "trials": 50}
    assert 0.02 < rule.tolerance(row) < 0.2


def test_missing_quantities_and_changed_statuses_fail(suite):
    spread = spread_for(2.0, 0.02)
    reference = table({("rope", L): 2.0, ("rope", 2 * L): 2.5}, {("rope", L): [0.5, 0.5, 0.5]})
    missing = compare(reference, table({("rope", L): 2.0}, {("rope", L): [0.5, 0.5, 0.5]}), spread, suite)
    assert "missing" in set(missing.checks["verdict"]) and not missing.ok
    status = compare(
        reference,
        table(
            {("rope", L): 2.0, ("rope", 2 * L): 2.5}, {("rope", L): [0.5, 0.5, 0.5]}, statuses={("rope", 2 * L): "oom"}
        ),
        spread,
        suite,
    )
    assert not status.ok and len(status.cells) == 2  # the nll and the ppl cell


def test_no_spread_for_a_quantity_fails(suite):
    reference = table({("rope", L): 2.0, ("alibi", L): 2.1})
    result = compare(reference, reference, spread_for(2.0, 0.02), suite)
    assert set(result.failing["verdict"]) == {"no spread measured"}


def test_a_claim_that_fails_is_reported(suite):
    flat = table({(e, n): 2.0 for e in ("rope", "sinusoidal", "alibi", "ntk", "yarn") for n in (L, 4 * L, 8 * L)})
    claims = dict((text, holds) for text, holds, _ in compare(flat, flat, spread_for(2.0, 0.02), suite).claims)
    assert not claims[next(t for t in claims if t.startswith("RoPE degrades"))]
    assert claims[next(t for t in claims if t.startswith("ALiBi stays flat"))]


def test_a_claim_must_hold_for_every_seed(suite):
    good = {
        (e, n): 2.0
        + (0.6 if e in ("rope", "sinusoidal") and n == 8 * L else 0.0)
        - (0.1 if e in ("ntk", "yarn") and n >= 4 * L else 0.0)
        for e in ("rope", "sinusoidal", "alibi", "ntk", "yarn")
        for n in (L, 4 * L, 8 * L)
    }
    bad = dict(good) | {("rope", 8 * L): 2.0}
    over = claims_over_seeds([table(good, seed=0), table(bad, seed=1)], suite)
    rope = next(c for c in over if c[0].startswith("RoPE degrades"))
    assert not rope[1] and "1 of 2" in rope[2]
    assert all(holds for text, holds, _ in over if not text.startswith("RoPE degrades"))


def test_quantities_need_every_depth_ok():
    frame = table({}, {("rope", L): [1.0, 1.0, 1.0]})
    frame.loc[frame.index[0], "status"] = "oom"
    assert quantities(frame)["status"].tolist() == ["oom"]


def write_suite(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return str(path)


GOOD = (SUITES_DIR / "reference.toml").read_text()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "missing field"),
        (GOOD[: len(GOOD) // 3], "mine.toml"),
        ("\x00\x01 garbage = = =", "not valid TOML"),
        (GOOD.replace("lr = 3e-3", "lr = nan"), "lr"),
        (GOOD.replace("lr = 3e-3", "lr = -inf"), "lr"),
        (GOOD.replace("steps = 500", "steps = 0"), "steps"),
        (GOOD.replace("seeds = [1, 2, 3, 4, 5, 6, 7]", "seeds = [1]"), "at least 2 seeds"),
        (GOOD.replace("seeds = [1, 2, 3, 4, 5, 6, 7]", "seeds = [0, 1, 2]"), "must not repeat"),
        (GOOD.replace("confidence = 0.99", "confidence = 1.5"), "confidence"),
        (GOOD.replace('kind = "lower_than"', 'kind = "bigger"', 1), "claim"),
        (GOOD.replace('name = "reference"', 'name = "../../elsewhere"'), "names a folder under results/"),
        (GOOD.replace("[spread]", "[spread]\nrepeats = 3"), "spread: unknown field 'repeats'"),
        (GOOD.replace("steps = 500", "steps = 500\nstep = 50"), "unknown field 'step'"),
        (GOOD.replace("[[claims]]", "[[claims]]\nlength = 3", 1), "claim 1: unknown field 'length'"),
        ("spread = 5\n" + GOOD.split("[spread]")[0] + "[[claims]]" + GOOD.split("[[claims]]", 1)[1], "a table"),
        (GOOD.replace("eval_lens = [128,", "eval_lens = [64, 128,"), "eval_lens must be at least train_len"),
    ],
)
def test_malformed_suite_files_fail_in_one_line(tmp_path, text, needle):
    path = write_suite(tmp_path, text)
    with pytest.raises(UserError, match="(?i)" + needle.replace("(", r"\(")):
        load_suite(path)
    result = CliRunner().invoke(app, ["reproduce", "--suite", path])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_unknown_suite_names_the_known_ones():
    with pytest.raises(UserError, match="reference"):
        load_suite("referense")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "encoding,eval_len\n",
        "garbage\x00\n1,2,3\n",
        "encoding,eval_len,task,metric,n_seeds,trials,mean,sd,min,max\nrope,x,p,nll,8,1,2,0.1,1,3\n",
        "encoding,eval_len,task,metric,n_seeds,trials,mean,sd,min,max\nrope,128,p,nll,8,1,2,-1,1,3\n",
    ],
)
def test_malformed_spread_files_fail_cleanly(tmp_path, text):
    (tmp_path / "spread.csv").write_text(text)
    with pytest.raises(UserError, match="spread"):
        read_spread(tmp_path)


def test_spread_file_round_trip(tmp_path):
    spread = spread_for(2.0, 0.02)
    write_spread(tmp_path, spread)
    back = read_spread(tmp_path)
    assert back["sd"].tolist() == pytest.approx(spread["sd"].tolist(), rel=1e-5)
    assert back["eval_len"].tolist() == spread["eval_len"].tolist()


def test_installing_a_reference_carries_its_runs_and_answers_and_drops_the_old_ones(tmp_path, monkeypatch):
    import shutil

    from extrapolate.report import pages
    from extrapolate.reproduce.job import install_reference

    monkeypatch.setattr(pages, "write_report", lambda folder: None)  # the pages are not what is tested here
    fresh, target = tmp_path / "fresh", tmp_path / "reference"
    for folder, run in ((fresh, "new"), (target, "old")):
        (folder / "samples").mkdir(parents=True)
        (folder / "runs").mkdir()
        (folder / "samples" / f"{run}.jsonl").write_text('{"score": 1}\n')
        (folder / "runs" / f"{run}.json").write_text("{}")
    shutil.rmtree(fresh / "runs")  # a fresh run without records: the old ones go all the same
    (fresh / "spread-seeds").mkdir()  # the spread seeds' scratch run stays behind
    (fresh / "results.csv").write_text("run_id,task\n")
    install_reference(fresh, target)
    assert [p.name for p in (target / "samples").iterdir()] == ["new.jsonl"]
    assert not (target / "runs").exists()
    assert not (target / "spread-seeds").exists()


def test_a_spread_run_keeps_every_seeds_quantities_beside_the_spread(tmp_path, monkeypatch, suite):
    """`reproduce --update --spread` writes spread-seeds.csv: a per-seed number (a claim's ratio for one seed)
    is then read from a committed file, and the spread re-derives from it."""
    from extrapolate.reproduce import job
    from extrapolate.reproduce.quantities import QUANTITY_KEY, SEEDS_FILE

    cells = {
        (e, n): 2.0 + (0.6 if e in ("rope", "sinusoidal") and n == 8 * L else 0.0)
        for e in ("rope",)
        for n in (L, 8 * L)
    }
    tables = {s: table({k: v + 0.01 * s for k, v in cells.items()}, seed=s) for s in (0, *suite.spread_seeds)}

    def run_suite(suite, folder, reporter, seeds=None, fresh_models=True):
        return pd.concat([tables[s] for s in seeds], ignore_index=True) if seeds else tables[0]

    monkeypatch.setattr(job, "run_suite", run_suite)
    monkeypatch.setattr(job, "reference_folder", lambda suite: tmp_path / "reference")
    monkeypatch.setattr(job, "install_reference", lambda fresh, target: target.mkdir(parents=True, exist_ok=True))
    monkeypatch.setattr(job, "claims_over_seeds", lambda tables, suite: [])
    job.update(suite, None, tmp_path / "fresh", spread=True)
    per_seed = pd.read_csv(tmp_path / "reference" / SEEDS_FILE)
    assert sorted(per_seed["seed"].unique()) == sorted({0, *suite.spread_seeds})
    rope_8l = per_seed[(per_seed.metric == "nll") & (per_seed.eval_len == 8 * L)].set_index("seed")["value"]
    assert rope_8l[3] == pytest.approx(2.63)
    spread = read_spread(tmp_path / "reference").set_index(QUANTITY_KEY)["sd"]
    again = per_seed.groupby(QUANTITY_KEY)["value"].std()  # the spread, from the per-seed file alone
    assert again.loc[spread.index].tolist() == pytest.approx(spread.tolist(), rel=1e-4)
