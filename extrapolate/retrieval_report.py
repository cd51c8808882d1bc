"""The retrieval half of the report, with its validity rule: a retrieval cell past L is a finding only when
the same model retrieves at L (accuracy ≥ the threshold at every depth). A model that never learned the
task at L says nothing about extrapolation, so its curve past L is not drawn and its table row says so.

A training-free scaling (PI, NTK, YaRN, … on the RoPE model) is judged on the model it scales: a static
scaling changes the positions at L too (YaRN ×8 at L is not the model's training condition), and what the
rule asks is whether the model learned the task, which its base encoding's cells at L answer. Without the
base encoding's cells in the table the scaling's own cells at L decide."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .training_log import budget, formation_step

THRESHOLD = 0.8  # "retrieves at this length" when no task file says otherwise: ≥ 80% at every depth
NOT_LEARNED = "not learned at L"
NOT_MEASURED = "not measured at L"  # no cell at L: whether the model learned the task is unknown
BELOW_L = "below L"  # the model retrieves at L, this scaling of it does not


def _passkey(agg: pd.DataFrame, metric: str) -> pd.DataFrame:
    return agg[(agg["task"] == "passkey") & (agg["metric"] == metric)]


def at_L(agg: pd.DataFrame, threshold: float = THRESHOLD) -> dict[str, bool]:
    """Per encoding measured at L: greedy accuracy there is `ok` and ≥ threshold at every depth (mean over seeds)."""
    out = {}
    for encoding, group in _passkey(agg, "accuracy").groupby("encoding", sort=False):
        cells = group[group["eval_len"] == group["train_len"]]
        if len(cells):
            out[encoding] = bool((cells["status"] == "ok").all()) and bool((cells["mean"] >= threshold).all())
    return out


def task_threshold(folder: Path, table: pd.DataFrame) -> float:
    """The `threshold` of the task files whose prompts the table's retrieval rows were measured with (their
    identity is the `protocol` column), the strictest when several; THRESHOLD when none is found. Task files
    are looked up among the shipped ones and the ones the folder's run records name (a file given by path)."""
    from .errors import UserError
    from .paths import RUNS_FOLDER
    from .taskfiles import list_task_names, load_task

    identities = set(table.loc[table["task"] == "passkey", "protocol"].dropna().astype(str))
    if not identities:
        return THRESHOLD
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
        found[task.identity] = task.threshold
    return max((found[i] for i in identities if i in found), default=THRESHOLD)


def judged_on(encoding: str, measured, bases: dict[str, str] | None) -> str:
    """The encoding whose cells at L decide `encoding`'s validity: its base when that was measured too."""
    base = (bases or {}).get(encoding, encoding)
    return base if base in measured else encoding


def verdicts(agg: pd.DataFrame, bases: dict[str, str] | None = None, threshold: float = THRESHOLD) -> dict[str, str]:
    """Per encoding with retrieval cells: "yes" / "no" (its model retrieves at L or not; "(rope)" when the
    base model decided), or NOT_MEASURED when neither it nor its base model was evaluated at L."""
    measured = at_L(agg, threshold)
    out = {}
    for encoding in _passkey(agg, "accuracy")["encoding"].unique():
        judge = judged_on(encoding, measured, bases)
        if judge not in measured:
            out[encoding] = NOT_MEASURED
            continue
        out[encoding] = ("yes" if measured[judge] else "no") + (f" ({judge})" if judge != encoding else "")
    return out


def retrieves_at_L(agg: pd.DataFrame, bases: dict[str, str] | None = None, threshold: float = THRESHOLD) -> dict[str, bool]:
    """Per encoding: its model retrieves at L (see `verdicts`). `bases` (encoding -> base_encoding, from the
    results table) sends a scaling to its base model."""
    return {encoding: verdict.startswith("yes") for encoding, verdict in verdicts(agg, bases, threshold).items()}


def base_encodings(table: pd.DataFrame) -> dict[str, str]:
    """encoding -> the encoding its model was trained with, as the results table records it."""
    return dict(zip(table["encoding"], table["base_encoding"]))


def worst_depth(at_L: pd.DataFrame) -> str:
    """The depth that decides the verdict at L, e.g. "0% at depth 0" (empty when nothing was measured at L):
    why a model that retrieves on average still fails the every-depth rule."""
    if at_L.empty:
        return ""
    per_depth = at_L.groupby("depth")["mean"].mean()
    worst = per_depth.min()
    depths = [f"{depth:g}" for depth, value in per_depth.items() if value == worst]
    if len(depths) == len(per_depth):
        return f"{worst:.0%} at every depth"
    where = ("depth " if len(depths) == 1 else "depths ") + ", ".join(depths)
    return f"{worst:.0%} at {where}"


