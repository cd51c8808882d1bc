"""The per-seed table: every seed's own cells, its depths' prompts pooled with the exact interval, and none for a
folder of one seed."""

import pandas as pd

from extrapolate.core.intervals import proportion_interval
from extrapolate.report.per_seed import per_seed_section


def rows(seed: int, greedy_at_l: list[float]) -> list[dict]:
    base = {"encoding": "rope", "seed": seed, "train_len": 8, "status": "ok", "ci_low": None, "ci_high": None}
    out = [
        {**base, "task": "perplexity", "metric": "ppl", "eval_len": n, "value": v, "n": 2}
        for n, v in ((8, 10.0), (32, 25.0))
    ]
    out += [
        {**base, "task": "passkey", "metric": "accuracy", "eval_len": 8, "depth": d, "value": v, "n": 20}
        for d, v in zip((0.0, 0.5, 1.0), greedy_at_l)
    ]
    return out


def test_each_seed_is_a_row_with_its_depths_pooled():
    table = pd.DataFrame(rows(0, [1.0, 1.0, 0.9]) + rows(1, [0.0, 0.1, 0.2]))
    text = "\n".join(per_seed_section(table))
    low, high = proportion_interval(58, 60)  # 20 + 20 + 18 of 60 prompts
    assert f"| rope | 0 | 10.000 | 2.50× | 97% [{low * 100:.0f}–{high * 100:.0f}] | – |" in text
    low, high = proportion_interval(6, 60)
    assert f"| rope | 1 | 10.000 | 2.50× | 10% [{low * 100:.0f}–{high * 100:.0f}] | – |" in text


def test_one_seed_has_no_per_seed_table():
    assert per_seed_section(pd.DataFrame(rows(0, [1.0, 1.0, 1.0]))) == []
