"""The cells the findings read and the rules they apply: each folder's table, a perplexity, a retrieval cell
over its prompts with its interval (at the level in force: core/intervals.confidence), per-seed ratios with the
interval over seeds, and the words a verdict may use (held, lost, flat, degrades), as docs/results.md states
them. `table` and `ROOT` are read through this module, so a test can give the checks other rows."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from extrapolate.core.intervals import proportion_interval
from extrapolate.report.labels import encoding_of, label_variants, without_factor
from extrapolate.report.ruler import ruler_scores
from extrapolate.report.run_options import with_options
from extrapolate.report.stats import seeds_interval
from extrapolate.report.table import length_means, load_results, of_kind
from extrapolate.reproduce.family import FamilyWise
from extrapolate.tasks.passkey import CHAT_MARK, PASSKEY
from extrapolate.tasks.perplexity import PERPLEXITY
from extrapolate.tasks.ruler.kind import RULER

ROOT = Path(__file__).resolve().parents[3]
PPL_MARGIN = 0.10  # a perplexity claim's margin: twice the 5% two trainings of one config were seen apart


DEGRADES = 1.5


BAR = 0.8  # passkey-word's "retrieves at this length" (its task file's threshold)


RULER_BAR = 0.856  # RULER's effective-length bar (Llama-2-7B's average at 4k)


@dataclass(frozen=True)
class Outcome:
    holds: bool
    numbers: str
    why: str = ""  # where it fails: which bound or margin
    family: FamilyWise | None = None  # its p-value and Holm's adjustment over every finding (reproduce/family.py)


READ_INSTEAD: dict[str, str] = {}  # folder -> the folder whose rows are read in its place (`read_instead`)


@cache
def table(folder: str) -> pd.DataFrame:
    rows = label_variants(with_options(load_results(ROOT / "results" / folder), ROOT / "results" / folder))
    if folder not in READ_INSTEAD:
        return rows
    source = ROOT / "results" / READ_INSTEAD[folder]
    again = label_variants(with_options(load_results(source), source))
    committed = rows.groupby("encoding")["seed"].agg(set)
    measured = again.groupby("encoding")["seed"].agg(set)
    # an encoding counts once every seed the committed folder has is re-measured: fewer seeds are another test
    complete = [label for label, seeds in measured.items() if seeds >= committed.get(label, set())]
    return again[again["encoding"].isin(complete)]


def read_instead(mapping: dict[str, str]) -> None:
    """Every check reads the rows of mapping[folder] where it names `folder`, of the encodings re-measured at
    every seed the folder has (the others read as missing): the findings, stated before the data, evaluated
    again on a re-measurement of their folder (a replication)."""
    READ_INSTEAD.clear()
    READ_INSTEAD.update(mapping)
    table.cache_clear()
    _DERIVED.clear()  # what was read of the tables no longer read


# The findings on STRING were stated of its rows without the reference's attention factor (measured before
# the encoding took it); where a folder holds rows with it too, they are `string` and these are labelled so.
STRING_AS_STATED = "string [attention_factor=1]"


def ppl(folder: str, encoding: str, length: int) -> float:
    """The perplexity of `encoding` (a label as the report shows it) at a length. Where the label has grown a
    part since (a second run at another factor makes "string [attention_factor=1]" "string s=2
    [attention_factor=1]", and "lm-infinite" "lm-infinite s=2"), the one run of that label, factor aside, or
    else of that encoding, measured at this length is meant; two such runs are refused, never averaged."""
    rows = table(folder)
    rows = rows[(rows["eval_len"] == length) & (rows["metric"] == "ppl")]
    rows = rows[of_kind(rows, PERPLEXITY) & (rows["status"] == "ok")]
    labels = rows["encoding"].astype(str)
    for reading in (labels, labels.map(without_factor), labels.map(encoding_of)):
        named = rows[reading == encoding]
        if named["run_id"].nunique() > 1:
            raise LookupError(f"results/{folder}: {encoding} at {length} is {', '.join(sorted(set(named.encoding)))}")
        if not named.empty:
            return float(named["value"].mean())
    raise LookupError(f"results/{folder}: no perplexity of {encoding} at {length}")


@dataclass(frozen=True)
class Cell:
    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.0%} [{self.low * 100:.0f}–{self.high * 100:.0f}]"


def prompts_cell(mean: float, n: int) -> Cell:
    """One model's cell over its n prompts, its interval computed at the level in force (core/intervals.py):
    the rows' stored bounds are the 95% ones, and a family-wise reading asks for others."""
    return Cell(mean, *proportion_interval(mean * n, n), n)


def greedy(folder: str, encoding: str, length: int) -> Cell:
    means = length_means(table(folder), PASSKEY, "accuracy")
    row = means[(means["encoding"] == encoding) & (means["eval_len"] == length)]
    if row.empty:
        raise LookupError(f"results/{folder}: no greedy retrieval of {encoding} at {length}")
    r = row.iloc[0]
    return Cell(float(r["mean"]), float(r["low"]), float(r["high"]), int(r["n"]))


def plain_prompts(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows measured with plain prompts: a `+chat` row (the chat template) is another prompt format, never
    pooled with them."""
    return rows[~rows["protocol"].astype(str).str.contains(CHAT_MARK, regex=False)]


def ruler(folder: str, task: str, length: int) -> Cell:
    """A RULER cell of a binary-scored task (every prompt 0 or 1) with plain prompts, with the exact interval over
    its prompts."""
    rows = table(folder)
    scores = derived(
        rows, ("plain scores",), lambda: ruler_scores(plain_prompts(rows))
    )  # its score and n, not its interval
    row = scores[(scores["task"] == task) & (scores["eval_len"] == length) & (scores["label"] == "rope")]
    if row.empty:
        raise LookupError(f"results/{folder}: no {task} at {length}")
    r = row.iloc[0]
    n = int(r["n"]) if r["n"] == r["n"] else samples(folder, task, length)
    low, high = proportion_interval(round(float(r["score"]) * n), n)
    return Cell(float(r["score"]), low, high, n)


def samples(folder: str, task: str, length: int) -> int:
    """Prompts of a RULER row written before `n` was: its n_tokens are prompts × length."""
    rows = table(folder)
    rows = rows[of_kind(rows, RULER) & (rows["eval_len"] == length) & rows["protocol"].str.startswith(task)]
    return int(rows["n_tokens"].iloc[0] // length)


def ratio(value: float) -> str:
    return f"{value:.2f}×"


def flat(value: float) -> bool:
    """A one-window ratio within the margin (SmolLM2's deterministic windows, which have no interval)."""
    return abs(value - 1) <= PPL_MARGIN


def over_seeds(values) -> tuple[float, float]:
    """The 95% Student-t interval of one quantity's per-seed values (seeds as the unit: report/stats.py)."""
    _, _, low, high = seeds_interval([float(v) for v in values])
    return low, high


def flat_over(values) -> bool:
    """Perplexity ratios flat over the seeds: their interval inside 1 ± the margin."""
    low, high = over_seeds(values)
    return 1 - PPL_MARGIN <= low and high <= 1 + PPL_MARGIN


def at_least_over(values, bound: float) -> bool:
    """The interval over the seeds at or above `bound` (degrades: 1.5; beyond the flat margin: 1.1)."""
    return over_seeds(values)[0] >= bound


def below_over(values, bound: float) -> bool:
    return over_seeds(values)[1] < bound


def held(cell: Cell) -> bool:
    return cell.low >= BAR


def retrieves(cell: Cell) -> bool:
    """Whether a model retrieves at a length by the report's validity rule (docs/retrieval.md): the point
    estimate at the threshold, as the report's verdicts decide which seeds count."""
    return cell.mean >= BAR - 1e-9


def lost(cell: Cell) -> bool:
    return cell.high < BAR


def outcome(checks: dict[str, bool], numbers: str) -> Outcome:
    failed = [name for name, ok in checks.items() if not ok]
    return Outcome(not failed, numbers, "; ".join(failed))


def scored(folder: str, encoding: str, task: str, length: int) -> Cell:
    """A one-seed RULER cell (plain prompts) as its row records it: the score over its prompts with the row's
    own 95% interval (the exact one at its mean)."""
    rows = plain_prompts(table(folder))
    rows = rows[of_kind(rows, RULER) & (rows["metric"] == "score") & (rows["status"] == "ok")]
    rows = rows[rows["protocol"].astype(str).str.startswith(f"{task}-v")]
    row = rows[(rows["encoding"] == encoding) & (rows["eval_len"] == length)].dropna(subset=["n", "ci_low"])
    if len(row) != 1:
        raise LookupError(f"results/{folder}: {len(row)} {task} rows with an interval of {encoding} at {length}")
    r = row.iloc[0]
    return prompts_cell(float(r["value"]), int(r["n"]))


def depth_cells(folder: str, encoding: str, length: int, seed: int) -> dict[float, Cell]:
    """One seed's greedy retrieval at a length, depth by depth, each cell with its own interval over its prompts
    (prompts of different models, or of different depths, are never pooled into one)."""
    rows = table(folder)
    rows = rows[(rows["encoding"] == encoding) & (rows["eval_len"] == length) & (rows["metric"] == "accuracy")]
    rows = rows[of_kind(rows, PASSKEY) & (rows["status"] == "ok") & (rows["seed"] == seed)]
    if rows.empty:
        raise LookupError(f"results/{folder}: no greedy cell of {encoding} at {length}, seed {seed}")
    return {float(r.depth): prompts_cell(float(r.value), int(r.n)) for r in rows.sort_values("depth").itertuples()}


def by_depth(cells: dict[float, Cell]) -> str:
    """A seed's cells at every depth, in one line."""
    return " / ".join(str(c) for c in cells.values())


def seed_rises(folder: str, encoding: str, seeds: list[int]) -> list[float]:
    """Perplexity at 8L over its value at L, seed by seed (a mean over seeds would hide a seed that differs)."""
    return [ppl_of_seed(folder, encoding, 2048, s) / ppl_of_seed(folder, encoding, 256, s) for s in seeds]


def ratios(values) -> str:
    """Per-seed ratios, then the 95% interval over the seeds that a verdict reads: "2.14× / 2.44× / 2.27×
    [1.91–2.66]"."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return " / ".join(ratio(v) for v in values)
    low, high = over_seeds(values)
    return " / ".join(ratio(v) for v in values) + f" [{low:.2f}–{high:.2f}]"


CELL_KEY = ["encoding", "eval_len", "metric", "seed"]
_DERIVED: dict[int, tuple[pd.DataFrame, dict]] = {}  # id(table) -> (that table, what was derived from it)


def derived(frame: pd.DataFrame, key: tuple, compute):
    """`compute()`, once per table and key: the family-wise search evaluates every finding at many levels, and
    what it reads of a table (rows, mean scores) does not depend on the level; only the intervals do. The table
    is kept beside its results, so that its id names it while they are held."""
    held = _DERIVED.get(id(frame))
    if held is None or held[0] is not frame:
        held = _DERIVED[id(frame)] = (frame, {})
    if key not in held[1]:
        held[1][key] = compute()
    return held[1][key]


def cell_rows(rows: pd.DataFrame, encoding: str, length: int, metric: str, seed: int) -> pd.DataFrame:
    """The rows of one (encoding, length, metric, seed), the table grouped once."""
    positions = derived(rows, ("cells",), lambda: rows.groupby(CELL_KEY, sort=False).indices)
    key = (encoding, length, metric, seed)
    return derived(rows, key, lambda: rows.iloc[positions.get(key, [])])


def seed_cell(folder: str, encoding: str, length: int, seed: int) -> Cell:
    """One seed's greedy retrieval at a length: its depths' prompts pooled, the exact interval over them."""
    rows = cell_rows(table(folder), encoding, length, "accuracy", seed)
    rows = rows[of_kind(rows, PASSKEY) & (rows["status"] == "ok")]
    if rows.empty:
        raise LookupError(f"results/{folder}: no greedy retrieval of {encoding} at {length}, seed {seed}")
    return pool([Cell(float(v), 0.0, 0.0, int(n)) for v, n in zip(rows["value"], rows["n"])])


@dataclass(frozen=True)
class AcrossSeeds:
    """One encoding of `showcase-seeds` at each of its seeds: perplexity at 8L over its value at L, and the
    greedy retrieval cells at L and at 8L."""

    encoding: str
    folder: str
    seeds: list[int]
    rise: dict[int, float]
    at_l: dict[int, Cell]
    at_8l: dict[int, Cell]

    @classmethod
    def of(cls, encoding: str, folder: str = "showcase-seeds") -> AcrossSeeds:
        rows = table(folder)
        seeds = sorted(int(s) for s in rows[rows["encoding"] == encoding]["seed"].unique())
        return cls(
            encoding,
            folder,
            seeds,
            dict(zip(seeds, seed_rises(folder, encoding, seeds))),
            {s: seed_cell(folder, encoding, 256, s) for s in seeds},
            {s: seed_cell(folder, encoding, 2048, s) for s in seeds},
        )

    @property
    def learned(self) -> list[int]:
        """The seeds whose model retrieves at L: the only ones whose cells past L count (the validity rule)."""
        return [s for s in self.seeds if retrieves(self.at_l[s])]

    def held_past_l(self, seed: int) -> bool:
        """Whether retrieval holds at every length from 2L to 8L on one seed."""
        return all(held(seed_cell(self.folder, self.encoding, n, seed)) for n in (512, 1024, 2048))

    def numbers(self, beside: AcrossSeeds | None = None, beside_name: str = "") -> str:
        """ "perplexity at 8L / at L: 0.99× / …; greedy at L: …; at 8L: … (seeds 0, 1, 2; n = 100 each)", with
        another encoding's perplexity ratios in brackets where given."""
        also = f" ({beside_name} " + ratios(beside.rise[s] for s in self.seeds) + ")" if beside else ""
        # the validity rule: a cell past L is stated only for a seed that retrieves at L
        past = [str(self.at_8l[s]) if s in self.learned else "–" for s in self.seeds]
        return (
            "perplexity at 8L / at L: "
            + ratios(self.rise[s] for s in self.seeds)
            + also
            + "; greedy at L: "
            + " / ".join(str(self.at_l[s]) for s in self.seeds)
            + "; at 8L: "
            + " / ".join(past)
            + f" (seeds {', '.join(map(str, self.seeds))}; n = {self.at_8l[self.seeds[0]].n} each"
            + ("; –: not retrieving at L, no claim past L" if "–" in past else "")
            + ")"
        )


PERPLEXITY_SHAPES = {"flat": flat_over, "degrades": lambda rises: at_least_over(rises, DEGRADES)}


RETRIEVAL_SHAPES = {"held": held, "lost": lost}


def ppl_of_seed(folder: str, encoding: str, length: int, seed: int) -> float:
    rows = cell_rows(table(folder), encoding, length, "ppl", seed)
    rows = rows[rows["status"] == "ok"]
    if len(rows) != 1:
        raise LookupError(f"results/{folder}: {len(rows)} perplexity rows of {encoding} at {length}, seed {seed}")
    return float(rows["value"].iloc[0])


def pool(cells: list[Cell]) -> Cell:
    """Binary-scored cells as one sample of all their prompts."""
    hits, n = sum(round(c.mean * c.n) for c in cells), sum(c.n for c in cells)
    low, high = proportion_interval(hits, n)
    return Cell(hits / n, low, high, n)
