"""The headline of a finished job, read from its folder's rows: per encoding (over the seeds the job measured)
perplexity at L and at the longest length, retrieval at L and at the longest length, and the effective lengths
the summary states. The closing panel of `run` and `sweep` prints these, so what a user reads last is what the
table holds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from extrapolate.report.labels import label_variants
from extrapolate.report.run_options import with_options
from extrapolate.report.table import aggregate, load_results, row_kinds
from extrapolate.tasks.babilong.kind import BABILONG
from extrapolate.tasks.passkey import PASSKEY
from extrapolate.tasks.perplexity import PERPLEXITY
from extrapolate.tasks.ruler.kind import RULER

# the greedy share, RULER's and BABILong's mean score
RETRIEVAL_METRICS = {PASSKEY.name: "accuracy", RULER.name: "score", BABILONG.name: "score"}


def headline(folder: Path, run_ids: list[str]) -> pd.DataFrame:
    """One row per encoding (label) the runs `run_ids` measured: train_len, longest, ppl_L, ppl_longest,
    retrieval_L, retrieval_longest (means over their seeds, retrieval over depths and tasks; NaN where not
    measured), seeds, and the effective lengths (perplexity, retrieval) of the folder's summary."""
    from extrapolate.report.pages import effective_length, judged, with_unrecorded
    from extrapolate.report.retrieval import base_encodings, retrieval_length

    table = with_unrecorded(label_variants(with_options(load_results(folder), folder)))
    mine = table[table["run_id"].astype(str).isin(set(run_ids))]
    if mine.empty:
        return pd.DataFrame()
    rule, said, counted = judged(folder, table)  # as the summary decides them
    agg = aggregate(counted)
    perplexity_length = effective_length(agg, bases=base_encodings(table))
    retrieval_lengths = retrieval_length(agg, said, rule) if said else {}
    rows = []
    for encoding, group in mine.groupby("encoding", sort=False):
        L, longest = int(group["train_len"].iloc[0]), int(group["eval_len"].max())
        rows.append(
            {
                "encoding": encoding,
                "seeds": group["seed"].nunique(),
                "train_len": L,
                "longest": longest,
                "ppl_L": mean_value(group, L, {PERPLEXITY.name: "ppl"}),
                "ppl_longest": mean_value(group, longest, {PERPLEXITY.name: "ppl"}),
                "retrieval_L": mean_value(group, L, RETRIEVAL_METRICS),
                "retrieval_longest": mean_value(group, longest, RETRIEVAL_METRICS),
                "effective_perplexity": perplexity_length.get(encoding),
                "effective_retrieval": retrieval_lengths.get(encoding),
            }
        )
    return pd.DataFrame(rows)


def mean_value(group: pd.DataFrame, length: int, metrics: dict[str, str]) -> float:
    """The mean value of the measured rows at `length` of the task kinds in `metrics` ({kind: its metric}), each
    seed's mean first (a seed is the unit); NaN where none was measured."""
    chosen = pd.Series(False, index=group.index)
    kinds = row_kinds(group)
    for kind, metric in metrics.items():
        chosen |= (kinds == kind) & (group["metric"] == metric)
    rows = group[chosen & (group["eval_len"] == length) & (group["status"] == "ok")]
    if rows.empty:
        return float("nan")
    return float(pd.to_numeric(rows["value"]).groupby(rows["seed"]).mean().mean())
