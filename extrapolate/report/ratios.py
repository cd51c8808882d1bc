"""Perplexity over its base model's at L, seed by seed, and its interval: the quantity the ratio figure draws.

A ratio compares one seed's perplexity at a length with the same seed's base model at L (for a scaling or a
fine-tune of the RoPE model, plain RoPE's; else its own), on the same held-out documents. Over two or more
seeds a cell's interval is Student's t over the seeds' ratios (report/stats.py), never the perplexity's spread
divided by a base value: at L every seed's ratio of a model to itself is exactly 1, with no spread. Over one
seed the ratio's interval is the one paired by document (core/intervals.nll_difference), where the folder
keeps each document's loss; otherwise the cell has none.
"""

from __future__ import annotations

import math

import pandas as pd

from extrapolate.core.intervals import nll_difference
from extrapolate.report.retrieval import judged_on
from extrapolate.report.stats import seeds_interval
from extrapolate.report.table import of_kind
from extrapolate.tasks.perplexity import PERPLEXITY

COLUMNS = ["encoding", "train_len", "eval_len", "mean", "low", "high", "ci95", "interval", "n_seeds", "status"]


def seed_ratios(table: pd.DataFrame, bases: dict[str, str], documents: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (encoding, seed, length) measured: `ratio` to the seed's base model at L, and where the
    documents of both are kept, `low` and `high` of the ratio paired by document (else NaN)."""
    ppl = table[of_kind(table, PERPLEXITY) & (table["metric"] == "ppl") & (table["status"] == "ok")]
    ppl = ppl[ppl["value"].astype(float).between(0, math.inf, inclusive="neither")]
    at_l = ppl[ppl["eval_len"] == ppl["train_len"]]
    base_value = {
        (e, int(s)): (float(v), r, p)
        for e, s, v, r, p in zip(at_l["encoding"], at_l["seed"], at_l["value"], at_l["run_id"], at_l["protocol"])
    }
    units = _document_units(documents)
    rows = []
    for r in ppl.itertuples():
        measured = {e for e, s in base_value if s == int(r.seed)}
        base = judged_on(r.encoding, measured, bases)
        if (base, int(r.seed)) not in base_value:
            continue
        value, base_run, base_protocol = base_value[(base, int(r.seed))]
        low = high = math.nan
        mine, theirs = (
            units.get((r.run_id, r.protocol, int(r.eval_len))),
            units.get((base_run, base_protocol, int(r.train_len))),
        )
        if mine and theirs and len(mine[0]) == len(theirs[0]) and len(mine[0]) > 1:
            _, d_low, d_high = nll_difference(*mine, *theirs)
            low, high = math.exp(d_low), math.exp(d_high)
        rows.append((r.encoding, int(r.seed), int(r.train_len), int(r.eval_len), float(r.value) / value, low, high))
    return pd.DataFrame(rows, columns=["encoding", "seed", "train_len", "eval_len", "ratio", "low", "high"])


def _document_units(documents: pd.DataFrame | None) -> dict[tuple, tuple[list[float], list[float]]]:
    """(run_id, protocol, length) -> (summed NLL, tokens) per document, in document order."""
    if documents is None or documents.empty:
        return {}
    out = {}
    for (run, protocol, length), group in documents.groupby(["run_id", "protocol", "eval_len"]):
        group = group.sort_values("index")
        out[(str(run), str(protocol), int(length))] = (group["nll_sum"].tolist(), group["tokens"].tolist())
    return out


def ratio_aggregate(table: pd.DataFrame, bases: dict[str, str], documents: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (encoding, length): the mean of the seeds' ratios and its 95% interval, in the aggregate's columns
    (`interval`: "seeds" over seeds, "within" paired by document for one seed, "none" without one)."""
    ratios = seed_ratios(table, bases, documents)
    rows = []
    for (encoding, train_len, eval_len), group in ratios.groupby(["encoding", "train_len", "eval_len"], sort=False):
        values = group["ratio"].tolist()
        if len(values) > 1:
            mean, half, low, high = seeds_interval(values)
            interval = "seeds"
        else:
            mean, half, low, high = values[0], 0.0, float(group["low"].iloc[0]), float(group["high"].iloc[0])
            interval = "none" if math.isnan(low) else "within"
        rows.append((encoding, train_len, eval_len, mean, low, high, half, interval, len(values), "ok"))
    return pd.DataFrame(rows, columns=COLUMNS)
