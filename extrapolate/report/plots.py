"""Pure functions from data to matplotlib figures; saving is separate and atomic."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from extrapolate.core.atomic import atomic_path  # noqa: E402
from extrapolate.core.intervals import proportion_interval  # noqa: E402
from extrapolate.encodings.frequencies import SCALINGS, rope_inv_freq  # noqa: E402
from extrapolate.report.labels import encoding_of, variant_order
from extrapolate.report.table import PPL_TOLERANCE, of_kind
from extrapolate.tasks.passkey import PASSKEY  # noqa: E402

if TYPE_CHECKING:
    from extrapolate.report.retrieval import Verdict


def colour(name: str) -> str:
    """The encoding's own colour (its spec carries it), the same in every plot, for its variants' labels too
    ("yarn s=4", "yarn+ft100"); grey for other labels."""
    from extrapolate.encodings import ENCODINGS

    name = encoding_of(name)
    return ENCODINGS.get(name).colour if name in ENCODINGS else "#555555"


def palette(labels) -> dict[str, str]:
    """A colour per label: its encoding's own (`colour`); where one figure holds several variants of one
    encoding (factors, fine-tuning steps), each further one a deeper shade of it (darker, or lighter for a
    dark colour), so that variants stay apart and still read as one encoding."""
    from matplotlib.colors import to_hex, to_rgb

    groups: dict[str, list[str]] = {}
    for label in dict.fromkeys(str(label) for label in labels):
        groups.setdefault(encoding_of(label), []).append(label)
    out = {}
    for members in groups.values():
        rgb = to_rgb(colour(members[0]))
        towards = 1.0 if sum(rgb) / 3 < 0.3 else 0.0  # black cannot darken: lighten it
        for rank, label in enumerate(sorted(members, key=variant_order)):
            mix = 0.6 * rank / max(len(members) - 1, 1)
            out[label] = to_hex(tuple(c + (towards - c) * mix for c in rgb))
    return out


def readable(colour_: str) -> str:
    """`colour_` as text on white: a light colour (fire's pale cyan, KERPLE-power's pale pink) darkened until
    it reads, a dark one unchanged."""
    from matplotlib.colors import to_hex, to_rgb

    rgb = to_rgb(colour_)
    light = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]  # perceived brightness, 0…1
    scale = min(1.0, 0.55 / light) if light > 0 else 1.0
    return to_hex(tuple(c * scale for c in rgb))


def train_length_marks(ax, train_lens) -> None:
    """A dotted line at each training length, labelled on a light box so that no curve runs through the text."""
    for L in sorted(set(train_lens)):
        ax.axvline(L, color="#444444", linestyle=":", linewidth=1.2)
        ax.annotate(
            f"train L={L}",
            (L, 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, -14),
            textcoords="offset points",
            fontsize=8,
            color="#444444",
            zorder=5,
            bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )


def frequency_figure(head_dim: int, base: float, factor: float, original_len: int, highlight: str | None = None):
    """inv_freq / θ per pair index for every RoPE scaling: the picture that tells PI, NTK and YaRN apart."""
    theta = rope_inv_freq(head_dim, base)
    fig, ax = plt.subplots(figsize=(8.2, 4.2), dpi=120)
    seq_len = round(original_len * factor)
    for name, scaling in SCALINGS.items():
        if head_dim < scaling.min_head_dim:  # NTK's base·s^(d/(d-2)) has no value at d = 2
            continue
        inv_freq, _ = scaling.fn(head_dim, base, factor, original_len, seq_len)
        width = 2.8 if name == highlight else 1.6
        style = "--" if scaling.dynamic else "-"  # dynamic kinds shown at l = L·s
        ax.plot(
            range(head_dim // 2), (inv_freq / theta).tolist(), style, label=name, color=colour(name), linewidth=width
        )
    ax.set_yscale("log", base=2)
    ax.set_xlabel("pair index j (high frequency → low frequency)")
    ax.set_ylabel("inv_freq / θ  (1 = unchanged, 1/s = interpolated)")
    ax.set_title(f"RoPE scalings: d={head_dim}, base={base:g}, s={factor:g}, L={original_len}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never hides a curve
    fig.tight_layout()
    return fig


# Without these an SVG or PDF changes on every save (a timestamp, random clip-path ids), so re-deriving
# committed results would show every plot as modified even when no number moved.
STABLE_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}


def save_figure(fig, path: Path | str, close: bool = True) -> None:
    """Write atomically (temporary file, then rename); the format follows the suffix. The same figure gives
    the same bytes."""
    path = Path(path)
    fmt = path.suffix.lstrip(".") or "png"
    try:
        with atomic_path(path) as tmp, matplotlib.rc_context({"svg.hashsalt": "extrapolate"}):
            fig.savefig(tmp, format=fmt, metadata=STABLE_METADATA.get(fmt))
    finally:
        if close:
            plt.close(fig)


def plain_log_ticks(ax) -> None:
    """Plain numbers (5, 6, 10, 20) on a log y axis instead of 6×10⁰."""
    from matplotlib.ticker import FormatStrFormatter

    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _length_axis(ax, lengths, train_lens):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(lengths))
    ax.set_xticklabels([f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n) for n in sorted(lengths)])
    train_length_marks(ax, train_lens)
    ax.grid(True, which="both", alpha=0.3)


# round numbers a log axis over less than a decade is labelled at (× a power of ten), roundest first
LOG_MANTISSAS = ((1,), (2, 5), (1.5, 3, 4, 6, 8), (1.2, 2.5, 7, 9))


def log_ticks(ax) -> None:
    """Plain-number ticks on a log y axis whose limits are set. Over a decade or more, the axis's own
    (`plain_log_ticks`); over less than twice, evenly stepped round numbers (46, 48, 50…), where log and linear
    spacing barely differ; in between, the roundest numbers that keep apart on the log scale (`LOG_MANTISSAS`:
    1 and 10 first, then 2 and 5, …), since the axis's own are then one or two."""
    import math

    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    lo, hi = ax.get_ylim()
    if not (0 < lo < hi < 1e300):  # an axis at the edge of floats (a perplexity of 1e308): one tick, as the
        # locators cannot step through it
        ax.yaxis.set_major_locator(FixedLocator([lo] if 0 < lo < math.inf else []))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter("{x:.3g}")
        return
    if hi / lo >= 10:
        plain_log_ticks(ax)
        return
    if hi / lo < 2:
        ticks = [t for t in MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
    else:
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        gap, ticks = math.log(hi / lo) / 9, []  # at most about nine labels
        for tier in LOG_MANTISSAS:
            for t in (float(f"{m * 10.0**e:.6g}") for e in decades for m in tier):
                if lo <= t <= hi and all(abs(math.log(t / other)) >= gap for other in ticks):
                    ticks.append(t)
        ticks.sort()
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter("{x:g}")


def panel_axes(count: int, title: str, ylabel: str, xlabel: str):
    """A figure of `count` panels (`panels.grid`) sharing the y axis, each with room for its legend on its
    right; the grid's unused cells left blank."""
    from extrapolate.report.panels import grid

    rows, columns = grid(count)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(6.6 * columns, 3.1 * rows + 1.0),
        dpi=120,
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax in axes.flat[max(count, 1) :]:
        ax.axis("off")
    fig.suptitle(title)
    fig.supylabel(ylabel, fontsize=10)
    fig.supxlabel(xlabel, fontsize=10)
    return fig, list(axes.flat[: max(count, 1)])


def panel_legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:  # every cell failed: an empty frame, no legend
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=3.2)  # outside a curve


