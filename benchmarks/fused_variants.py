"""The fused bias kernels' exact variants (`kernels.fused_bias.fused_variants`), each timed on this CPU at one
length, in alternating rounds (best of `--rounds`), beside RoPE's fused causal SDPA on the same shapes: which
variant `kernels/tuning.py` would keep here, and how far the others are behind. Writes one CSV row per kernel
with the machine it ran on. Run from the repository root:

    python benchmarks/fused_variants.py --length 16384 --out results/bench-cpus/epyc/variants.csv
"""

import argparse
from pathlib import Path

import pandas as pd
import torch

from extrapolate.bench.measure import alternating_best
from extrapolate.core.machine import machine
from extrapolate.encodings import build_encoding
from extrapolate.kernels.fused_bias import fused_bias_attention, fused_variants
from extrapolate.kernels.sdpa import sdpa

CPU = torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, args.heads, args.length, args.head_dim, generator=generator).to(dtype)
    contenders = {("rope", "sdpa"): lambda: sdpa(q, k, v, is_causal=True)}
    for name in ("alibi", "t5"):
        encoding = build_encoding(
            name, d_model=args.heads * args.head_dim, n_heads=args.heads, head_dim=args.head_dim, max_len=256
        )
        for label, (rows, skip) in fused_variants(encoding).items():
            contenders[(name, label)] = lambda e=encoding, r=rows, s=skip: fused_bias_attention(q, k, v, e, r, s)
    with torch.no_grad():
        best = alternating_best(contenders, args.rounds, CPU)
    rope = best[("rope", "sdpa")]
    rows = [
        {
            "encoding": name,
            "variant": label,
            "length": args.length,
            "heads": args.heads,
            "head_dim": args.head_dim,
            "dtype": args.dtype,
            "seconds": seconds,
            "vs_rope": seconds / rope,
            **machine(CPU),
        }
        for (name, label), seconds in best.items()
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)
    for row in rows:
        print(f"{row['encoding']:6} {row['variant']:20} {row['seconds']:.3f} s  {row['vs_rope']:.2f}× RoPE")


if __name__ == "__main__":
    main()
