"""The figure of `extrapolate bench`: evaluation speed and peak memory against length."""

from __future__ import annotations

from extrapolate.report.plots import colour, plt

OTHER_IMPLEMENTATION = "#222222"  # transformers' lines: no encoding's colour


def bench_figure(frame):
    """Evaluation tokens/s and peak memory vs length, one line per encoding (and transformers). Speeds come
    from the same-process rows where an encoding has them (comparable with each other), else from its
    fresh-process row; memory always from the fresh-process rows."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    evals = frame[frame["what"] == "eval"]
    # the group timed with the bias encodings first, then the one timed against transformers
    paired = frame[frame["what"].isin(["eval-paired", "eval-vs-transformers"])].sort_values("what")
    paired = paired.drop_duplicates(["implementation", "encoding", "length"])
    for (implementation, encoding), group in evals.groupby(["implementation", "encoding"]):
        label = encoding if implementation == "extrapolate" else f"{implementation} ({encoding})"
        style = "-" if implementation == "extrapolate" else "--"
        # another implementation of an encoding in a colour of its own: its dashes alone were easy to miss
        shade = colour(encoding) if implementation == "extrapolate" else OTHER_IMPLEMENTATION
        group = group.sort_values("length")
        same_process = paired[(paired["implementation"] == implementation) & (paired["encoding"] == encoding)]
        speeds = same_process.sort_values("length") if len(same_process) else group
        left.plot(speeds["length"], speeds["tokens_per_second"], style, marker="o", label=label, color=shade)
        right.plot(group["length"], group["peak_memory_mb"] / 1024, style, marker="o", label=label, color=shade)
    for ax, ylabel in ((left, "evaluation tokens / s"), (right, "peak memory (GB, whole process)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length (tokens, log₂ scale)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    left.set_title("evaluation speed (same process where measured)")
    right.set_title("peak memory")
    fig.tight_layout()
    return fig