def interval_distances(group):
    """(2, n) distances from each aggregated cell's value down and up to its 95% interval (over seeds, cut to
    the metric's range, or over one seed's documents): matplotlib's asymmetric error bars; 0 where a cell has
    none."""
    import numpy as np

    mean = group["mean"].to_numpy(dtype=float)
    half = group["ci95"].fillna(0).to_numpy(dtype=float)
    if "interval" not in group:  # an aggregate of before the intervals: over seeds only
        return np.stack([half, half])
    bounded = group["interval"].isin(["within", "seeds"]).to_numpy()
    low = np.where(bounded, mean - group["low"].to_numpy(dtype=float), half)
    high = np.where(bounded, group["high"].to_numpy(dtype=float) - mean, half)
    return np.nan_to_num(np.stack([low, high]).clip(min=0))


def bars_note(agg, of: str = "") -> str:
    """What a perplexity figure's error bars are over, in words, as the tables' headers say it (`of`: the
    quantity, where it is not the value drawn itself, e.g. "the ratio")."""
    if "interval" not in agg or "n_seeds" not in agg:
        return ""
    of = f" of {of}" if of else ""
    seeds = sorted({int(n) for n in agg.loc[agg["interval"] == "seeds", "n_seeds"]})
    if seeds:
        count = f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
        return f"bars: mean and 95% interval{of} over {count} seeds"
    if (agg["interval"] == "within").any():
        return f"bars: 95% interval{of} over held-out documents (one seed)"
    return ""