def retrieval_matrix(agg: pd.DataFrame, metric: str, valid: dict[str, bool], bases: dict[str, str] | None = None,
                     threshold: float = THRESHOLD) -> str:
    """Markdown: encoding × length, mean over depths (and seeds), with the worst depth at L; past L only for
    models that retrieve at L (a verdict taken from the base model names it: "yes (rope)")."""
    cells = _passkey(agg, metric)
    said = verdicts(agg, bases, threshold)
    lengths = sorted(cells["eval_len"].unique())
    lines = ["| encoding | L | retrieves at L | worst depth at L | " + " | ".join(str(n) for n in lengths) + " |",
             "|" + "---|" * (len(lengths) + 4)]
    for encoding, group in cells.groupby("encoding", sort=False):
        L = int(group["train_len"].iloc[0])
        worst = worst_depth(group[(group["eval_len"] == L) & (group["status"] == "ok")])
        values = []
        for n in lengths:
            at = group[group["eval_len"] == n]
            ok = at[at["status"] == "ok"]
            if at.empty:
                values.append("")
            elif ok.empty:
                values.append(str(at["status"].iloc[0]))
            elif n > L and not valid.get(encoding):
                values.append("·")
            else:
                values.append(f"{ok['mean'].mean():.0%}")
        verdict = said.get(encoding, NOT_MEASURED)
        verdict = verdict if verdict.startswith("yes") else f"**{verdict}**"
        lines.append(f"| {encoding} | {L} | {verdict} | {worst} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def retrieval_length(agg: pd.DataFrame, bases: dict[str, str] | None = None,
                     threshold: float = THRESHOLD) -> dict[str, int | str]:
    """Effective retrieval length: the largest length with accuracy ≥ threshold at every depth, every shorter
    length from L on included; NOT_LEARNED when the model does not retrieve at L (NOT_MEASURED when that is
    unknown), BELOW_L when it does but this scaling of it falls short at L already."""
    said = verdicts(agg, bases, threshold)
    out: dict[str, int | str] = {}
    for encoding, group in _passkey(agg, "accuracy").groupby("encoding", sort=False):
        if not said[encoding].startswith("yes"):
            out[encoding] = NOT_MEASURED if said[encoding] == NOT_MEASURED else NOT_LEARNED
            continue
        L, best = int(group["train_len"].iloc[0]), None
        for length, at in sorted(group[group["eval_len"] >= L].groupby("eval_len"), key=lambda item: item[0]):
            if (at["status"] != "ok").any() or (at["mean"] < threshold).any():
                break
            best = int(length)
        out[encoding] = best if best is not None else BELOW_L
    return out


def retrieval_section(agg: pd.DataFrame, training: pd.DataFrame, bases: dict[str, str] | None = None,
                      threshold: float = THRESHOLD) -> list[str]:
    if not (agg["task"] == "passkey").any():
        return []
    valid = retrieves_at_L(agg, bases, threshold)
    lines = ["## Retrieval (greedy exact match, mean over depths)", "",
             f"A model retrieves at L when its accuracy at L is ≥ {threshold:.0%} at every depth; only then are its "
             "cells past L shown (· otherwise): a model that never learned the task says nothing about "
             "extrapolation. A training-free scaling is judged on the model it scales (named in brackets), as a "
             "static scaling moves the positions at L too; a model with no cell at L is \"not measured at L\".", "", retrieval_matrix(agg, "accuracy", valid, bases, threshold), "",
             "## Retrieval rank accuracy (true key ranked first among distractors)", "",
             retrieval_matrix(agg, "rank_accuracy", valid, bases, threshold), ""]
    if len(training):
        steps, trained = formation_step(training, threshold), budget(training)
        lines += ["## Steps until retrieval formed", "",
                  f"First training step at which greedy accuracy at L (probes of a few dozen prompts during training) "
                  f"reached {threshold:.0%}; median over seeds; of the steps the model trained.", "",
                  "| encoding | step | of |", "|---|---|---|"]
        lines += [f"| {e} | {int(s) if s is not None else 'not reached'} | {trained[e]} |" for e, s in steps.items()]
        lines.append("")
    return lines
