"""The retrieval half of the report, with its validity rule.

"Retrieves at a length" follows RULER's convention: the mean greedy accuracy over the task's depths (each
the mean over seeds) is ≥ the task file's `threshold`; a task file may also set `depth_floor`, a score every
depth must reach (none by default). One missed depth does not undo a model that retrieves everywhere else:
SmolLM2 at its own 8192 scores 80% on average with depth 0 at 0%, and it retrieves there; the worst depth
at L is named next to the verdict, so the miss stays in view.

A retrieval cell past L is a finding only when the same model retrieves at L: a model that never formed
retrieval says nothing about extrapolation. Its cells are still shown as measured, marked as not counted
(italics in the tables, hatched in the figure), and the verdict says why in the words that fit the model:
"not learned at L" for one trained here, "fails at L: …" for a pretrained one, which learned the task
elsewhere and misses it at its own length.

Over several seeds the rule is applied seed by seed, as each seed is a model of its own: an encoding's
cells are the mean over the seeds whose model retrieves at L, and the verdict says how many do and what the
others scored at L ("yes in 2 of 3 seeds (seed 2: mean 2% at L)"). A mean over seeds would let one seed
that never learned the task mark every seed's cells as not findings, or drag a mean past L down for a
reason that is not extrapolation.

A training-free scaling (PI, NTK, YaRN, … on the RoPE model) is judged on the model it scales: a static
scaling changes the positions at L too (YaRN ×8 at L is not the model's training condition), and what the
rule asks is whether the model learned the task, which its base encoding's cells at L answer. Without the
base encoding's cells in the table the scaling's own cells at L decide."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from extrapolate.report.skipped import status_cell
from extrapolate.report.table import length_means, of_kind
from extrapolate.report.training_log import budget, formation_step
from extrapolate.tasks.passkey import PASSKEY

THRESHOLD = 0.8  # "retrieves at this length" when no task file says otherwise: mean over depths ≥ 80%
# a mean of tenths that should be 0.8 can sum to 0.7999…: a score this close to the threshold reaches it
TOLERANCE = 1e-9
RETRIEVES = "yes"  # the model retrieves at L
NOT_LEARNED = "not learned at L"  # a model trained here that does not retrieve at L
FAILS = "fails at L"  # a pretrained model that does not retrieve at its own length
NOT_MEASURED = "not measured at L"  # no cell at L: whether the model learned the task is unknown
BELOW_L = "below L"  # the model retrieves at L, this scaling of it does not


@dataclass(frozen=True)
class Rule:
    """When a model retrieves at one length: mean greedy accuracy over depths ≥ `threshold` and every depth
    ≥ `depth_floor` (0: no floor), every cell measured."""

    threshold: float = THRESHOLD
    depth_floor: float = 0.0

    def shortfall(self, cells: pd.DataFrame) -> str:
        """What keeps `cells` (one length's rows, one per depth) from retrieving, e.g. "mean 60%" or "depth 0
        at 0%" (below the floor); empty when they retrieve."""
        if cells.empty:
            return "not measured"
        if (cells["status"] != "ok").any():
            return str(cells.loc[cells["status"] != "ok", "status"].iloc[0])
        mean = float(cells["mean"].mean())
        if mean < self.threshold - TOLERANCE:
            return f"mean {mean:.0%}"
        per_depth = cells.groupby("depth")["mean"].mean()
        if per_depth.min() < self.depth_floor - TOLERANCE:
            return f"depth {per_depth.idxmin():g} at {per_depth.min():.0%}"
        return ""

    def retrieves(self, cells: pd.DataFrame) -> bool:
        return not self.shortfall(cells)

    def describe(self) -> str:
        """The rule in words, for the report: "mean greedy accuracy over depths ≥ 80%"."""
        floor = f", every depth ≥ {self.depth_floor:.0%}" if self.depth_floor > 0 else ""
        return f"mean greedy accuracy over depths ≥ {self.threshold:.0%}{floor}"


@dataclass(frozen=True)
class Verdict:
    """Whether an encoding's model retrieves at L, decided once from the cells at L; the tables, the effective
    length and the figure read its fields. `reason`: RETRIEVES, NOT_LEARNED (a model trained here), FAILS (a
    pretrained one) or NOT_MEASURED (no cell at L); `judge`: the model whose cells decided when it is not the
    encoding's own (a scaling's base model), else empty; `shortfall`: what kept those cells from retrieving
    (`Rule.shortfall`, e.g. "mean 60%"), empty when they retrieve."""

    reason: str
    judge: str = ""
    shortfall: str = ""
    seeds: str = ""  # over several seeds where not all retrieve: "2 of 3 seeds" (`across_seeds`)

    @property
    def retrieves(self) -> bool:
        return self.reason == RETRIEVES

    @property
    def text(self) -> str:
        """The verdict in the report's words: "yes", "yes (rope)", "not learned at L", "fails at L (rope): mean
        10%", "not measured at L"."""
        if self.reason == NOT_MEASURED:
            return NOT_MEASURED
        named = f" ({self.judge})" if self.judge else ""
        if self.reason == FAILS:  # a pretrained model learned the task elsewhere: how far it falls short
            return f"{FAILS}{named}: {self.shortfall}"
        return self.reason + named + (f" in {self.seeds}" if self.seeds else "")


UNKNOWN = Verdict(NOT_MEASURED)  # an encoding without retrieval cells at L, its own or its base model's


def _passkey(agg: pd.DataFrame, metric: str) -> pd.DataFrame:
    return agg[of_kind(agg, PASSKEY) & (agg["metric"] == metric)]


def at_L(agg: pd.DataFrame, rule: Rule = Rule()) -> dict[str, str]:
    """Per encoding measured at L: what keeps it from retrieving there (`Rule.shortfall`; empty: it retrieves)."""
    out = {}
    for encoding, group in _passkey(agg, "accuracy").groupby("encoding", sort=False):
        cells = group[group["eval_len"] == group["train_len"]]
        if len(cells):
            out[encoding] = rule.shortfall(cells)
    return out


def task_rule(folder: Path, table: pd.DataFrame) -> Rule:
    """The rule of the task files whose prompts the table's retrieval rows were measured with (their identity
    is the `protocol` column), the strictest threshold and floor when several; the default rule when none is
    found. Task files are looked up among the shipped ones and the ones the folder's run records name (a file
    given by path)."""
    from extrapolate.core.errors import UserError
    from extrapolate.core.paths import RUNS_FOLDER
    from extrapolate.tasks.files import list_task_names, load_task

    identities = set(table.loc[of_kind(table, PASSKEY), "protocol"].dropna().astype(str))
    if not identities:
        return Rule()
    named = set(list_task_names())
    for record in [folder / "run.json", *sorted((folder / RUNS_FOLDER).glob("*.json"))]:
        try:
            named.add(str(json.loads(record.read_text())["request"]["passkey_task"]))
        except (OSError, ValueError, KeyError, TypeError):  # a record without one, or not readable: skipped
            continue
    found = {}
    for name in named:
        try:
            task = load_task(name)
        except UserError:  # a file since moved or broken: its rows fall back to the default
            continue
        found[task.identity] = task
    tasks = [found[i] for i in identities if i in found]
    if not tasks:
        return Rule()
    return Rule(max(t.threshold for t in tasks), max(t.depth_floor for t in tasks))


def pretrained_encodings(table: pd.DataFrame) -> frozenset[str]:
    """The encodings (labels) whose rows come from a model not trained here. A run's model is a size preset
    (trained here) or a pretrained one (`run.checkpoint.is_pretrained`: a known name, a checkpoint, a hub id);
    for a recorded row the preset names alone tell them apart, without looking at this machine's files. A
    row without a recorded model predates pretrained models: trained here."""
    from extrapolate.core.config import PRESETS

    models = table.dropna(subset=["model"]).groupby("encoding", sort=False)["model"].first().astype(str)
    return frozenset(e for e, m in models.items() if m not in PRESETS and m != "unrecorded")


def judged_on(encoding: str, measured, bases: dict[str, str] | None) -> str:
    """The encoding whose cells at L decide `encoding`'s validity: its base when that was measured too."""
    base = (bases or {}).get(encoding, encoding)
    return base if base in measured else encoding


def verdicts(
    agg: pd.DataFrame,
    bases: dict[str, str] | None = None,
    rule: Rule = Rule(),
    pretrained: frozenset[str] = frozenset(),
) -> dict[str, Verdict]:
    """Per encoding with retrieval cells: whether its model retrieves at L, judged on its base model's cells
    when those were measured (`judged_on`); else why not, in the words that fit the model: NOT_LEARNED for
    one trained here, FAILS for one in `pretrained` (the labels of pretrained models); NOT_MEASURED when
    neither it nor its base model was evaluated at L. `bases`: encoding -> base_encoding, from the table."""
    shortfalls = at_L(agg, rule)
    out = {}
    for encoding in _passkey(agg, "accuracy")["encoding"].unique():
        judge = judged_on(encoding, shortfalls, bases)
        if judge not in shortfalls:
            out[encoding] = UNKNOWN
            continue
        shortfall = shortfalls[judge]
        if not shortfall:
            reason = RETRIEVES
        elif judge in pretrained or encoding in pretrained:
            reason = FAILS
        else:
            reason = NOT_LEARNED
        out[encoding] = Verdict(reason, judge if judge != encoding else "", shortfall)
    return out


def verdicts_by_seed(
    table: pd.DataFrame,
    bases: dict[str, str] | None = None,
    rule: Rule = Rule(),
    pretrained: frozenset[str] = frozenset(),
) -> dict[str, dict[int, Verdict]]:
    """Per encoding, per seed: `verdicts` of that seed's rows alone (a scaling judged on the same seed's base
    model)."""
    from extrapolate.report.table import aggregate

    out: dict[str, dict[int, Verdict]] = {}
    for seed, rows in table.groupby("seed", sort=True):
        for encoding, verdict in verdicts(aggregate(rows), bases, rule, pretrained).items():
            out.setdefault(encoding, {})[int(seed)] = verdict
    return out


def across_seeds(by_seed: dict[int, Verdict]) -> Verdict:
    """One verdict of an encoding from its seeds' (`verdicts_by_seed`): a seed's own where there is one seed or
    all agree on retrieving; RETRIEVES with `seeds` ("2 of 3 seeds") where some retrieve; where none does, the
    first seed's reason, with the shortfall of each seed that has one."""
    verdicts_ = list(by_seed.values())
    good = [v for v in verdicts_ if v.retrieves]
    if len(verdicts_) == 1 or len(good) == len(verdicts_):
        return verdicts_[0]
    if good:
        left_out = ", ".join(
            f"seed {s}: {v.shortfall} at L" if v.shortfall else f"seed {s}: {v.reason}"
            for s, v in by_seed.items()
            if not v.retrieves
        )
        return Verdict(RETRIEVES, good[0].judge, seeds=f"{len(good)} of {len(verdicts_)} seeds ({left_out})")
    measured = [v for v in verdicts_ if v.reason != NOT_MEASURED]
    if not measured:
        return UNKNOWN
    shortfall = "; ".join(f"seed {s}: {v.shortfall}" for s, v in by_seed.items() if v.shortfall)
    return Verdict(measured[0].reason, measured[0].judge, shortfall)


def counted_rows(table: pd.DataFrame, by_seed: dict[str, dict[int, Verdict]]) -> pd.DataFrame:
    """`table` without the retrieval rows of the seeds that do not retrieve at L, for each encoding one of
    whose seeds does: its cells (at L too, so that the effective length and the worst depth are those of the
    same models) are then the mean over the seeds that count, and its verdict names the seeds left out and
    their score at L. An encoding with no seed retrieving keeps every row (its cells are shown, none
    counted past L)."""
    passkey = of_kind(table, PASSKEY)
    drop = pd.Series(False, index=table.index)
    for encoding, seeds in by_seed.items():
        if not any(v.retrieves for v in seeds.values()):
            continue
        failing = [s for s, v in seeds.items() if not v.retrieves]
        drop |= passkey & (table["encoding"] == encoding) & table["seed"].astype(int).isin(failing)
    return table[~drop]


def retrieves_at_L(agg: pd.DataFrame, bases: dict[str, str] | None = None, rule: Rule = Rule()) -> dict[str, bool]:
    """Per encoding: its model retrieves at L (`verdicts`, read for that field alone)."""
    return {encoding: verdict.retrieves for encoding, verdict in verdicts(agg, bases, rule).items()}


def base_encodings(table: pd.DataFrame) -> dict[str, str]:
    """encoding -> the encoding its model was trained with, as the results table records it."""
    return dict(zip(table["encoding"], table["base_encoding"]))


def worst_depth(at_L: pd.DataFrame) -> str:
    """The lowest depth at L, e.g. "0% at depth 0" (empty when nothing was measured at L): the miss a mean
    over depths can hide, named next to the verdict."""
    if at_L.empty:
        return ""
    per_depth = at_L.groupby("depth")["mean"].mean()
    worst = per_depth.min()
    depths = [f"{depth:g}" for depth, value in per_depth.items() if value == worst]
    if len(depths) == len(per_depth):
        return f"{worst:.0%} at every depth"
    where = ("depth " if len(depths) == 1 else "depths ") + ", ".join(depths)
    return f"{worst:.0%} at {where}"


def counted(length: int, L: int, verdict: Verdict) -> bool:
    """Whether a measured cell is a finding: up to L always, past L only when the model retrieves at L."""
    return length <= L or verdict.retrieves


def retrieval_matrix(
    agg: pd.DataFrame,
    metric: str,
    said: dict[str, Verdict],
    table: pd.DataFrame | None = None,
    threshold: float | None = None,
) -> str:
    """Markdown: encoding × length, mean over depths (and seeds), with the verdict (`said`: `verdicts`) and the
    worst depth at L. Every measured cell is shown; one past L of a model that does not retrieve at L is in
    italics (measured, not a finding), and the verdict says why. With the results `table`, each cell carries
    its 95% interval (`table.length_means`), e.g. "94% [84–98]", marked † where it straddles `threshold`."""
    cells = _passkey(agg, metric)
    spread = {}
    if table is not None:
        means = length_means(table, PASSKEY, metric)
        spread = {(r.encoding, int(r.eval_len)): (r.low, r.high) for r in means.itertuples() if r.low == r.low}
    lengths = sorted(cells["eval_len"].unique())
    lines = [
        "| encoding | L | retrieves at L | worst depth at L | " + " | ".join(str(n) for n in lengths) + " |",
        "|" + "---|" * (len(lengths) + 4),
    ]
    for encoding, group in cells.groupby("encoding", sort=False):
        L, verdict = int(group["train_len"].iloc[0]), said.get(encoding, UNKNOWN)
        worst = worst_depth(group[(group["eval_len"] == L) & (group["status"] == "ok")])
        values = []
        for n in lengths:
            at = group[group["eval_len"] == n]
            ok = at[at["status"] == "ok"]
            if at.empty:
                values.append("")
            elif ok.empty:
                values.append(status_cell(str(at["status"].iloc[0])))
            else:
                value = f"{ok['mean'].mean():.0%}"
                if (encoding, int(n)) in spread:
                    low, high = spread[encoding, int(n)]
                    straddles = threshold is not None and low < threshold <= high
                    value += f" [{low * 100:.0f}–{high * 100:.0f}]" + ("†" if straddles else "")
                values.append(value if counted(int(n), L, verdict) else f"*{value}*")
        shown = verdict.text if verdict.retrieves else f"**{verdict.text}**"
        lines.append(f"| {encoding} | {L} | {shown} | {worst} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def retrieval_length(agg: pd.DataFrame, said: dict[str, Verdict], rule: Rule = Rule()) -> dict[str, int | str]:
    """Effective retrieval length: the largest length at which the model retrieves by `rule`, every length from
    L on included; for a model that does not retrieve at L (`said`: `verdicts`) why not (NOT_LEARNED, FAILS,
    or NOT_MEASURED when that is unknown), BELOW_L when it does but this scaling of it falls short at L
    already ("below 16384" when it has no cell at L and falls short at its first length, 16384)."""
    out: dict[str, int | str] = {}
    for encoding, group in _passkey(agg, "accuracy").groupby("encoding", sort=False):
        verdict = said[encoding]
        if not verdict.retrieves:
            out[encoding] = verdict.reason
            continue
        L, best = int(group["train_len"].iloc[0]), None
        measured = sorted(group[group["eval_len"] >= L].groupby("eval_len"), key=lambda item: item[0])
        for length, at in measured:
            if not rule.retrieves(at):
                break
            best = int(length)
        # short at its first length: at L (BELOW_L), or, with no cell at L, at the first one measured past it
        first = int(measured[0][0]) if measured else L
        out[encoding] = best if best is not None else BELOW_L if first == L else f"below {first}"
    return out


def retrieval_section(
    agg: pd.DataFrame,
    training: pd.DataFrame,
    said: dict[str, Verdict],
    rule: Rule = Rule(),
    table: pd.DataFrame | None = None,
) -> list[str]:
    """The retrieval tables and the steps until retrieval formed; `said`: `verdicts` by `rule`; with the
    results `table`, every cell with its interval."""
    if not of_kind(agg, PASSKEY).any():
        return []
    over = ""
    means = length_means(table, PASSKEY, "accuracy") if table is not None else None
    if means is not None and means["n"].notna().any():  # rows written before intervals were: none claimed
        seeds, prompts = sorted(set(means["n_seeds"].astype(int))), sorted(set(means["n"].dropna().astype(int)))
        counts = ", ".join(map(str, prompts))
        span = str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
        over = (
            f"; one seed: [exact 95% interval over the {counts} prompts of a length]"
            if seeds == [1]
            else f"; [95% interval over {span} seeds' means, at least the exact one over their prompts, or the "
            "exact one where one seed]; the seeds whose model retrieves at L"
        )
    lines = [
        f"## Retrieval (greedy exact match, mean over depths{over})",
        "",
        f"A model retrieves at a length when, at that length, {rule.describe()} (RULER's convention; the "
        "worst depth at L has its own column). A cell past L is a finding only when the model retrieves "
        'at L; otherwise it is shown in italics, measured but not counted, and the verdict says why: "not '
        'learned at L" for a model trained here, "fails at L" for a pretrained one. A training-free '
        "scaling is judged on the model it scales (named in brackets), as a static scaling moves the positions "
        'at L too; a model with no cell at L is "not measured at L". The verdicts and effective lengths read the '
        "point estimates; † marks a length whose interval straddles the threshold, where more prompts could "
        "change the verdict.",
        "",
        retrieval_matrix(agg, "accuracy", said, table, rule.threshold),
        "",
        "## Retrieval rank accuracy (true key ranked first among distractors)",
        "",
        retrieval_matrix(agg, "rank_accuracy", said, table),
        "",
    ]
    if len(training):
        steps, trained = formation_step(training, rule.threshold), budget(training)
        lines += [
            "## Steps until retrieval formed",
            "",
            f"First training step at which greedy accuracy at L (probes of a few dozen prompts during training) "
            f"reached {rule.threshold:.0%}; median over seeds, a seed that never did counted as later than any; of "
            "the steps the model trained.",
            "",
            "| encoding | step | of |",
            "|---|---|---|",
        ]
        for encoding, (step, never, seeds) in steps.items():
            shown = f"{int(step)}" if step is not None else "not reached"
            if never and seeds > 1:  # the seeds that never formed retrieval, beside the median they enter
                shown += f" ({never} of {seeds} seeds never)"
            lines.append(f"| {encoding} | {shown} | {trained[encoding]} |")
        lines.append("")
    return lines
