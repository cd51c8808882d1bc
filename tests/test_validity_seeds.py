"""The validity rule over several seeds (report/retrieval.py): each seed is a model of its own, so a cell past
L is the mean over the seeds whose model retrieves at L, and the verdict says how many do; intervals over
seeds stay inside the values a metric can take (report/stats.py)."""

import pandas as pd
import pytest

from extrapolate.report.retrieval import (
    NOT_LEARNED,
    RETRIEVES,
    across_seeds,
    counted_rows,
    retrieval_length,
    retrieval_matrix,
    verdicts_by_seed,
)
from extrapolate.report.stats import seeds_interval
from extrapolate.report.table import aggregate

L = 256


def rows(encoding: str, seed: int, accuracy: dict[int, float], base: str | None = None) -> list[dict]:
    return [
        {
            "encoding": encoding,
            "base_encoding": base or encoding,
            "seed": seed,
            "train_len": L,
            "eval_len": length,
            "task": "passkey",
            "metric": "accuracy",
            "depth": depth,
            "value": value,
            "status": "ok",
            "n": 100,
            "n_tokens": 100 * length,
            "ci_low": float("nan"),
            "ci_high": float("nan"),
        }
        for length, value in accuracy.items()
        for depth in (0.0, 0.5)
    ]


def three_seeds() -> pd.DataFrame:
    """RoPE: seeds 0 and 1 retrieve at L, seed 2 never learned the task; YaRN scales each seed's RoPE model."""
    table = []
    for seed, (at_L, past) in enumerate([(1.0, 0.3), (1.0, 0.5), (0.02, 0.0)]):
        table += rows("rope", seed, {L: at_L, 2 * L: past})
        table += rows("yarn", seed, {L: at_L, 2 * L: [0.9, 1.0, 0.0][seed]}, base="rope")
    return pd.DataFrame(table)


def test_each_seed_is_judged_on_its_own_model():
    table = three_seeds()
    by_seed = verdicts_by_seed(table, dict(zip(table.encoding, table.base_encoding)))
    assert [v.reason for v in by_seed["rope"].values()] == [RETRIEVES, RETRIEVES, NOT_LEARNED]
    assert [v.reason for v in by_seed["yarn"].values()] == [RETRIEVES, RETRIEVES, NOT_LEARNED]
    assert by_seed["yarn"][2].judge == "rope"  # seed 2's YaRN on seed 2's RoPE
    said = across_seeds(by_seed["yarn"])
    assert said.retrieves and said.text == "yes (rope) in 2 of 3 seeds (seed 2: mean 2% at L)"
    # the mean over three seeds at L (67%) would have called every seed's cells past L "not learned"


def test_a_cell_past_L_is_the_mean_over_the_seeds_that_retrieve_at_L():
    table = three_seeds()
    by_seed = verdicts_by_seed(table, dict(zip(table.encoding, table.base_encoding)))
    counted = counted_rows(table, by_seed)
    agg = aggregate(counted)
    at = agg[(agg.encoding == "yarn") & (agg.eval_len == 2 * L)]
    assert at["mean"].tolist() == pytest.approx([0.95, 0.95])  # seeds 0 and 1: (0.9 + 1.0) / 2, seed 2's 0 left out
    assert set(at["n_seeds"]) == {2}
    at_L = agg[(agg.encoding == "yarn") & (agg.eval_len == L)]
    assert at_L["mean"].iloc[0] == pytest.approx(1.0)  # at L too: the models that count (seed 2 in the verdict)
    said = {e: across_seeds(s) for e, s in by_seed.items()}
    line = next(x for x in retrieval_matrix(agg, "accuracy", said, counted).splitlines() if x.startswith("| yarn"))
    assert "yes (rope) in 2 of 3 seeds (seed 2: mean 2% at L)" in line and "| 95% [" in line and "*" not in line
    assert retrieval_length(agg, said) == {"rope": L, "yarn": 2 * L}  # judged on the same two models at L


