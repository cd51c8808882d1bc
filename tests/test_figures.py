"""Figures read as drawn: no tick outside the data's range, every encoding and every variant of one in its own
colour, a figure left out where it would be an empty frame; the perplexity figures in one panel per family with
no two lines of a panel alike and an axis that never magnifies a percent into a cliff; the report opening with
its findings."""

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402

from extrapolate.encodings import ENCODINGS, sweep_order  # noqa: E402
from extrapolate.report.plots import colour, palette, readable  # noqa: E402

from .test_finetune import ppl_rows  # noqa: E402


def test_every_encoding_has_its_own_colour():
    colours = [ENCODINGS.get(name).colour.lower() for name in sweep_order()]
    assert len(set(colours)) == len(colours)


def test_variants_take_shades_of_their_encodings_colour():
    """ "yarn s=4" and "yarn+ft100" are yarn's, in distinct shades ordered by factor and steps; the plain name
    keeps the encoding's own colour."""
    assert colour("yarn s=4") == colour("yarn+ft100") == colour("yarn") == ENCODINGS.get("yarn").colour
    shades = palette(["yarn+ft400", "yarn", "yarn+ft25", "rope", "nope", "nope s=2"])
    assert shades["yarn"] == ENCODINGS.get("yarn").colour and shades["rope"] == ENCODINGS.get("rope").colour
    assert len({shades["yarn"], shades["yarn+ft25"], shades["yarn+ft400"]}) == 3
    darkness = [sum(matplotlib.colors.to_rgb(shades[n])) for n in ("yarn", "yarn+ft25", "yarn+ft400")]
    assert darkness == sorted(darkness, reverse=True)
    assert shades["nope s=2"] != shades["nope"]  # black is lightened, not left as is


def test_light_colours_are_darkened_for_text():
    assert readable("#000000") == "#000000" and readable("#9467bd") == "#9467bd"
    pale = matplotlib.colors.to_rgb(readable("#9edae5"))
    assert 0.299 * pale[0] + 0.587 * pale[1] + 0.114 * pale[2] == pytest.approx(0.55, abs=0.01)


@pytest.mark.parametrize("steps", [[0, 25, 100, 400], [2]])
def test_the_fine_tune_axis_has_ticks_only_at_the_steps_measured(steps):
    """A symmetric-log axis drew a −10¹ tick left of 0 (no step is negative): ticks at the measured steps,
    limits just past them."""
    from extrapolate.report.finetune import finetune_figure

    rows = [row for n in steps for row in ppl_rows("yarn", "rope", n, {1024: 60.0 - n / 10})]
    figure = finetune_figure(pd.DataFrame(rows), {"yarn": 50.0})
    ax = figure.axes[0]
    ticks, labels, (left, right) = list(ax.get_xticks()), [t.get_text() for t in ax.get_xticklabels()], ax.get_xlim()
    plt.close(figure)
    assert ticks == steps and labels == [str(n) for n in steps]
    assert -0.5 * min(n for n in steps if n > 0) < left < min(steps) and max(steps) < right < 2 * max(steps)


def test_the_ratio_figure_is_left_out_without_a_value_at_L(tmp_path):
    """A fine-tune measured only at L' has no perplexity at L to divide by: no ratio figure (it would be an
    empty frame), the perplexity and fine-tuning figures still drawn."""
    from extrapolate.report.labels import label_variants
    from extrapolate.report.pages import RECORDED_TEXT, draw_figures, with_unrecorded
    from extrapolate.report.table import aggregate

    table = label_variants(pd.DataFrame(ppl_rows("yarn", "rope", 2, {1024: 31.6})).assign(factor=2.0, model="small"))
    unrecorded = [c for c in RECORDED_TEXT if c not in table.columns]  # provenance the rows never held
    table = with_unrecorded(table.reindex(columns=[*table.columns, *unrecorded]))
    figures = draw_figures(tmp_path, table, aggregate(table), {})  # no retrieval rows: no verdicts
    names = sorted(figures)
    for figure in figures.values():
        plt.close(figure)
    assert names == ["finetune", "perplexity"]


def ppl_agg(values_by_encoding: dict[str, dict[int, float]], L: int = 256) -> pd.DataFrame:
    """The aggregated perplexity rows the figures draw: encoding -> {length: perplexity}, one seed."""
    return pd.DataFrame(
        [
            {"encoding": e, "train_len": L, "eval_len": n, "mean": v, "ci95": 0.0, "status": "ok"}
            for e, values in values_by_encoding.items()
            for n, v in values.items()
        ]
    )


# ALiBi's committed showcase row: a 1.6% change, which a fitted axis drew as a cliff from bottom to top
FLAT = {256: 51.281, 512: 50.777, 1024: 50.592, 2048: 50.466}


