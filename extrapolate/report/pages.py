"""Tables and figures from the results table alone: the summary of a run and the report of a sweep."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from extrapolate.core.atomic import write_text
from extrapolate.core.errors import UserError
from extrapolate.core.paths import check_output_names
from extrapolate.report.against_base import base_section
from extrapolate.report.labels import label_variants
from extrapolate.report.paired import chat_section
from extrapolate.report.per_seed import per_seed_section
from extrapolate.report.run_options import with_options
from extrapolate.report.samples import load_documents, samples_section
from extrapolate.report.setup import RECORDED_TEXT, UNRECORDED, checkpoint_lines, rotary_shape, setup_lines
from extrapolate.report.skipped import not_measured_section, status_cell
from extrapolate.report.table import (
    POSITION_COLUMNS,
    POSITIONS_FILE,
    PPL_TOLERANCE,
    RESULTS_FILE,
    aggregate,
    load_results,
    of_kind,
    read_table,
)
from extrapolate.report.training_log import heldout_section, load_training
from extrapolate.tasks.babilong.kind import BABILONG
from extrapolate.tasks.passkey import PASSKEY
from extrapolate.tasks.perplexity import PERPLEXITY
from extrapolate.tasks.ruler.kind import RULER

if TYPE_CHECKING:
    from extrapolate.report.retrieval import Rule, Verdict


def fmt(mean: float, ci: float | None = None, status: str = "ok") -> str:
    if status != "ok":
        return status_cell(status)
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    text = f"{mean:.3f}" if mean < 100 else f"{mean:.1f}"
    return text + (f" ± {ci:.3f}" if ci and ci > 0 else "")


def bound(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def fmt_cell(row) -> str:
    """One aggregated cell (`table.aggregate`) with its interval: "46.422 ± 1.203" over seeds, "46.422
    [45.1–47.8]" over one seed's documents or prompts, the bare value where no interval was recorded."""
    if row["status"] != "ok" or row["interval"] != "within":
        return fmt(row["mean"], row["ci95"], row["status"])
    return f"{fmt(row['mean'])} [{bound(row['low'])}–{bound(row['high'])}]"


def seeds_note(agg: pd.DataFrame, unit: str) -> str:
    """What a table's intervals are over, in words: "one seed; 95% interval over documents" or "mean ± 95%
    interval over 3 seeds" (a range where cells differ)."""
    counts = sorted({int(n) for n in agg.loc[agg["status"] == "ok", "n_seeds"]})
    if not counts or counts == [1]:
        if not (agg["interval"] == "within").any():
            return "one seed; no interval recorded"
        return f"one seed; [95% interval over {unit}]{bare_cells(agg)}"
    seeds = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else str(counts[0])
    one = f"; a cell of one seed: [95% interval over {unit}]{bare_cells(agg)}" if 1 in counts else ""
    return f"mean ± 95% interval over {seeds} seeds{one}"


def bare_cells(agg: pd.DataFrame) -> str:
    """Why some one-seed cells of a table that has intervals show a bare value: one unit scored (nothing to
    resample), or a row written before rows recorded their interval."""
    bare = agg[(agg["status"] == "ok") & (agg["interval"] == "none")]
    reasons = []
    if (bare["n"] == 1).any():
        reasons.append("one document or window scored, nothing to resample")
    if bare["n"].isna().any():
        reasons.append("a row written before rows recorded their interval")
    return f"; a bare value: {' or '.join(reasons)}" if reasons else ""


