"""The comparison rule of `reproduce`: tolerances from the measured seed spread, and the suite's claims.

Rule. A fresh run on another machine takes other floating-point paths, and training amplifies a last-digit
difference the way a change of seed does, so a quantity q may move by up to the seed spread. The suite is run
for m seeds when the reference is made; their mean q̄ and standard deviation s are in the spread file. A fresh
run is one more draw, so (new − q̄) / (s·√(1 + 1/m)) follows Student's t with m − 1 degrees of freedom. A
quantity passes when

    |new − q̄| ≤ max(k · s, floor),   k = √(1 + 1/m) · t_{m−1}(1 − α / 2N),

α = 1 − confidence shared by the N compared quantities (Bonferroni), so an unchanged code base fails on a
machine whose drift is at most seed-sized with probability below α. Floors: `nll_floor` nats for perplexity;
for accuracy the binomial noise of one run around the mean, z_{1−α/2N} · √(p(1−p)/trials) · √(1 + 1/m), p the
seeds' mean accuracy pulled off 0 and 1 by one success and one failure (so an all-zero cell still tolerates
a hit)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from extrapolate.core.distributions import normal_quantile, student_t_quantile
from extrapolate.report.shapes import claim_holds, perplexity_means
from extrapolate.report.table import KEY
from extrapolate.reproduce.quantities import QUANTITY_KEY, quantities
from extrapolate.reproduce.suite import Suite

CELL_KEY = [k for k in KEY if k != "run_id"]


@dataclass(frozen=True)
class Rule:
    confidence: float
    nll_floor: float
    n_quantities: int

    @property
    def tail(self) -> float:
        """One tail's share of α for one quantity."""
        return (1 - self.confidence) / (2 * max(self.n_quantities, 1))

    def multiplier(self, n_seeds: int) -> float:
        return math.sqrt(1 + 1 / n_seeds) * student_t_quantile(1 - self.tail, n_seeds - 1)

    def floor(self, metric: str, mean: float, trials: int, n_seeds: int) -> float:
        if metric == "nll":
            return self.nll_floor
        p = (mean * trials * n_seeds + 1) / (trials * n_seeds + 2)
        spread = math.sqrt(p * (1 - p) / max(trials, 1)) * math.sqrt(1 + 1 / n_seeds)
        return normal_quantile(1 - self.tail) * spread

    def tolerance(self, spread_row: dict) -> float:
        """The tolerance of one quantity from its row of the spread file."""
        n = int(spread_row["n_seeds"])
        return max(
            self.multiplier(n) * float(spread_row["sd"]),
            self.floor(spread_row["metric"], float(spread_row["mean"]), int(spread_row["trials"]), n),
        )


def spread_rows(spread: pd.DataFrame) -> dict[tuple, dict]:
    """The spread file as {(encoding, eval_len, task, metric): row}."""
    return {tuple(row[k] for k in QUANTITY_KEY): row for row in spread.to_dict("records")}


def rule_for(suite: Suite, spread: pd.DataFrame) -> Rule:
    return Rule(suite.confidence, suite.nll_floor, len(spread))


@dataclass
class Comparison:
    checks: pd.DataFrame  # one row per compared quantity: reference (the seeds' mean), now, change, tolerance, verdict
    cells: pd.DataFrame  # raw cells missing on one side or with another status
    claims: list[tuple[str, bool, str]]  # (text, holds, detail)

    @property
    def failing(self) -> pd.DataFrame:
        return self.checks[self.checks["verdict"] != "ok"]

    @property
    def ok(self) -> bool:
        return self.failing.empty and self.cells.empty and all(holds for _, holds, _ in self.claims)


def compare(reference: pd.DataFrame, fresh: pd.DataFrame, spread: pd.DataFrame, suite: Suite) -> Comparison:
    rule = rule_for(suite, spread)
    ref, new = (quantities(t.drop(columns="seed")).set_index(QUANTITY_KEY) for t in (reference, fresh))
    bounds = spread_rows(spread)
    rows = []
    for key in ref.index.union(new.index):
        a, b = (frame.loc[key] if key in frame.index else None for frame in (ref, new))
        row = dict(zip(QUANTITY_KEY, key)) | {
            "reference": _value(a),
            "now": _value(b),
            "change": float("nan"),
            "tolerance": float("nan"),
        }
        if a is None or b is None:
            row["verdict"] = "missing"
        elif a["status"] != b["status"]:
            row["verdict"] = f"status {a['status']} → {b['status']}"
        elif a["status"] != "ok":
            continue  # unsupported (or oom) on both sides: nothing to compare
        elif key not in bounds:
            row["verdict"] = "no spread measured"
        else:
            row["reference"] = float(bounds[key]["mean"])  # the centre of the seeds, not one seed's value
            row["change"] = b["value"] - row["reference"]
            row["tolerance"] = rule.tolerance(bounds[key])
            row["verdict"] = "ok" if abs(row["change"]) <= row["tolerance"] else "out of tolerance"
            # the committed run is one more draw too: a value edited or made by other code fails the same rule
            if row["verdict"] == "ok" and abs(a["value"] - row["reference"]) > row["tolerance"]:
                row["verdict"] = f"committed value {a['value']:.6g} out of tolerance"
        rows.append(row)
    checks = pd.DataFrame(rows, columns=QUANTITY_KEY + ["reference", "now", "change", "tolerance", "verdict"])
    return Comparison(checks, changed_cells(reference, fresh), check_claims(fresh, suite))


def _value(row) -> float:
    return float("nan") if row is None else float(row["value"])


def changed_cells(reference: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """Raw cells present on one side only or with another status (per depth too: a depth that went missing
    or out of memory is a failure even where the mean over depths is not compared)."""

    def statuses(table):
        frame = table.copy()
        frame["depth"] = pd.to_numeric(frame["depth"]).fillna(-1.0)
        frame["seed"] = 0  # seeds are the suite's business, not the cell's identity here
        return frame.set_index(CELL_KEY)["status"]

    joined = pd.concat([statuses(reference).rename("reference"), statuses(fresh).rename("now")], axis=1)
    changed = joined[joined["reference"].astype(str) != joined["now"].astype(str)]
    return changed.reset_index()


def check_claims(table: pd.DataFrame, suite: Suite) -> list[tuple[str, bool, str]]:
    means = perplexity_means(table)
    return [claim_holds(claim, means, suite.request.train_len) for claim in suite.claims]


def claims_over_seeds(tables: list[pd.DataFrame], suite: Suite) -> list[tuple[str, bool, str]]:
    """Every claim checked on every seed's run: it holds for the suite only if it holds for each."""
    per_seed = [check_claims(t, suite) for t in tables]
    out = []
    for i, claim in enumerate(suite.claims):
        results = [seed_claims[i] for seed_claims in per_seed]
        failed = [detail for _, holds, detail in results if not holds]
        detail = (
            f"holds for all {len(results)} seeds"
            if not failed
            else f"fails for {len(failed)} of {len(results)} seeds, e.g. {failed[0]}"
        )
        out.append((claim.text, not failed, detail))
    return out