def test_a_flat_series_spans_at_least_ten_percent_around_its_value_at_L():
    from extrapolate.report.plots import perplexity_figure

    figure = perplexity_figure(ppl_agg({"alibi": FLAT}))
    (low, high), ticks = figure.axes[0].get_ylim(), list(figure.axes[0].get_yticks())
    plt.close(figure)
    assert low <= 51.281 * 0.9 and high >= 51.281 * 1.1
    assert len([t for t in ticks if low <= t <= high]) >= 3  # labelled, not one lone tick


def test_the_ratio_figures_bars_are_the_ratios_interval_over_seeds():
    """At L every seed's ratio of a model to itself is 1: no bar there, however far the seeds' perplexities
    at L lie apart; past L the bar is the t interval of the seeds' ratios, not the perplexity's spread."""
    from extrapolate.report.ratios import ratio_aggregate
    from extrapolate.report.stats import seeds_interval

    rows = [
        {
            "encoding": "rope",
            "seed": s,
            "train_len": 256,
            "eval_len": n,
            "task": "perplexity",
            "metric": "ppl",
            "value": v,
            "status": "ok",
            "run_id": f"r{s}",
            "protocol": "full-window",
        }
        for s, (at_l, at_2l) in enumerate([(40.0, 80.0), (50.0, 105.0), (60.0, 114.0)])
        for n, v in ((256, at_l), (512, at_2l))
    ]
    agg = ratio_aggregate(pd.DataFrame(rows), {"rope": "rope"}).set_index("eval_len")
    assert (agg.loc[256, "mean"], agg.loc[256, "low"], agg.loc[256, "high"]) == (1.0, 1.0, 1.0)
    _, _, low, high = seeds_interval([2.0, 2.1, 1.9])
    assert agg.loc[512, "mean"] == pytest.approx(2.0) and (agg.loc[512, "low"], agg.loc[512, "high"]) == (
        pytest.approx(low),
        pytest.approx(high),
    )


def test_the_ratio_figure_shades_the_ten_percent_band_and_spans_it():
    from extrapolate.report.plots import perplexity_figure

    figure = perplexity_figure(ppl_agg({"alibi": {n: v / 51.281 for n, v in FLAT.items()}}), ratio=True)
    ax = figure.axes[0]
    # the band's vertical extent in data units, whether matplotlib draws it as a Rectangle (3.9+) or a Polygon
    spans = [p.get_path().transformed(p.get_patch_transform()).vertices[:, 1] for p in ax.patches]
    bands = [(float(y.min()), float(y.max())) for y in spans]
    (low, high) = ax.get_ylim()
    plt.close(figure)
    assert bands == [(pytest.approx(0.9), pytest.approx(1.1))]
    assert low < 0.9 and high > 1.1  # the band's edges inside the frame


def test_the_span_floor_holds_the_data_and_ten_percent_around_each_centre():
    from extrapolate.report.panels import span_floor

    low, high = span_floor(50.4, 51.3, [51.3], 0.10)
    assert low <= 51.3 * 0.9 and high >= 51.3 * 1.1
    low, high = span_floor(40.0, 150.0, [46.4, 135.6], 0.10)  # a wide range keeps all of its data
    assert low <= 40.0 and high >= 150.0
    assert span_floor(51.0, 51.0, [], 0.10) == (
        pytest.approx(51 * 0.9 * 0.98, rel=1e-3),
        pytest.approx(51 * 1.1 / 0.98, rel=1e-3),
    )


def test_every_encoding_lands_in_exactly_one_panel_and_an_unknown_one_in_other(monkeypatch):
    import dataclasses

    from extrapolate.report.panels import ABSOLUTE, BIAS, OTHER, ROTARY, SCALINGS, family, panels

    labels = [*sweep_order(), "yarn s=4", "rope+ft100", "pi+ft25", "mystery-encoding"]
    grouped = panels(labels)
    placed = [label for members in grouped.values() for label in members]
    assert sorted(placed) == sorted(labels)  # each once
    assert grouped[OTHER] == ["nope", "stick-breaking", "drope", "mystery-encoding"]  # kinds without positions
    assert {family(n) for n in ("sinusoidal", "learned")} == {ABSOLUTE}
    assert {family(n) for n in ("alibi", "t5", "kerple-log", "fire")} == {BIAS}
    assert {family(n) for n in ("rope", "xpos", "rope+ft100")} == {ROTARY}
    assert {family(n) for n in ("pi", "ntk", "yarn", "yarn s=4", "llama3", "longrope")} == {SCALINGS}
    # a new encoding lands by its registry kind, one of a kind no panel names in "other"
    from extrapolate.encodings import ENCODINGS

    alibi = ENCODINGS.get("alibi")
    monkeypatch.setitem(ENCODINGS._items, "new-bias", dataclasses.replace(alibi, name="new-bias"))
    monkeypatch.setitem(ENCODINGS._items, "wavelet", dataclasses.replace(alibi, name="wavelet", kind="wavelet"))
    assert family("new-bias") == BIAS and family("wavelet") == OTHER