def _matrix(frame: pd.DataFrame, cell) -> str:
    lengths = sorted(frame["eval_len"].unique())
    lines = ["| encoding | L | " + " | ".join(str(n) for n in lengths) + " |", "|" + "---|" * (len(lengths) + 2)]
    for encoding, group in frame.groupby("encoding", sort=False):
        train_len = int(group["train_len"].iloc[0])
        by_length = {int(n): g for n, g in group.groupby("eval_len")}
        values = [cell(by_length.get(int(n)), by_length.get(train_len)) for n in lengths]
        lines.append(f"| {encoding} | {train_len} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def _ppl(agg: pd.DataFrame) -> pd.DataFrame:
    return agg[of_kind(agg, PERPLEXITY) & (agg["metric"] == "ppl")]


def perplexity_at_L(agg: pd.DataFrame, bases: dict[str, str] | None = None) -> dict[str, float]:
    """Per encoding, the perplexity ratios are taken against: its base model's perplexity at L (for a scaling
    or a fine-tune of the RoPE model, plain RoPE's at L) when the table has it, else its own. Dividing a
    scaling by its own value at L would hide what it costs at L (PI ×8 zero-shot: 133 vs RoPE's 49)."""
    from extrapolate.report.retrieval import judged_on

    own = {}
    for encoding, group in _ppl(agg).groupby("encoding", sort=False):
        at_L = group[(group["eval_len"] == group["train_len"]) & (group["status"] == "ok")]["mean"]
        if not at_L.empty:
            own[encoding] = float(at_L.iloc[0])
    encodings = _ppl(agg)["encoding"].unique()
    return {e: own[judged_on(e, own, bases)] for e in encodings if judged_on(e, own, bases) in own}


def perplexity_matrix(
    agg: pd.DataFrame, ratio: bool = False, bases: dict[str, str] | None = None, ratios: pd.DataFrame | None = None
) -> str:
    """Markdown table: encodings × lengths (mean ± 95% interval over seeds, or the ratio to the base model's
    value at L, see `perplexity_at_L`). `ratios` (report.ratios.ratio_aggregate): each ratio cell is the mean of
    the seeds' ratios with its own interval (over seeds, or paired by document), not a ratio of means."""
    reference = perplexity_at_L(agg, bases)
    own = {} if ratios is None else {(r.encoding, int(r.eval_len)): r for r in ratios.itertuples()}

    def cell(group, at_l):
        if group is None:
            return ""
        r = group.iloc[0]
        if not ratio:
            return fmt_cell(r)
        if r["status"] != "ok":
            return status_cell(r["status"])
        if (r["encoding"], int(r["eval_len"])) in own:
            q = own[(r["encoding"], int(r["eval_len"]))]
            bounds = f" [{q.low:.2f}–{q.high:.2f}]" if q.interval in ("seeds", "within") else ""
            return f"{q.mean:.2f}×{bounds}"
        if r["encoding"] not in reference:
            return "–"
        return f"{float(r['mean']) / float(reference[r['encoding']]):.2f}×"  # inf / inf: nan, unwarned

    return _matrix(_ppl(agg), cell)


def effective_length(
    agg: pd.DataFrame, tolerance: float = PPL_TOLERANCE, bases: dict[str, str] | None = None
) -> dict[str, int | None]:
    """Largest length whose perplexity stays within `tolerance` of the base model's value at L, every length
    between included; None when nothing at or past L qualifies."""
    out = {}
    reference = perplexity_at_L(agg, bases)
    for encoding, group in _ppl(agg).groupby("encoding", sort=False):
        group = group.sort_values("eval_len")
        train_len = int(group["train_len"].iloc[0])
        best = None
        if encoding in reference:
            for r in group[group["eval_len"] >= train_len].itertuples():
                if r.status != "ok" or r.mean > reference[encoding] * (1 + tolerance):
                    break
                best = int(r.eval_len)
        out[encoding] = best
    return out


def save_both(fig, folder: Path, stem: str) -> None:
    """PNG (for the page) and SVG (for print) of one figure, each written atomically."""
    from extrapolate.report.plots import save_figure

    save_figure(fig, folder / f"{stem}.svg", close=False)
    save_figure(fig, folder / f"{stem}.png")


def draw_figures(folder: Path, table: pd.DataFrame, agg: pd.DataFrame, said: dict[str, Verdict]) -> dict[str, object]:
    """Every figure the folder's tables call for, drawn in memory and keyed by file stem: nothing is written
    until the whole report has been computed, so a failure leaves the previous report and figures intact.
    `said`: whether each model retrieves at L (`report.retrieval.verdicts`)."""
    from extrapolate.report.finetune import finetune_figure, finetune_section
    from extrapolate.report.plots import frequency_figure, passkey_figure, perplexity_figure, position_figure
    from extrapolate.report.ratios import ratio_aggregate
    from extrapolate.report.retrieval import base_encodings
    from extrapolate.report.ruler import suite_figures

    figures = {}
    positions = read_table(folder / POSITIONS_FILE, POSITION_COLUMNS)  # first: a bad table stops before any figure
    labels = dict(zip(table["run_id"], table["encoding"]))  # a fine-tuned model's positions under its label
    positions = positions.assign(
        encoding=[labels.get(r, e) for r, e in zip(positions["run_id"], positions["encoding"])]
    )
    try:
        ppl = _ppl(agg)
        reference = perplexity_at_L(agg, base_encodings(table))
        if not ppl.empty:  # each kind's figure is named after it
            figures[PERPLEXITY.name] = perplexity_figure(ppl)
        ratios = ratio_aggregate(table, base_encodings(table), load_documents(folder))
        if not ratios.empty:  # no value at L to divide by: no figure
            figures["ratio"] = perplexity_figure(ratios, ratio=True)
        if finetune_section(table, {}):
            figures["finetune"] = finetune_figure(table, reference)
        if len(positions):
            figures["positions"] = position_figure(positions)
        if (of_kind(agg, PASSKEY) & (agg["metric"] == "accuracy")).any():
            figures[PASSKEY_FIGURE] = passkey_figure(agg, verdicts=said)
        figures |= suite_figures(table)  # RULER's heatmap, BABILong's
        # only where a RoPE scaling was measured: at s = 1 every curve of the figure is the flat line 1
        rotary = table[(table["base_encoding"] == "rope") & (table["factor"].astype(float) > 1)]
        shape = rotary_shape(folder)
        if len(rotary) and shape is not None:
            factor = float(rotary["factor"].max())
            head_dim, base = shape
            figures["frequencies"] = frequency_figure(
                head_dim, base, max(factor, 1.0), int(rotary.iloc[0]["train_len"])
            )
    except BaseException:
        close_figures(figures)
        raise
    return figures


def close_figures(figures: dict[str, object]) -> None:
    import matplotlib.pyplot as plt

    for fig in figures.values():
        plt.close(fig)


def save_figures(folder: Path, figures: dict[str, object]) -> dict[str, str]:
    """Write the drawn figures (PNG and SVG each); returns key -> the PNG's name, for the report's links."""
    try:
        for stem, fig in figures.items():
            save_both(fig, folder, stem)
    finally:
        close_figures(figures)
    return figure_links(figures)


def figure_links(figures: dict[str, object]) -> dict[str, str]:
    return {stem: f"{stem}.png" for stem in figures}


def write_run_report(folder: Path, table: pd.DataFrame) -> None:
    """summary.md and figures of a run folder (one or more encodings)."""
    table = label_variants(with_options(table, folder))
    write_pages(folder, table, (summary_page(folder, table),))


def summary_page(folder: Path, table: pd.DataFrame) -> tuple[Path, str, tuple[str, ...]]:
    """summary.md's (path, title, set-up lines) for a labelled table (`label_variants`)."""
    title = f"# Run summary: {', '.join(table['encoding'].unique())}"
    return folder / "summary.md", title, tuple(checkpoint_lines(folder))


def with_unrecorded(table: pd.DataFrame) -> pd.DataFrame:
    """The table as a page shows it: an empty provenance cell is "unrecorded" (strings only, for sorting and
    grouping) and an empty base encoding is the encoding itself."""
    table = table.copy()
    table[RECORDED_TEXT] = table[RECORDED_TEXT].astype(object).where(table[RECORDED_TEXT].notna(), UNRECORDED)
    table["base_encoding"] = table["base_encoding"].where(table["base_encoding"].notna(), table["encoding"])
    return table


SETUP = "## Setup"


def judged(folder: Path, table: pd.DataFrame) -> tuple[Rule, dict[str, Verdict], pd.DataFrame]:
    """(the retrieval rule, what it says of each model at L, the rows that count) of a page's table (as
    `with_unrecorded` shows it). Whether each model retrieves at L is decided once, seed by seed: the tables, the
    effective length and the figure read it, and a cell past L is the mean over the seeds that retrieve at L."""
    from extrapolate.report.retrieval import (
        across_seeds,
        base_encodings,
        counted_rows,
        pretrained_encodings,
        task_rule,
        verdicts_by_seed,
    )

    rule = task_rule(folder, table)  # the task files are read once
    by_seed = verdicts_by_seed(table, base_encodings(table), rule, pretrained_encodings(table))
    said = {encoding: across_seeds(seeds) for encoding, seeds in by_seed.items()}
    return rule, said, counted_rows(table, by_seed)


def write_pages(folder: Path, table: pd.DataFrame, pages: tuple[tuple[Path, str, tuple[str, ...]], ...]) -> None:
    """Pages of one table and their figures, each page (path, title, `setup`: lines of the set-up before the
    table's own provenance) opening with what was found and ending with how it was measured. The figures are
    drawn once for every page, and every figure and line is computed before anything is written."""
    measured = with_unrecorded(table)  # the set-up names every seed and model measured
    rule, said, table = judged(folder, measured)
    agg = aggregate(table)
    # matplotlib's log autoscale multiplies past 1e308 on such values (and before 3.9 subtracts inf from inf)
    with np.errstate(over="ignore", invalid="ignore"):
        figures = draw_figures(folder, table, agg, said)
    try:
        shared = body(agg, figure_links(figures), load_training(folder), table, rule, said, load_documents(folder))
        # every seed's own cells, whether or not its model retrieves at L (the tables above count only those that do)
        shared += (
            not_measured_section(measured)
            + per_seed_section(measured)
            + base_section(folder)
            + chat_section(folder)
            + samples_section(folder)
        )
        provenance = setup_lines(measured)
        texts = {path: [title, "", *shared, SETUP, "", *setup, *provenance, ""] for path, title, setup in pages}
    except BaseException:
        close_figures(figures)
        raise
    save_figures(folder, figures)
    for path, lines in texts.items():
        write_text(path, "\n".join(lines))


FINDINGS, FIGURES = "## Findings", "## Figures"


def body(
    agg: pd.DataFrame,
    figures: dict[str, str],
    training: pd.DataFrame,
    table: pd.DataFrame,
    rule: Rule,
    said: dict[str, Verdict],
    documents: pd.DataFrame | None = None,
) -> list[str]:
    """What the page says between its title and its set-up: the findings (effective lengths, the published
    shapes that hold or fail), the figures, then the measurements they come from. `rule`: the retrieval task's
    "retrieves at this length" (`report.retrieval.task_rule`); `said`: what it says of each model at L
    (`report.retrieval.verdicts`)."""
    found = findings(agg, table, rule, said, documents)
    return found + figure_lines(figures) + measurements(agg, training, table, rule, said, documents)


def findings(
    agg: pd.DataFrame, table: pd.DataFrame, rule: Rule, said: dict[str, Verdict], documents: pd.DataFrame | None = None
) -> list[str]:
    from extrapolate.report.retrieval import base_encodings, retrieval_length
    from extrapolate.report.ruler import suite_findings
    from extrapolate.report.shapes import shapes_section

    bases = base_encodings(table)
    eff, keys = effective_length(agg, bases=bases), retrieval_length(agg, said, rule)
    lines = [FINDINGS, ""]
    suites = suite_findings(table)
    if not eff and not keys:  # no perplexity and no retrieval rows (a RULER-only table): no empty table
        return lines + suites + shapes_section(table, documents)
    lines += [
        "### Effective length",
        "",
        f"Largest length whose perplexity stays within {PPL_TOLERANCE:.0%} of the base model's value at L, and largest "
        f"length at which the model retrieves ({rule.describe()}), every length from L on included in both "
        "(retrieval: for models that retrieve at L).",
        "",
        "| encoding | perplexity | retrieval |",
        "|---|---|---|",
    ]
    for encoding in dict.fromkeys(list(eff) + list(keys)):
        lines.append(f"| {encoding} | {eff.get(encoding) or '–'} | {keys.get(encoding) or '–'} |")
    lines.append("")
    return lines + suites + shapes_section(table, documents)


# the retrieval figure's file, named before its kind was renamed ("needle"), so links to passkey.png still hold
PASSKEY_FIGURE = "passkey"
CAPTIONS = {
    PERPLEXITY.name: "perplexity vs length",
    "ratio": "ratio to the base model at L",
    "positions": "loss by position",
    PASSKEY_FIGURE: "passkey accuracy",
    "finetune": "perplexity at L' vs fine-tuning steps",
    "frequencies": "RoPE scalings: inv_freq / θ per pair",
    RULER.name: "RULER score per task and length",
    BABILONG.name: "BABILong score per task and length",
}


def figure_lines(figures: dict[str, str]) -> list[str]:
    if not figures:
        return []
    lines = [FIGURES, ""]
    for key, name in figures.items():
        lines += [f"![{CAPTIONS[key]}]({name})", ""]
    return lines


def measurements(
    agg: pd.DataFrame,
    training: pd.DataFrame,
    table: pd.DataFrame,
    rule: Rule,
    said: dict[str, Verdict],
    documents: pd.DataFrame | None = None,
) -> list[str]:
    """The tables the findings are read from: perplexity, its ratio to L, fine-tuning, retrieval, held-out
    perplexity during training."""
    from extrapolate.report.finetune import finetune_section
    from extrapolate.report.longppl import longppl_section
    from extrapolate.report.ratios import ratio_aggregate
    from extrapolate.report.retrieval import base_encodings, retrieval_section
    from extrapolate.report.ruler import suite_sections

    bases = base_encodings(table)
    lines = []
    if of_kind(agg, PERPLEXITY).any():
        lines += [
            f"## Perplexity ({seeds_note(_ppl(agg), 'held-out documents, or windows of one document')})",
            "",
            perplexity_matrix(agg),
            "",
            "## Perplexity relative to the base model at L",
            "",
            "Each row divided by its base model's perplexity at L (a RoPE scaling or fine-tune: plain RoPE's), "
            "so a scaling's cost at L shows: each seed's ratio, then their mean with its 95% interval over the seeds "
            "(paired by document for one seed where the documents' losses are kept).",
            "",
            perplexity_matrix(agg, ratio=True, bases=bases, ratios=ratio_aggregate(table, bases, documents)),
            "",
        ]
    lines += longppl_section(table)
    lines += finetune_section(table, perplexity_at_L(agg, bases))
    lines += retrieval_section(agg, training, said, rule, table)
    lines += suite_sections(table)
    lines += heldout_section(training, bases)
    return lines


def write_report(folder: Path) -> Path:
    """report.md and every figure, regenerated from results.csv alone; summary.md too where the folder has one
    (the page `run` and `sweep` write after each cell), so the two pages never tell two versions of one table."""
    folder = Path(folder)
    if folder.is_file():
        raise UserError(f"{folder} is a file; name the results folder that holds it")
    if not folder.exists():
        raise UserError(f"{folder} does not exist; name a results folder (one `run` or `sweep` wrote)")
    if not (folder / RESULTS_FILE).exists():
        raise UserError(f"{folder} has no {RESULTS_FILE}; run `extrapolate run` or `extrapolate sweep` first")
    check_output_names(folder)
    table = label_variants(with_options(load_results(folder), folder))
    if table.empty:
        raise UserError(f"{folder / RESULTS_FILE} is empty")
    path = folder / "report.md"
    regenerate = f"- this page and its figures: `extrapolate report` on this folder, from its {RESULTS_FILE} alone"
    pages = ((path, "# extrapolate report", (*checkpoint_lines(folder), regenerate)),)
    if (folder / "summary.md").exists():  # the page `run` and `sweep` write, from the same table
        pages += (summary_page(folder, table),)
    write_pages(folder, table, pages)
    return path
