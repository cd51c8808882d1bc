"""What stick-breaking attention and CoPE cost against how far their sums run: each method's kernel beside RoPE's
fused causal SDPA on the same shapes, attention alone, in alternating rounds (best of `--rounds`), in two
regimes. `settling`: random queries and keys (the sticks spent and the counts past CoPE's table within a few
hundred keys, as in a model at initialisation), where both kernels end their walk early. `far`: every logit
about -32 (each key takes e^-32 of the stick, opens its gate as little), so no stick is spent and no count
reaches the table's end at any length, and both kernels walk every key: the methods' own cost, a transcendental
or two and a cumulative sum per query-key pair that no fused CPU kernel computes. One CSV row per kernel and
regime, with the machine it ran on. Run from the repository root:

    python benchmarks/attention_reach.py --length 16384 --out results/bench-attention/reach.csv
"""

import torch
from attention_shapes import random_qkv, shape_parser, timed_rows, write_rows

from extrapolate.kernels import contextual, stick_breaking
from extrapolate.kernels.blocked import BLOCK_ELEMENTS

TABLE_ROWS = 257  # CoPE's table at L = 256, the showcase's


def far_qkv(q, k, generator):
    """Queries and keys whose every logit is about -32: all keys near one direction u, every query against it."""
    dim = q.shape[-1]
    u = torch.randn(dim, generator=generator)
    u = u / u.norm()
    keys = u * 2 * dim**0.25 + 0.01 * torch.randn(k.shape, generator=generator)  # (1, H, T, Dh)
    queries = -8 * 2 * dim**0.25 * u.expand(q.shape)  # q·k/√d ≈ -32
    return queries.contiguous(), keys


def main() -> None:
    args = shape_parser(__doc__).parse_args()
    q, k, v, generator = random_qkv(args)
    table = torch.zeros(args.head_dim, TABLE_ROWS)  # CoPE's table from its initial zeros
    rows = []
    for regime, (queries, keys) in {"settling": (q, k), "far": far_qkv(q, k, generator)}.items():
        contenders = {
            ("stick-breaking", "own"): lambda a=queries, b=keys: stick_breaking.attention(a, b, v, BLOCK_ELEMENTS),
            ("cope", "own"): lambda a=queries, b=keys: contextual.attention(a, b, v, table, BLOCK_ELEMENTS),
        }
        rows += timed_rows(args, queries, keys, v, contenders, regime=regime)
    write_rows(rows, args.out)
    for row in rows:
        print(f"{row['regime']:9} {row['encoding']:15} {row['seconds']:.3f} s  {row['vs_rope']:.2f}× RoPE")


if __name__ == "__main__":
    main()