def drawn_lines(figure) -> list[list[tuple[str, tuple, str, str]]]:
    """Per panel, each legend entry's (label, colour, line style, marker) as drawn."""
    from matplotlib.colors import to_rgb

    out = []
    for ax in figure.axes:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        out.append(
            [(line.get_label(), to_rgb(line.get_color()), line.get_linestyle(), line.get_marker()) for line in lines]
        )
    return out


@pytest.mark.parametrize("ratio", [False, True])
def test_no_two_lines_of_a_panel_look_alike_and_every_encoding_is_drawn(ratio):
    """All 22 encodings, variants of one and a name the registry lacks: each drawn in exactly one panel (plain
    RoPE also as the reference in the others), and within a panel no two lines share colour, style and
    marker."""
    from extrapolate.report.plots import perplexity_figure

    labels = [*sweep_order(), "yarn s=4", "yarn+ft100", "pi+ft25", "mystery-encoding"]
    agg = ppl_agg({label: {256: 40.0 + i, 512: 41.0 + i} for i, label in enumerate(labels)})
    figure = perplexity_figure(agg, ratio=ratio)
    panels = [panel for panel in drawn_lines(figure) if panel]
    plt.close(figure)
    own = [label for panel in panels for label, *_ in panel if label != "rope (reference)"]
    assert sorted(own) == sorted(labels)
    assert len(panels) == 5 and all(panel[0][0] in ("rope", "rope (reference)") for panel in panels)
    for panel in panels:
        looks = [look for _, *look in panel]
        assert len(set(map(tuple, looks))) == len(looks), panel
    reference = {tuple(look) for panel in panels for label, *look in panel if label in ("rope", "rope (reference)")}
    assert len(reference) == 1  # the reference line looks the same in every panel


def test_looks_stay_apart_for_many_lines_and_the_palette_is_okabe_ito():
    from extrapolate.report.panels import LINE_COLOURS, OKABE_ITO, looks

    many = [f"method-{i}" for i in range(40)] + [f"yarn+ft{n}" for n in range(1, 12)] + ["yarn"]
    chosen = looks(many)
    assert len({(look.colour, look.linestyle, look.marker) for look in chosen.values()}) == len(many)
    assert {look.colour for look in chosen.values()} <= set(LINE_COLOURS) <= set(OKABE_ITO)
    few = looks(["pi", "ntk", "yarn", "llama3"])  # a small panel: every line differs in colour and marker too
    assert len({look.colour for look in few.values()}) == 4 and len({look.marker for look in few.values()}) == 4


def test_the_report_opens_with_the_findings_and_ends_with_the_setup(tmp_path):
    """The committed reference table, re-reported: the first section after the title is the findings, the
    last the set-up, and no section of the old order is lost."""
    from pathlib import Path

    import pandas as pd

    from extrapolate.report.pages import write_report

    table = pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "reference" / "results.csv")
    old = table["task"] == "perplexity"  # as rows written before perplexity recorded its interval
    table.loc[old, ["n", "ci_low", "ci_high", "ci_method"]] = None
    table.to_csv(tmp_path / "results.csv", index=False)
    text = write_report(tmp_path).read_text()
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert text.startswith("# extrapolate report\n\n## Findings\n\n### Effective length")
    assert sections[0] == "## Findings" and sections[-1] == "## Setup"
    assert "### The published shapes" in text.split("## Figures")[0]  # a finding, before the figures
    # one seed, rows written before intervals were recorded: perplexity claims no interval; retrieval's Wilson
    # interval comes from the prompts each row counts (its n_tokens are prompts × length)
    for heading in (
        "## Perplexity (one seed; no interval recorded)",
        "## Perplexity relative to the base model at L",
        "## Retrieval (greedy exact match, mean over depths; one seed: [exact 95% interval over the 50 prompts "
        "of a length])",
    ):
        assert heading in sections
    setup = text.split("## Setup")[1]
    assert "- model: `tiny`" in setup and "extrapolate 0.1.0" in setup and "device `cpu`" in setup


def test_a_perplexity_figure_says_what_its_error_bars_are_over():
    from extrapolate.report.plots import bars_note

    def agg(*cells):  # (interval, n_seeds) per cell
        return pd.DataFrame([{"interval": interval, "n_seeds": n} for interval, n in cells])

    assert bars_note(agg(("seeds", 3), ("within", 1))) == "bars: mean and 95% interval over 3 seeds"
    assert bars_note(agg(("seeds", 2), ("seeds", 3))) == "bars: mean and 95% interval over 2–3 seeds"
    assert bars_note(agg(("within", 1), ("none", 1))) == "bars: 95% interval over held-out documents (one seed)"
    assert bars_note(agg(("none", 1))) == ""
