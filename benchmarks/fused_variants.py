"""The fused bias kernels' exact variants (`kernels.fused_bias.fused_variants`), each timed on this CPU at one
length, in alternating rounds (best of `--rounds`), beside RoPE's fused causal SDPA on the same shapes: which
variant `kernels/tuning.py` would keep here, and how far the others are behind. Writes one CSV row per kernel
with the machine it ran on. Run from the repository root:

    python benchmarks/fused_variants.py --length 16384 --out results/bench-cpus/epyc/variants.csv
"""

import torch
from attention_shapes import random_qkv, shape_parser, timed_rows, write_rows

from extrapolate.encodings import build_encoding
from extrapolate.kernels.fused_bias import fused_bias_attention, fused_variants


def main() -> None:
    parser = shape_parser(__doc__)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = parser.parse_args()
    q, k, v, _ = random_qkv(args, getattr(torch, args.dtype))
    contenders = {}
    for name in ("alibi", "t5"):
        encoding = build_encoding(
            name, d_model=args.heads * args.head_dim, n_heads=args.heads, head_dim=args.head_dim, max_len=256
        )
        for label, (rows, skip) in fused_variants(encoding).items():
            contenders[(name, label)] = lambda e=encoding, r=rows, s=skip: fused_bias_attention(q, k, v, e, r, s)
    rows = timed_rows(args, q, k, v, contenders, dtype=args.dtype)
    write_rows(rows, args.out)
    for row in rows:
        print(f"{row['encoding']:6} {row['variant']:20} {row['seconds']:.3f} s  {row['vs_rope']:.2f}× RoPE")


if __name__ == "__main__":
    main()