def perplexity_figure(agg, ratio: bool = False, title: str | None = None):
    """Perplexity vs evaluation length, one panel per family of encodings (`report.panels`) with plain RoPE in
    each as the reference line; with `ratio`, `agg` holds each cell's ratio to its base model at L and the
    ratio's own interval (`report.ratios.ratio_aggregate`), the band within ±10% of 1 shaded. The panels share
    the y axis, which spans at least ±10% around each line's value at L (`panels.span_floor`), so that a change
    of a percent or two never fills a frame.
    `agg`: results.aggregate restricted to task == perplexity, metric == ppl (or the ratios' aggregate)."""
    import numpy as np

    from extrapolate.report.panels import figure_panels, looks, span_floor, with_reference

    # a log axis takes neither inf (a perplexity that overflowed) nor NaN: those cells stay in the tables only
    ok = agg[(agg["status"] == "ok") & (agg["mean"] > 0) & (agg["mean"] < float("inf"))]
    curves = {}  # label -> (lengths, values, 95% interval as (2, n) distances below and above, value at L or first)
    for encoding, group in ok.groupby("encoding", sort=False):
        group = group.sort_values("eval_len")
        x, y = group["eval_len"].to_numpy(), group["mean"].to_numpy()
        err = interval_distances(group)  # (2, n)
        at_L = y[x == group["train_len"].to_numpy()]
        curves[str(encoding)] = (x, y, err, float(at_L[0] if len(at_L) else y[0]))
    grouped = figure_panels(curves)
    title = title or ("perplexity relative to the base model at L" if ratio else "perplexity vs evaluation length")
    notes = [f"shaded: within ±{PPL_TOLERANCE:.0%} of the base model at L"] if ratio else []
    notes += [bars] if (bars := bars_note(ok, "the ratio" if ratio else "")) else []
    fig, axes = panel_axes(
        len(grouped),
        title + "".join(f"\n{note}" for note in notes),
        "perplexity ÷ base model's perplexity at L (log scale)" if ratio else "perplexity (log scale)",
        "evaluation length (tokens, log₂ scale)",
    )
    lengths, train_lens = agg["eval_len"].unique().tolist(), agg["train_len"].unique().tolist()
    for ax, (panel, members) in zip(axes, grouped.items() or [("", [])]):
        if ratio:
            ax.axhspan(1 - PPL_TOLERANCE, 1 + PPL_TOLERANCE, facecolor="#d9d9d9", edgecolor="none", zorder=0)
        drawn = with_reference(members, curves)
        look = looks(drawn)
        for label in drawn:
            x, y, err, _ = curves[label]
            shown = label if label in members else f"{label} (reference)"
            if err.any():
                ax.errorbar(x, y, yerr=err, markersize=4, capsize=2, label=shown, **look[label].kwargs())
            else:  # no interval recorded: no error-bar glyph in the legend
                ax.plot(x, y, markersize=4, label=shown, **look[label].kwargs())
        _length_axis(ax, lengths, train_lens)
        ax.set_yscale("log")
        ax.set_title(panel, fontsize=10)
        panel_legend(ax)
    lows = [v for x, y, err, _ in curves.values() for v in np.where(y - err[0] > 0, y - err[0], y)]
    highs = [v for x, y, err, _ in curves.values() for v in y + err[1]]
    centres = [c for *_, c in curves.values()] + ([1.0] if ratio else [])
    limits = span_floor(min(lows, default=float("inf")), max(highs, default=0.0), centres, PPL_TOLERANCE)
    for ax in axes:
        ax.set_ylim(*limits)
        log_ticks(ax)
    return fig


