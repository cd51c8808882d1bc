"""Pure functions from data to matplotlib figures; saving is separate and atomic."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .encodings.frequencies import SCALINGS, rope_inv_freq  # noqa: E402

# One colour per encoding, kept across every plot.
COLOURS = {
    "sinusoidal": "#1f77b4", "learned": "#ff7f0e", "t5": "#2ca02c", "alibi": "#d62728", "rope": "#9467bd",
    "pi": "#8c564b", "ntk": "#e377c2", "dynamic-ntk": "#7f7f7f", "yarn": "#bcbd22", "dynamic-yarn": "#17becf",
    "llama3": "#393b79", "nope": "#000000",
}


def colour(name: str) -> str:
    return COLOURS.get(name, "#555555")


def frequency_figure(head_dim: int, base: float, factor: float, original_len: int, highlight: str | None = None):
    """inv_freq / θ per pair index for every RoPE scaling: the picture that tells PI, NTK and YaRN apart."""
    theta = rope_inv_freq(head_dim, base)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    seq_len = round(original_len * factor)
    for name, scaling in SCALINGS.items():
        inv_freq, _ = scaling.fn(head_dim, base, factor, original_len, seq_len)
        width = 2.8 if name == highlight else 1.6
        style = "--" if scaling.dynamic else "-"  # dynamic kinds shown at l = L·s
        ax.plot(range(head_dim // 2), (inv_freq / theta).tolist(), style, label=name, color=colour(name),
                linewidth=width)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("pair index j (high frequency → low frequency)")
    ax.set_ylabel("inv_freq / θ  (1 = unchanged, 1/s = interpolated)")
    ax.set_title(f"RoPE scalings: d={head_dim}, base={base:g}, s={factor:g}, L={original_len}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_figure(fig, path: Path | str) -> None:
    """Write atomically (temporary file, then rename); the format follows the suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix, prefix=".tmp-")
    os.close(fd)
    try:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
