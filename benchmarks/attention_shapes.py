"""What the attention-alone benchmarks (`bias_floor.py`, `fused_variants.py`) share: the shape they time on
the command line, and their result rows, each kernel's best time beside RoPE's fused causal SDPA on the same
shapes, with the machine it ran on."""

import argparse
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from extrapolate.bench.timing import alternating_best
from extrapolate.core.machine import machine
from extrapolate.kernels.sdpa import sdpa

CPU = torch.device("cpu")
ROPE = ("rope", "sdpa")


def shape_parser(doc: str) -> argparse.ArgumentParser:
    """The options every attention-alone benchmark takes; a script adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    return parser


def random_qkv(args: argparse.Namespace, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    """Seeded queries, keys and values, each (1, H, T, Dh), and the generator for anything else drawn."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, args.heads, args.length, args.head_dim, generator=generator).to(dtype)
    return q, k, v, generator


def timed_rows(
    args: argparse.Namespace,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    contenders: dict[tuple[str, str], Callable[[], torch.Tensor]],
    **columns: object,
) -> list[dict]:
    """Each contender's best of `args.rounds` alternating rounds, as one row per (encoding, variant) with its
    time as a multiple of RoPE's on the same q, k, v (timed among them), and `columns` in every row."""
    contenders = {ROPE: lambda: sdpa(q, k, v, is_causal=True), **contenders}
    with torch.no_grad():
        best = alternating_best(contenders, args.rounds, CPU)
    return [
        {
            "encoding": name,
            "variant": label,
            "length": args.length,
            "heads": args.heads,
            "head_dim": args.head_dim,
            **columns,
            "seconds": seconds,
            "vs_rope": seconds / best[ROPE],
            **machine(CPU),
        }
        for (name, label), seconds in best.items()
    ]


def write_rows(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False)
