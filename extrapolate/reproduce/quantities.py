"""The quantities `reproduce` compares, and their spread over seeds.

A perplexity cell is compared as its mean NLL in nats (a difference in nats is a relative change of
perplexity). Passkey cells are compared per length as the mean over depths: one depth holds only a few
trials, and a binomial count of 10 moves by ±0.15 on its own, so single depths are never compared."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from extrapolate.core.atomic import write_text
from extrapolate.core.errors import UserError
from extrapolate.report.table import of_kind
from extrapolate.tasks.perplexity import PERPLEXITY

QUANTITY_KEY = ["encoding", "eval_len", "task", "metric"]
SPREAD_FILE = "spread.csv"
SEEDS_FILE = "spread-seeds.csv"  # every seed's quantities, from which the spread and any per-seed claim follow
SPREAD_COLUMNS = QUANTITY_KEY + ["n_seeds", "trials", "mean", "sd", "min", "max"]


def quantities(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (encoding, eval_len, task, metric[, seed]): value, trials and status. Perplexity: the NLL
    cell (trials = scored tokens); passkey: the mean over depths (trials = prompts), `ok` only when every
    depth is `ok`."""
    by = QUANTITY_KEY + (["seed"] if "seed" in table else [])
    ppl = table[of_kind(table, PERPLEXITY) & (table["metric"] == "nll")]
    retrieval = table[~of_kind(table, PERPLEXITY)]
    rows = [
        dict(zip(by, key))
        | {"value": float(g["value"].iloc[0]), "trials": int(g["n_tokens"].iloc[0]), "status": str(g["status"].iloc[0])}
        for key, g in ppl.groupby(by, sort=True)
    ]
    for key, group in retrieval.groupby(by, sort=True):
        statuses = sorted(set(group["status"].astype(str)) - {"ok"})
        length = int(key[QUANTITY_KEY.index("eval_len")])
        trials = int((group["n_tokens"].astype(int) // max(length, 1)).sum())
        value = float(group["value"].astype(float).mean()) if not statuses else float("nan")
        rows.append(
            dict(zip(by, key)) | {"value": value, "trials": trials, "status": statuses[0] if statuses else "ok"}
        )
    return pd.DataFrame(rows, columns=by + ["value", "trials", "status"])


def measure_spread(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Mean, standard deviation (n − 1), min and max of every `ok` quantity over the seeds of the tables."""
    per_seed = quantities(pd.concat(tables, ignore_index=True))
    ok = per_seed[per_seed["status"] == "ok"]
    rows = []
    for key, group in ok.groupby(QUANTITY_KEY, sort=True):
        values = group["value"].astype(float)
        rows.append(
            dict(zip(QUANTITY_KEY, key))
            | {
                "n_seeds": len(values),
                "trials": int(group["trials"].min()),
                "mean": values.mean(),
                "sd": values.std(ddof=1) if len(values) > 1 else float("nan"),
                "min": values.min(),
                "max": values.max(),
            }
        )
    return pd.DataFrame(rows, columns=SPREAD_COLUMNS)


def write_spread(folder: Path, spread: pd.DataFrame, per_seed: pd.DataFrame | None = None) -> None:
    """The spread file, and beside it the quantities of every seed it was measured from (`quantities` of the
    seeds' tables), so a per-seed number quoted from the spread run is read from a committed file."""
    write_text(folder / SPREAD_FILE, spread.to_csv(index=False, float_format="%.6g"))
    if per_seed is not None:
        write_text(folder / SEEDS_FILE, per_seed.to_csv(index=False, float_format="%.6g"))


def read_spread(folder: Path) -> pd.DataFrame:
    path = folder / SPREAD_FILE
    if not path.is_file():
        raise UserError(f"no measured spread in {path}; measure it with `extrapolate reproduce --update --spread`")
    try:
        spread = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"spread file {path} is unreadable: {' '.join(str(exc).split())}") from None
    missing = [c for c in SPREAD_COLUMNS if c not in spread.columns]
    if missing:
        raise UserError(f"spread file {path} lacks the columns {', '.join(missing)}")
    numeric = spread[["eval_len", "n_seeds", "trials", "mean", "sd"]].apply(pd.to_numeric, errors="coerce")
    if (
        numeric[["eval_len", "n_seeds", "trials", "mean"]].isna().any().any()
        or (numeric["n_seeds"] < 2).any()
        or not numeric["sd"].map(lambda v: math.isfinite(v) and v >= 0).all()
    ):
        raise UserError(
            f"spread file {path} has a malformed row (a non-numeric value, a negative spread or fewer than 2 seeds)"
        )
    spread[["eval_len", "n_seeds", "trials"]] = numeric[["eval_len", "n_seeds", "trials"]].astype(int)
    return spread
