"""Figures read as drawn: no tick outside the data's range, every encoding and every variant of one in its own
colour, a figure left out where it would be an empty frame."""

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
    from extrapolate.report.pages import draw_figures, with_unrecorded
    from extrapolate.report.table import aggregate, label_variants

    table = label_variants(pd.DataFrame(ppl_rows("yarn", "rope", 2, {1024: 31.6})).assign(factor=2.0, model="small"))
    table = with_unrecorded(
        table.reindex(
            columns=[
                *table.columns,
                "protocol",
                "corpus",
                "tokenizer",
                "device",
                "dtype",
                "kernel",
                "git_sha",
                "package_version",
            ]
        )
    )
    figures = draw_figures(tmp_path, table, aggregate(table), {})  # no retrieval rows: no verdicts
    names = sorted(figures)
    for figure in figures.values():
        plt.close(figure)
    assert names == ["finetune", "perplexity"]