def position_figure(positions, eval_len: int | None = None):
    """Mean NLL by position inside the window at the longest evaluated length, one panel per family of
    encodings (`report.panels`), plain RoPE in each as the reference line."""
    from extrapolate.report.panels import figure_panels, looks, with_reference

    eval_len = eval_len or int(positions["eval_len"].max())
    at = positions[positions["eval_len"] == eval_len]
    curves = {}
    for encoding, group in at.groupby("encoding", sort=False):
        by_bucket = group.groupby("bucket_start").apply(
            lambda g: (g["nll"] * g["n_tokens"]).sum() / g["n_tokens"].sum(), include_groups=False
        )
        width = float(group["bucket_end"].iloc[0] - group["bucket_start"].iloc[0])
        curves[str(encoding)] = (by_bucket.index + width / 2, by_bucket.to_numpy())
    grouped = figure_panels(curves)
    fig, axes = panel_axes(
        len(grouped),
        f"loss by position at evaluation length {eval_len}",
        "mean NLL (nats/token)",
        "position inside the window (bucket centre, tokens)",
    )
    for ax, (panel, members) in zip(axes, grouped.items() or [("", [])]):
        drawn = with_reference(members, curves)
        look = looks(drawn)
        for label in drawn:
            shown = label if label in members else f"{label} (reference)"
            ax.plot(*curves[label], markersize=3, markevery=4, label=shown, **look[label].kwargs())
        train_length_marks(ax, at["train_len"].unique())
        ax.set_title(panel, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        panel_legend(ax)
    return fig


MUTED = "hatched: measured past L, not a finding (the model does not retrieve at L)"


def passkey_figure(agg, metric: str = "accuracy", verdicts: dict[str, Verdict] | None = None):
    """One small heatmap per encoding: depth (rows) × evaluation length (columns), accuracy 0…1. Every measured
    cell is drawn with its value. `verdicts` (`report.retrieval.verdicts`; none: every model counts as
    retrieving at L): a model that does not retrieve at L says why under its name, and its cells past L are
    hatched over (measured, not a finding; italics in the tables). A cell the encoding cannot evaluate
    (learned positions past L) says "n/a"; a cell never measured is blank."""
    import numpy as np
    from matplotlib.patches import Rectangle

    cells = agg[of_kind(agg, PASSKEY) & (agg["metric"] == metric)]
    encodings = list(dict.fromkeys(cells["encoding"]))
    lengths = sorted(cells["eval_len"].unique())
    depths = sorted(cells["depth"].dropna().unique())
    colours = palette(encodings)
    columns = min(4, max(1, len(encodings)))
    rows = (len(encodings) + columns - 1) // columns
    height = 2.7 * rows + 1.4
    # fixed margins in inches: the suptitle and a two-line panel title above, the note below, at any row count
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(2.8 * columns + 1.2, height),
        dpi=120,
        squeeze=False,
        gridspec_kw={"hspace": 0.75, "wspace": 0.35, "top": 1 - 0.95 / height, "bottom": 0.75 / height},
    )
    image, muted_any = None, False
    for index, ax in enumerate(axes.flat):
        if index >= len(encodings):
            ax.axis("off")
            continue
        encoding = encodings[index]
        group = cells[cells["encoding"] == encoding]
        grid = np.full((len(depths), len(lengths)), np.nan)  # (depths, lengths), percent; NaN = nothing drawn
        labels = np.full(grid.shape, "", dtype=object)  # what an empty cell says
        verdict = (verdicts or {}).get(encoding)
        retrieves = verdict is None or verdict.retrieves
        muted = []  # cells past L of a model that does not retrieve at L
        for r in group.itertuples():
            cell = depths.index(r.depth), lengths.index(r.eval_len)
            if r.status != "ok":
                labels[cell] = "n/a"
                continue
            grid[cell] = 100 * r.mean
            if r.eval_len > r.train_len and not retrieves:
                muted.append(cell)
        image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto", origin="lower")
        for i, j in muted:
            ax.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    facecolor=(1, 1, 1, 0.6),
                    edgecolor=(0.3, 0.3, 0.3, 0.7),
                    hatch="////",
                    linewidth=0,
                )
            )
        muted_any = muted_any or bool(muted)
        for (i, j), value in np.ndenumerate(grid):
            label = labels[i, j] if np.isnan(value) else f"{value:.0f}"
            light = np.isnan(value) or value >= 60 or (i, j) in muted
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color="black" if light else "white", zorder=4)
        # two lines when the model does not retrieve: a long name and the reason would run into the next title
        title = encoding if retrieves else f"{encoding}\n{verdict.text}"
        ax.set_title(title, fontsize=9, color=readable(colours[encoding]))
        ax.set_xticks(range(len(lengths)))
        ax.set_xticklabels([f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n) for n in lengths], fontsize=7)
        ax.set_yticks(range(len(depths)))
        ax.set_yticklabels([f"{d:g}" for d in depths], fontsize=7)
        if index % columns == 0:
            ax.set_ylabel("key depth")
        if index // columns == rows - 1:
            ax.set_xlabel("length (tokens)")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label=f"passkey {metric.replace('_', ' ')} (%)")
    prompts = sorted({int(n) for n in cells.get("n", pd.Series(dtype=float)).dropna()})
    spread = ""
    if prompts:  # a heatmap has no room for bars: the widest interval a cell of this size can have, in words
        low, high = proportion_interval(prompts[0] / 2, prompts[0])
        seeds = sorted({int(k) for k in cells.get("n_seeds", pd.Series(dtype=float)).dropna() if k > 0})
        count = str(seeds[-1]) if len(seeds) < 2 else f"{seeds[0]}–{seeds[-1]}"
        over = "" if seeds in ([], [1]) else f" and seed, {count} seeds"  # a cell pools its seeds' prompts
        spread = (
            f" · {'/'.join(map(str, prompts))} prompts a cell{over}: 95% interval up to ±{(high - low) * 50:.0f} "
            f"points{' a seed' if over else ''}"
        )
    fig.suptitle(
        f"passkey {metric.replace('_', ' ')} by length × depth{spread}",
        fontsize=11 if not spread else 9,
        y=1 - 0.2 / height,
    )
    if muted_any:
        fig.text(0.5, 0.15 / height, MUTED, ha="center", fontsize=8, color="#444444")
    return fig