def test_no_seed_retrieving_keeps_every_cell_and_says_why():
    table = pd.DataFrame(rows("alibi", 0, {L: 0.1, 2 * L: 0.0}) + rows("alibi", 1, {L: 0.3, 2 * L: 0.0}))
    by_seed = verdicts_by_seed(table)
    said = across_seeds(by_seed["alibi"])
    assert said.reason == NOT_LEARNED and said.shortfall == "seed 0: mean 10%; seed 1: mean 30%"
    assert len(counted_rows(table, by_seed)) == len(table)


def test_an_interval_over_seeds_stays_inside_the_metric():
    mean, half, low, high = seeds_interval([1.0, 1.0, 0.02], "accuracy")
    assert mean == pytest.approx(0.6733, abs=1e-4) and half > 1  # t with 2 degrees of freedom: wider than 100 points
    assert (low, high) == (0.0, 1.0)
    _, _, low, high = seeds_interval([0.97, 1.0, 1.0], "accuracy")
    assert high == 1.0 and 0.9 < low < 0.97
    # unbounded metrics keep the symmetric interval
    mean, half, low, high = seeds_interval([46.4, 48.9], "nll")
    assert low == pytest.approx(mean - half) and high == pytest.approx(mean + half)


def test_retrieval_formed_is_the_median_over_seeds_with_never_counted_last():
    from extrapolate.report.training_log import formation_step

    probes = [(0, 440, 0.9), (1, 1040, 0.85), (2, 2400, 0.03)]  # seed 2's probes never reached 80%
    training = pd.DataFrame(
        [{"encoding": "rope", "seed": s, "step": step, "retrieval_accuracy": a} for s, step, a in probes]
        + [{"encoding": "rope", "seed": s, "step": 100, "retrieval_accuracy": 0.0} for s in range(3)]
        + [{"encoding": "nope", "seed": s, "step": 2400, "retrieval_accuracy": 0.1} for s in range(2)]
        + [{"encoding": "nope", "seed": 2, "step": 2400, "retrieval_accuracy": 0.9}]
    )
    steps = formation_step(training, 0.8)
    assert steps["rope"] == (1040.0, 1, 3)  # 440, 1040, never: the median is 1040
    assert steps["nope"] == (None, 2, 3)  # never, never, 2400: the median never reached


def test_seeds_that_agree_still_carry_their_prompts_interval():
    from extrapolate.core.intervals import proportion_interval

    # two seeds of 100 prompts, both 21%: the t interval has zero width, Wilson's over 200 prompts has not
    mean, half, low, high = seeds_interval([0.21, 0.21], "accuracy", pooled=(42, 200))
    assert half == 0 and (low, high) == pytest.approx(proportion_interval(42, 200))
    table = pd.DataFrame(rows("rope", 0, {L: 0.21}) + rows("rope", 1, {L: 0.21}))
    cell = aggregate(table).iloc[0]
    assert (cell["low"], cell["high"]) == pytest.approx(proportion_interval(42, 200))


def test_a_ruler_cell_over_seeds_keeps_its_prompts_interval():
    from extrapolate.core.intervals import proportion_interval

    ruler = {"encoding": "rope", "train_len": 8192, "eval_len": 4096, "task": "ruler", "metric": "score"}
    ruler |= {"depth": None, "status": "ok", "n": 25, "ci_low": 0.87, "ci_high": 1.0}
    both = pd.DataFrame([{**ruler, "seed": s, "value": 1.0, "ci_method": "wilson"} for s in (0, 1)])
    cell = aggregate(both).iloc[0]
    assert (cell["low"], cell["high"]) == pytest.approx(proportion_interval(50, 50))  # not [100–100]
    partial = both.assign(value=0.9, ci_method="clopper-pearson-at-mean")  # partial credit: its summed credit
    assert (aggregate(partial).iloc[0]["low"], aggregate(partial).iloc[0]["high"]) == pytest.approx(
        proportion_interval(45, 50)
    )
